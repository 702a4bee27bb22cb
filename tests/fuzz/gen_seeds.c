/* gen_seeds.c: writes the seed inputs of the table and document file fuzz
 * targets into CORPUS/table_open/, CORPUS/block_decode/ and
 * CORPUS/sims_docfile_open/ (input layouts are described at the top of
 * fuzz_table_open.c, fuzz_block_decode.c and fuzz_docfile_open.c): valid
 * tables of several shapes and block sizes in each open mode, valid blocks
 * with their code lengths, weights and round-trip words, and valid document
 * files (ids of one length and of many, metadata, sketches, repeated
 * fingerprints) in both open modes. Fuzzer finds are added
 * beside them by hand (named find-*). Run by hand:
 *   fuzz_seed_gen tests/fuzz/corpus */
#include "codec/bitio.h"
#include "codec/block.h"
#include "codec/huffman.h"
#include "common/bytes.h"
#include "docfile/docfile.h"
#include "simstore.h"
#include "table/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *corpus;
static uint64_t rng_state = 12345;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static size_t sort_unique(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    return m;
}

static void put(const char *target, const char *name, const uint8_t *a, size_t na, const uint8_t *b,
                size_t nb)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", corpus, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (na && fwrite(a, 1, na, f) != na) || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f)) {
        fprintf(stderr, "fuzz_seed_gen: cannot write %s\n", path);
        exit(1);
    }
}

/* One table in open modes 0 (as is), 1 (checksums repaired) and 3 (repaired,
 * block checksums skipped). */
static void table_seed(const char *name, uint32_t block_bytes, const uint64_t *v, size_t n)
{
    table_params p;
    memset(&p, 0, sizeof p);
    p.block_bytes = block_bytes;
    p.prefix_bits = (uint8_t)(n % 65);
    for (unsigned i = 0; i < 64; i++)
        p.perm[i] = (uint8_t)(63 - i);
    p.store_tag = 0xF0221EDULL;
    p.table_index = (uint32_t)n;
    uint8_t *buf;
    size_t size;
    if (sims_table_encode_memory(&p, v, n, &buf, &size)) {
        fprintf(stderr, "fuzz_seed_gen: %s: %s\n", name, simstore_last_error());
        exit(1);
    }
    static const uint8_t modes[] = {0, 1, 3};
    for (size_t m = 0; m < sizeof modes; m++) {
        char fname[256];
        snprintf(fname, sizeof fname, "%s-mode%u", name, modes[m]);
        put("table_open", fname, &modes[m], 1, buf, size);
    }
    free(buf);
}

static void table_seeds(void)
{
    enum { MAX = 3000 };
    uint64_t *v = calloc(MAX, sizeof *v);
    size_t n;
    if (!v)
        exit(1);

    table_seed("empty-1k", 1024, v, 0);
    v[0] = 0x0123456789abcdefULL;
    table_seed("one-256", 256, v, 1);
    v[0] = 0;
    v[1] = UINT64_MAX;
    table_seed("extremes-256", 256, v, 2);

    for (n = 0; n < 300; n++)
        v[n] = rng_next();
    n = sort_unique(v, n);
    table_seed("uniform300-256", 256, v, n);

    for (n = 0; n < 600; n++)
        v[n] = rng_next();
    n = sort_unique(v, n);
    table_seed("uniform600-1k", 1024, v, n);

    for (n = 0; n < 2500; n++)
        v[n] = 777 + n;
    table_seed("dense2500-256", 256, v, n);

    for (n = 0; n < 800; n++)
        v[n] = ((rng_next() % 4) << 60) + (rng_next() >> (24 + rng_next() % 30));
    n = sort_unique(v, n);
    table_seed("clustered800-512", 512, v, n);

    for (n = 0; n < 400; n++)
        v[n] = (rng_next() >> 1) | ((uint64_t)1 << 63);
    n = sort_unique(v, n);
    table_seed("high400-4k", 4096, v, n);

    free(v);
}

/* ---- block_decode ----------------------------------------------------------- */

#define HDR 86

static void block_seed(const char *name, unsigned mode_bits, size_t block_bytes, int raw_first,
                       const uint64_t *v, size_t n, uint64_t prev)
{
    /* Byte weights (1..255) shaped like the values' histogram. */
    uint64_t hist[64] = {0}, maxc = 0;
    for (size_t i = raw_first ? 1 : 0; i < n; i++)
        hist[bitio_msb(v[i] - (i ? v[i - 1] : prev))]++;
    for (unsigned s = 0; s < 64; s++)
        if (hist[s] > maxc)
            maxc = hist[s];
    uint8_t weights[64];
    uint64_t whist[64];
    for (unsigned s = 0; s < 64; s++) {
        uint64_t w = hist[s] ? 1 + hist[s] * 254 / (maxc ? maxc : 1) : 0;
        weights[s] = (uint8_t)(w > 255 ? 255 : w);
        whist[s] = weights[s];
    }
    uint8_t lengths[64];
    codec_huff_encoder enc;
    if (sims_codec_huff_lengths(whist, CODEC_HUFF_MAX_BITS, lengths) ||
        sims_codec_huff_encoder_init(&enc, lengths))
        exit(1);
    uint8_t *block = malloc(block_bytes + BITIO_WRITER_SLACK);
    size_t used = 0;
    if (mode_bits & 8) {
        /* Version 2: the first value that does not fit is the block's last,
         * implicit (the decoder gets it as the key). */
        codec_block_encoder e;
        sims_codec_block_encoder_start(&e, &enc, block, block_bytes, raw_first, prev);
        while (used < n) {
            int rc = sims_codec_block_encoder_put(&e, v[used]);
            if (rc < 0)
                exit(1);
            if (rc == 0)
                sims_codec_block_encoder_put_implicit(&e, v[used]);
            used++;
            if (rc == 0)
                break;
            if (used == n)
                sims_codec_block_encoder_drop_last(&e);
        }
    } else if (sims_codec_block_encode(&enc, block, block_bytes, raw_first, prev, v, n, &used) ||
               !used) {
        exit(1);
    }
    unsigned size_code = 0;
    while (((size_t)SIMSTORE_MIN_BLOCK_BYTES << size_code) < block_bytes)
        size_code++;
    uint8_t hdr[HDR] = {0};
    for (unsigned op = 0; op < 2; op++) {
        hdr[0] = (uint8_t)(op | (raw_first ? 4 : 0) | size_code << 4 | mode_bits);
        memcpy(hdr + 1, op == 0 ? lengths : weights, 64);
        le_store64(hdr + 65, prev);
        le_store32(hdr + 73, (uint32_t)used);
        le_store64(hdr + 77, v[used - 1]);
        hdr[85] = (uint8_t)(used % 200);
        char fname[256];
        snprintf(fname, sizeof fname, "%s-%s", name, op == 0 ? "lengths" : "weights");
        put("block_decode", fname, hdr, HDR, block, block_bytes);
    }
    free(block);
}

static void block_seeds(void)
{
    enum { MAX = 20000 };
    uint64_t *v = calloc(MAX, sizeof *v);
    if (!v)
        exit(1);
    size_t n;
    for (n = 0; n < 400; n++)
        v[n] = rng_next();
    n = sort_unique(v, n);
    block_seed("uniform-256-raw", 0, 256, 1, v, n, 0);
    block_seed("uniform-1k", 0, 1024, 0, v + 1, n - 1, v[0]);
    block_seed("uniform-256-raw-implicit", 8, 256, 1, v, n, 0);
    block_seed("uniform-1k-implicit", 8, 1024, 0, v + 1, n - 1, v[0]);
    for (n = 0; n < 5000; n++)
        v[n] = 1000 + 3 * n + (rng_next() & 1);
    block_seed("dense-512", 0, 512, 0, v, n, 999);
    block_seed("dense-512-implicit", 8, 512, 0, v, n, 999);
    block_seed("dense-2k-raw", 0, 2048, 1, v, n, 0);
    for (n = 0; n < 300; n++)
        v[n] = rng_next() >> (rng_next() % 64);
    n = sort_unique(v, n);
    block_seed("mixed-256", 0, 256, 0, v + 1, n - 1, v[0]);

    /* Round trips: header then words. */
    uint8_t hdr[HDR] = {0};
    uint64_t words[64];
    for (unsigned k = 0; k < 6; k++) {
        /* k = 4, 5: version 2's implicit last value, 256 and 512 bytes. */
        hdr[0] = (uint8_t)(2 | (k & 1 ? 4 : 0) | ((k & 3) << 4) | (k >= 4 ? 8 : 0));
        le_store64(hdr + 65, rng_next() >> (8 * k));
        for (unsigned i = 0; i < 64; i++)
            le_store64(&words[i], rng_next());
        char fname[64];
        snprintf(fname, sizeof fname, "roundtrip-%u", k);
        put("block_decode", fname, hdr, HDR, (const uint8_t *)words, 8u * (16 + 16 * (k & 3)));
    }
    free(v);
}

/* A document file of n documents: `dups` fingerprints repeated, ids of
 * one length or not, every `meta_every`-th with metadata; both modes. */
static void docfile_seed(const char *name, size_t n, int dups, int fixed_ids, size_t meta_every,
                         unsigned sketch_bytes)
{
    char path[4096], id[32], file[64];
    snprintf(path, sizeof path, "%s/sims_docfile_open/.seed.tmp", corpus);
    uint64_t *fp = malloc(n * sizeof *fp);
    for (size_t i = 0; i < n; i++)
        fp[i] = dups ? 0x1000 + rng_next() % 4 : rng_next();
    qsort(fp, n, sizeof *fp, cmp_u64);
    docfile_writer *w;
    if (sims_docfile_writer_open(path, sketch_bytes, 0, NULL, &w))
        exit(1);
    uint8_t sketch[256];
    for (size_t i = 0; i < n; i++) {
        /* Ids ascend with i, so (fingerprint, id) ascends too. */
        int len = fixed_ids ? snprintf(id, sizeof id, "d%08zx", i)
                            : snprintf(id, sizeof id, "%06zu%.*s", i, (int)(i % 7), "xxxxxxx");
        for (unsigned k = 0; k < sketch_bytes; k++)
            sketch[k] = (uint8_t)rng_next();
        docfile_doc d = {0,
                         fp[i],
                         ((uint64_t)1 << 40) | i,
                         (const uint8_t *)id,
                         (uint32_t)len,
                         !fixed_ids && i % 3 == 0,
                         NULL,
                         0,
                         sketch_bytes ? sketch : NULL,
                         NULL,
                         0};
        if (meta_every && i % meta_every == 0) {
            d.meta = (const uint8_t *)"{\"k\":1}";
            d.meta_len = 7;
        }
        /* Paragraph lists beside the metadata, of 1..3 paragraphs. */
        uint8_t paras[24];
        if (meta_every && i % meta_every == 1) {
            for (size_t k = 0; k < sizeof paras; k++)
                paras[k] = (uint8_t)rng_next();
            d.paragraphs = paras;
            d.paragraph_count = (uint32_t)(1 + i % 3);
        }
        if (sims_docfile_writer_add(w, &d))
            exit(1);
    }
    if (sims_docfile_writer_commit(w, NULL))
        exit(1);
    free(fp);
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 20];
    size_t got = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    remove(path);
    for (uint8_t mode = 0; mode < 2; mode++) {
        snprintf(file, sizeof file, "%s-mode%u", name, mode);
        put("sims_docfile_open", file, &mode, 1, buf, got);
    }
}

static void docfile_seeds(void)
{
    docfile_seed("empty", 0, 0, 1, 0, 0);
    docfile_seed("one", 1, 0, 1, 0, 0);
    docfile_seed("fixed70", 70, 0, 1, 0, 0);
    docfile_seed("mixed130-meta-sketch", 130, 0, 0, 5, 16);
    docfile_seed("dups200", 200, 1, 0, 0, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seed_gen CORPUS_DIR\n");
        return 2;
    }
    corpus = argv[1];
    table_seeds();
    block_seeds();
    docfile_seeds();
    return 0;
}
