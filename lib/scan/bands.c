/* bands.c: the near-duplicate rule's band candidates over a store
 * (format/sketch.md 6.2): every pair of distinct fingerprints more than k
 * apart whose documents' sketches agree on one band, found by sorting
 * (band, key, fingerprint) records in bounded memory and pushed into the
 * join's pair sorter beside the pairs within k. */
#include "scan/bands.h"
#include "scan/joinall.h"
#include "scan/pairs.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/sketch.h"
#include "sort/spool.h"

#include <stdlib.h>
#include <string.h>

#define BAND_KEY_BYTES 14 /* band (2), key (4), fingerprint (8): big-endian */
#define FP_CHUNK 1024

/* Every (band, key, fp) of fp's documents with sketches. */
static int push_fp_bands(scan_state *st, uint64_t fp, unsigned rows, unsigned count,
                         scan_docs *docs, sims_recsort *out)
{
    int rc = sims_scan_docs_load(st, fp, 0, docs);
    uint8_t key[BAND_KEY_BYTES];
    be_store64(key + 6, fp);
    for (size_t i = 0; rc == 0 && i < docs->count; i++) {
        const uint8_t *sk = scan_doc_sketch(docs, i);
        if (!sk)
            continue;
        for (unsigned b = 0; rc == 0 && b < count; b++) {
            key[0] = (uint8_t)(b >> 8);
            key[1] = (uint8_t)b;
            be_store32(key + 2, sims_sketch_band_key(sk, rows, b));
            rc = sims_recsort_push(out, key, sizeof key, NULL, 0);
        }
    }
    docs->valid = 0;
    return rc;
}

/* One group of fingerprints sharing a band key (ascending, repeats
 * dropped): each pair more than k apart into the join's sorter. */
static int push_group(const uint64_t *fps, size_t n, unsigned k, sims_recsort *joined)
{
    uint8_t key[16], val[1];
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            unsigned d = sims_distance(fps[i], fps[j]);
            if (d <= k)
                continue; /* the join's own */
            be_store64(key, fps[i]);
            be_store64(key + 8, fps[j]);
            val[0] = (uint8_t)d;
            int rc = sims_recsort_push(joined, key, sizeof key, val, sizeof val);
            if (rc)
                return rc;
        }
    return 0;
}

static int read_groups(sims_recsort *bands, unsigned k, sims_recsort *joined)
{
    uint64_t *group = NULL;
    size_t n = 0, cap = 0;
    uint8_t head[6];
    sims_rec rec;
    int got, rc = 0;
    while (rc == 0 && (got = sims_recsort_next(bands, &rec)) == 1) {
        if (rec.key_len != BAND_KEY_BYTES) {
            rc = sims_fail(SIMSTORE_EIO, "band sorter: a record of %u bytes", rec.key_len);
            break;
        }
        uint64_t fp = be_load64(rec.key + 6);
        if (n && memcmp(head, rec.key, sizeof head) != 0) {
            rc = push_group(group, n, k, joined);
            n = 0;
        }
        if (n == 0)
            memcpy(head, rec.key, sizeof head);
        else if (group[n - 1] == fp)
            continue;
        if (rc == 0 && n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            uint64_t *g = realloc(group, ncap * sizeof *g);
            if (!g)
                rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for a band's fingerprints");
            else {
                group = g;
                cap = ncap;
            }
        }
        if (rc == 0)
            group[n++] = fp;
    }
    if (rc == 0 && got < 0)
        rc = got;
    if (rc == 0 && n)
        rc = push_group(group, n, k, joined);
    free(group);
    return rc;
}

int sims_scan_band_pairs(scan_state *st, const simstore_scan_options *o, sims_recsort *joined)
{
    unsigned rows, count;
    simstore_sketch_bands(st->s->text.sketch, o->min_similarity, &rows, &count);
    if (!o->bands || !count || st->fp_only)
        return 0;
    sims_spool *fps = NULL;
    sims_recsort *bands = NULL;
    scan_docs docs;
    memset(&docs, 0, sizeof docs);
    int rc = sims_spool_new(FP_CHUNK * 64, sims_scan_tmp_dir(o), &fps);
    if (rc == 0)
        rc = sims_scan_store_distinct_spool(st->s, st->snap, fps);
    if (rc == 0)
        rc = sims_spool_seal(fps);
    if (rc == 0)
        rc = sims_scan_sorter_new(o, 4, &bands);
    uint64_t total = fps ? sims_spool_count(fps) : 0, done = 0;
    if (rc == 0 && o->progress)
        o->progress(o->progress_ctx, "banding sketches", 0, total);
    if (rc == 0) {
        sims_spool_reader rd;
        sims_spool_reader_init(&rd, fps);
        uint64_t buf[FP_CHUNK];
        size_t n;
        while (rc == 0 && (rc = sims_spool_read(&rd, buf, FP_CHUNK, &n)) == 0 && n) {
            for (size_t i = 0; rc == 0 && i < n; i++)
                rc = push_fp_bands(st, buf[i], rows, count, &docs, bands);
            done += n;
            if (rc == 0 && o->progress)
                o->progress(o->progress_ctx, "banding sketches", done, total);
        }
    }
    sims_spool_free(fps);
    sims_scan_docs_free(&docs);
    if (rc == 0)
        rc = sims_recsort_finish(bands, (size_t)(o->memory_bytes / 4));
    if (rc == 0)
        rc = read_groups(bands, o->k, joined);
    sims_recsort_free(bands);
    return rc;
}
