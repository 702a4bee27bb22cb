/* quality_features.c: the shingle sets of the quality benchmark (bench/quality/):
 * for each JSON Lines record, its distinct features under fingerprint version
 * 2 in character-bigram mode (w = 3, c = 2; format/fingerprint.md, section
 * 13) as sorted XXH3-64 hashes, or with --words W its word W-shingles with
 * every Han or kana character a word, and optionally their N-permutation
 * MinHash signature. The features are the Jaccard truth of the benchmark and
 * the MinHash baseline's input; lib/text normalizes and tokenizes, so the
 * default features are those `simstore fingerprint --cjk bigram` hashes.
 *
 *   quality_features [--features FILE] [--minhash N --signatures FILE]
 *                    [--seed S] [--words W] CORPUS.jsonl
 *
 * --words W (issue 36's truth, bench/quality/thresholds.py): the text
 * normalized as above (NFKC, case folding), its tokens those of lib/text
 * except that each Han or kana character is a token of its own (a space is
 * put after each before tokenizing, so spaced and unspaced Chinese, and
 * Chinese across line breaks, give the same tokens), and the features every
 * run of W consecutive tokens joined by one space; a document of fewer than
 * W tokens has the one feature of all its tokens.
 *
 * Both outputs are little-endian binary, one entry per non-blank input line
 * in input order: --features writes a 32-bit count n and n 64-bit hashes in
 * increasing order; --signatures writes N 64-bit minima, permutation i being
 * x -> (a_i (x mod p) + b_i) mod p with p = 2^61 - 1 and (a_i, b_i) drawn
 * from splitmix64 seeded with S (default 1), as datasketch's MinHash does
 * with its own hashes. Exit status 0, 1 on a bad record or an I/O error. */
#include "simstore.h"
#include "text/normalize.h"
#include "text/tokenize.h"
#include "text/unicode.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

__extension__ typedef unsigned __int128 u128;

#define WORD_SHINGLE 3
#define CJK_SHINGLE 2
#define MERSENNE61 ((1ULL << 61) - 1)

/* The tokens of one document: their bytes joined end to end, with offsets. */
typedef struct token_list {
    char *bytes;
    size_t bytes_len, bytes_cap;
    size_t *start; /* token i is bytes[start[i] .. start[i + 1]) */
    unsigned char *cjk;
    size_t count, start_cap, cjk_cap;
} token_list;

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) {
        fprintf(stderr, "quality_features: out of memory\n");
        exit(1);
    }
    *cap = c;
    return q;
}

static int add_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk)
{
    token_list *t = ctx;
    (void)codepoints;
    t->start = grow(t->start, &t->start_cap, t->count + 2, sizeof *t->start);
    t->cjk = grow(t->cjk, &t->cjk_cap, t->count + 2, sizeof *t->cjk);
    t->bytes = grow(t->bytes, &t->bytes_cap, t->bytes_len + len, 1);
    t->start[t->count] = t->bytes_len;
    t->cjk[t->count] = (unsigned char)(cjk != 0);
    memcpy(t->bytes + t->bytes_len, bytes, len);
    t->bytes_len += len;
    t->count++;
    t->start[t->count] = t->bytes_len;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The features of section 13.3: each token starts a shingle of its kind's
 * width; every whole shingle, and the first one to reach the last token
 * when the end cuts it. Returns the number of distinct hashes in *out. */
static size_t shingle_hashes(const token_list *t, uint64_t **out, size_t *out_cap, char **buf,
                             size_t *buf_cap)
{
    size_t n = t->count, used = 0;
    int reached = 0;
    for (size_t i = 0; i < n; i++) {
        size_t end = i + (t->cjk[i] ? CJK_SHINGLE : WORD_SHINGLE);
        if (end > n) {
            if (reached)
                continue;
            end = n;
        }
        if (end == n)
            reached = 1;
        size_t len = 0;
        for (size_t j = i; j < end; j++) {
            size_t tl = t->start[j + 1] - t->start[j];
            *buf = grow(*buf, buf_cap, len + tl + 1, 1);
            if (j > i)
                (*buf)[len++] = ' ';
            memcpy(*buf + len, t->bytes + t->start[j], tl);
            len += tl;
        }
        *out = grow(*out, out_cap, used + 1, sizeof **out);
        (*out)[used++] = XXH3_64bits(*buf, len);
    }
    if (used == 0)
        return 0;
    qsort(*out, used, sizeof **out, cmp_u64);
    size_t distinct = 1;
    for (size_t i = 1; i < used; i++)
        if ((*out)[i] != (*out)[distinct - 1])
            (*out)[distinct++] = (*out)[i];
    return distinct;
}

/* Word shingles (--words W): every W consecutive tokens, or all of them when
 * there are fewer. Returns the number of distinct hashes in *out. */
static size_t word_shingle_hashes(const token_list *t, size_t w, uint64_t **out, size_t *out_cap,
                                  char **buf, size_t *buf_cap)
{
    size_t n = t->count, used = 0;
    size_t starts = n >= w ? n - w + 1 : 1;
    for (size_t i = 0; i < starts; i++) {
        size_t end = i + w < n ? i + w : n, len = 0;
        for (size_t j = i; j < end; j++) {
            size_t tl = t->start[j + 1] - t->start[j];
            *buf = grow(*buf, buf_cap, len + tl + 1, 1);
            if (j > i)
                (*buf)[len++] = ' ';
            memcpy(*buf + len, t->bytes + t->start[j], tl);
            len += tl;
        }
        *out = grow(*out, out_cap, used + 1, sizeof **out);
        (*out)[used++] = XXH3_64bits(*buf, len);
    }
    qsort(*out, used, sizeof **out, cmp_u64);
    size_t distinct = 1;
    for (size_t i = 1; i < used; i++)
        if ((*out)[i] != (*out)[distinct - 1])
            (*out)[distinct++] = (*out)[i];
    return distinct;
}

/* text[0..len) with a space after every Han or kana code point, into *out:
 * so that the tokenizer makes each one a token of its own. */
static size_t space_cjk(const uint8_t *text, size_t len, uint8_t **out, size_t *out_cap)
{
    const uint8_t *p = text, *end = text + len;
    size_t used = 0;
    *out = grow(*out, out_cap, 2 * len + 1, 1);
    while (p < end) {
        size_t n = 1;
        uint32_t cp = sims_utf8_decode(p, end, &n);
        if (n == 0)
            n = 1;
        memcpy(*out + used, p, n);
        used += n;
        unsigned kind = cp < 0x110000 ? sims_uc_class(cp) & SIMS_UC_KIND : SIMS_UC_SEP;
        if (kind == SIMS_UC_HAN || kind == SIMS_UC_KANA)
            (*out)[used++] = ' ';
        p += n;
    }
    return used;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t mod61(u128 v)
{
    uint64_t r = (uint64_t)(v & MERSENNE61) + (uint64_t)(v >> 61);
    r = (r & MERSENNE61) + (r >> 61);
    return r >= MERSENNE61 ? r - MERSENNE61 : r;
}

static int write_le64(FILE *f, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return fwrite(b, 1, 8, f) == 8 ? 0 : -1;
}

static int write_le32(FILE *f, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static void usage(void)
{
    fprintf(stderr, "usage: quality_features [--features FILE] [--minhash N --signatures FILE] "
                    "[--seed S] [--words W] CORPUS.jsonl\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *features_path = NULL, *signatures_path = NULL, *corpus_path = NULL;
    unsigned long permutations = 0, words = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--features") && i + 1 < argc)
            features_path = argv[++i];
        else if (!strcmp(argv[i], "--signatures") && i + 1 < argc)
            signatures_path = argv[++i];
        else if (!strcmp(argv[i], "--minhash") && i + 1 < argc)
            permutations = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--words") && i + 1 < argc)
            words = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (argv[i][0] == '-' || corpus_path)
            usage();
        else
            corpus_path = argv[i];
    }
    if (!corpus_path || (!features_path && !signatures_path) ||
        (signatures_path && (permutations < 1 || permutations > 4096)) || words > 64)
        usage();

    FILE *in = fopen(corpus_path, "rb");
    FILE *feat = features_path ? fopen(features_path, "wb") : NULL;
    FILE *sig = signatures_path ? fopen(signatures_path, "wb") : NULL;
    if (!in || (features_path && !feat) || (signatures_path && !sig)) {
        fprintf(stderr, "quality_features: cannot open a file: %s\n", strerror(errno));
        return 1;
    }
    uint64_t *perm_a = calloc(permutations + 1, sizeof *perm_a);
    uint64_t *perm_b = calloc(permutations + 1, sizeof *perm_b);
    uint64_t *minima = calloc(permutations + 1, sizeof *minima);
    for (unsigned long p = 0; p < permutations; p++) {
        perm_a[p] = splitmix64(&seed) % (MERSENNE61 - 1) + 1;
        perm_b[p] = splitmix64(&seed) % MERSENNE61;
    }

    sims_tokenizer tok;
    sims_tokenizer_init(&tok, NULL); /* no friso task: Han runs as bigrams */
    tok.join_lines = words == 0; /* --words: every Han or kana character is followed by a space */
    sims_normalizer norm;
    sims_normalizer_init(&norm);
    token_list tokens = {0};
    uint64_t *hashes = NULL;
    size_t hashes_cap = 0, buf_cap = 0;
    char *buf = NULL, *line = NULL;
    uint8_t *spaced = NULL;
    size_t spaced_cap = 0;
    size_t line_cap = 0;
    ssize_t line_len;
    unsigned long line_no = 0;
    int status = 0;
    while ((line_len = getline(&line, &line_cap, in)) > 0) {
        line_no++;
        if (strspn(line, " \t\r\n") == (size_t)line_len)
            continue;
        json_error_t jerr;
        json_t *rec = json_loadb(line, (size_t)line_len, 0, &jerr);
        const char *text = NULL;
        size_t text_len = 0;
        if (rec && json_is_string(json_object_get(rec, "text"))) {
            text = json_string_value(json_object_get(rec, "text"));
            text_len = json_string_length(json_object_get(rec, "text"));
        }
        if (!text) {
            fprintf(stderr, "quality_features: %s:%lu: not a record with a text\n", corpus_path,
                    line_no);
            json_decref(rec);
            status = 1;
            break;
        }
        const uint8_t *normalized;
        size_t normalized_len;
        int invalid = 0;
        tokens.count = 0;
        tokens.bytes_len = 0;
        int failed =
            sims_normalize(&norm, (const uint8_t *)text, text_len, &normalized, &normalized_len);
        if (!failed && words) {
            normalized_len = space_cjk(normalized, normalized_len, &spaced, &spaced_cap);
            normalized = spaced;
        }
        if (failed ||
            sims_tokenize(&tok, normalized, normalized_len, add_token, &tokens, &invalid)) {
            fprintf(stderr, "quality_features: out of memory\n");
            json_decref(rec);
            status = 1;
            break;
        }
        json_decref(rec);
        size_t n = !tokens.count ? 0
                   : words
                       ? word_shingle_hashes(&tokens, words, &hashes, &hashes_cap, &buf, &buf_cap)
                       : shingle_hashes(&tokens, &hashes, &hashes_cap, &buf, &buf_cap);
        int werr = 0;
        if (feat) {
            werr |= write_le32(feat, (uint32_t)n);
            for (size_t i = 0; i < n; i++)
                werr |= write_le64(feat, hashes[i]);
        }
        if (sig) {
            for (unsigned long p = 0; p < permutations; p++)
                minima[p] = MERSENNE61;
            for (size_t i = 0; i < n; i++) {
                uint64_t x = mod61(hashes[i]);
                for (unsigned long p = 0; p < permutations; p++) {
                    uint64_t h = mod61((u128)perm_a[p] * x + perm_b[p]);
                    if (h < minima[p])
                        minima[p] = h;
                }
            }
            for (unsigned long p = 0; p < permutations; p++)
                werr |= write_le64(sig, minima[p]);
        }
        if (werr) {
            fprintf(stderr, "quality_features: write failed: %s\n", strerror(errno));
            status = 1;
            break;
        }
    }
    if ((feat && fclose(feat)) || (sig && fclose(sig))) {
        fprintf(stderr, "quality_features: write failed: %s\n", strerror(errno));
        status = 1;
    }
    fclose(in);
    sims_tokenizer_release(&tok);
    sims_normalizer_release(&norm);
    free(tokens.bytes);
    free(tokens.start);
    free(tokens.cjk);
    free(hashes);
    free(buf);
    free(spaced);
    free(line);
    free(perm_a);
    free(perm_b);
    free(minima);
    return status;
}
