/* owners.c: documents at their fingerprint's owner, and the document pairs made there.
 * Every rank exports its shard and sends each document (its id, keep
 * order, flags and sketch: sdoc) to the rank owning its fingerprint
 * (owner_of), which then holds every document of each fingerprint it owns;
 * the owned fingerprints of all ranks are the distinct fingerprints. A
 * fingerprint-only store's documents are its fingerprints (ids: their
 * hex). each_pair turns the join's fingerprint pairs into document pairs:
 * a's documents travel to the owner of b. */
#include "scan_internal.h"

#include "cli.h"

#include <stdlib.h>
#include <string.h>

void put_doc(buf *b, const sdoc *d)
{
    put64(b, d->fp);
    put64(b, d->key);
    put64(b, d->keep);
    put(b, &d->flags, 1);
    put32(b, d->id_len);
    put32(b, d->sketch ? d->sketch_len : 0);
    put(b, d->id, d->id_len);
    if (d->sketch)
        put(b, d->sketch, d->sketch_len);
}

void get_doc(const char **p, sdoc *d)
{
    d->fp = get_u64(p);
    d->key = get_u64(p);
    d->keep = get_u64(p);
    d->flags = (uint8_t) * (*p)++;
    d->id_len = get_u32(p);
    d->sketch_len = get_u32(p);
    d->id = *p;
    *p += d->id_len;
    d->sketch = d->sketch_len ? (const uint8_t *)*p : NULL;
    *p += d->sketch_len;
}

static int by_fp_id(const void *x, const void *y)
{
    const sdoc *a = x, *b = y;
    if (a->fp != b->fp)
        return a->fp < b->fp ? -1 : 1;
    return id_cmp(a->id, a->id_len, b->id, b->id_len);
}

typedef struct export_ctx {
    buf *out;
    const simstore_cluster_options *keep;
    int fp_only;
} export_ctx;

/* A fingerprint-only store's documents are its fingerprints: each travels
 * as a document whose id is its 16 hex digits (whose byte order is the
 * fingerprints' order, the single-node commands' order of them) and whose
 * keep order is 0 (so the smallest is kept, as they keep it). */
static int export_doc(void *ctx, const simstore_document *doc)
{
    export_ctx *x = (export_ctx *)ctx;
    char hex[17];
    sdoc d = {doc->fp,
              0,
              simstore_keep_order(x->keep, doc),
              doc->id,
              doc->sketch,
              (uint32_t)doc->id_len,
              (uint32_t)doc->sketch_bytes,
              (uint8_t)doc->flags};
    if (x->fp_only) {
        cli_format_hex64(doc->fp, hex);
        d.keep = 0;
        d.id = hex;
        d.id_len = 16;
        d.sketch = NULL;
        d.sketch_len = 0;
        d.flags = 0;
    }
    put_doc(&x->out[owner_of(doc->fp)], &d);
    return 0;
}

void owned_free(owned *o)
{
    bufs_free(o->in);
    free(o->docs);
    free(o->fps);
    free(o->first);
    memset(o, 0, sizeof *o);
}

/* fp's node, or SIZE_MAX. */
size_t node_of(const owned *o, uint64_t fp)
{
    size_t lo = 0, hi = o->nfps;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (o->fps[m] < fp)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < o->nfps && o->fps[lo] == fp ? lo : SIZE_MAX;
}

/* Every rank exports its shard; the documents meet at their owners.
 * Returns 0, or -1 (said) when this rank's export failed. Collective. */
int gather_owned(simstore *s, const simstore_cluster_options *keep, int fp_only, owned *o)
{
    memset(o, 0, sizeof *o);
    buf *out = bufs_new();
    export_ctx x = {out, keep, fp_only};
    int failed = 0;
    int rc = simstore_export(s, NULL, 0, export_doc, &x);
    if (rc) {
        say("reading the documents: %s", simstore_last_error());
        failed = 1;
        for (int i = 0; i < nranks; i++)
            out[i].len = 0;
    }
    o->in = bufs_new();
    exchange_bufs(out, o->in, chunk_bytes);
    bufs_free(out);
    size_t n = 0;
    for (int r = 0; r < nranks; r++)
        for (const char *p = o->in[r].data, *end = p + o->in[r].len; p < end; n++) {
            sdoc d;
            get_doc(&p, &d);
        }
    o->docs = must(malloc((n ? n : 1) * sizeof *o->docs));
    for (int r = 0; r < nranks; r++)
        for (const char *p = o->in[r].data, *end = p + o->in[r].len; p < end;)
            get_doc(&p, &o->docs[o->ndocs++]);
    sort_items(o->docs, o->ndocs, sizeof *o->docs, by_fp_id);
    for (size_t i = 0; i < n; i++)
        o->docs[i].key = (uint64_t)rank << DOC_KEY_BITS | i;
    o->fps = must(malloc((n ? n : 1) * sizeof *o->fps));
    o->first = must(malloc((n + 1) * sizeof *o->first));
    for (size_t i = 0; i < n; i++)
        if (i == 0 || o->docs[i].fp != o->docs[i - 1].fp) {
            o->first[o->nfps] = i;
            o->fps[o->nfps++] = o->docs[i].fp;
        }
    o->first[o->nfps] = n;
    if (show_progress) {
        uint64_t docs = sum_ranks(o->ndocs), fps = sum_ranks(o->nfps);
        progress("read %llu %s with %llu distinct %s from %d %s", (unsigned long long)docs,
                 CLI_NOUN(docs, "document"), (unsigned long long)fps, CLI_NOUN(fps, "fingerprint"),
                 nranks, nranks == 1 ? "shard" : "shards");
    }
    return failed ? -1 : 0;
}

/* ---- the document pairs of the join's pairs ------------------------------- */

void each_pair(const owned *o, const pairs_acc *pairs, doc_pair_fn fn, fp_pair_fn fpfn, void *ctx)
{
    for (size_t i = 0; i < o->nfps; i++) {
        size_t lo = o->first[i], hi = o->first[i + 1];
        if (hi - lo < 2)
            continue;
        if (fpfn)
            fpfn(ctx, o->fps[i], o->fps[i], 0, hi - lo, hi - lo);
        else
            for (size_t x = lo; x < hi; x++)
                for (size_t y = x + 1; y < hi; y++)
                    fn(ctx, &o->docs[x], &o->docs[y], 0);
    }
    /* (a, b, d) to the owner of a. */
    buf *out = bufs_new(), *in = bufs_new();
    for (size_t i = 0; i < pairs->n; i++) {
        const fpair *f = &pairs->v[i];
        buf *b = &out[owner_of(f->a)];
        put64(b, f->a);
        put64(b, f->b);
        put32(b, f->distance);
    }
    exchange_bufs(out, in, chunk_bytes);
    /* The owner of a sends on (b, d, a, a's document count, then a's
     * documents unless by fingerprint) to the owner of b. */
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t a = get_u64(&q), b = get_u64(&q);
            uint32_t d = get_u32(&q);
            size_t ia = node_of(o, a);
            size_t lo = o->first[ia], hi = o->first[ia + 1];
            buf *to = &out[owner_of(b)];
            put64(to, b);
            put32(to, d);
            put64(to, a);
            put64(to, hi - lo);
            if (!fpfn)
                for (size_t x = lo; x < hi; x++)
                    put_doc(to, &o->docs[x]);
        }
        in[r].len = 0;
    }
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t b = get_u64(&q);
            uint32_t d = get_u32(&q);
            uint64_t a = get_u64(&q), ca = get_u64(&q);
            size_t ib = node_of(o, b);
            size_t lo = o->first[ib], hi = o->first[ib + 1];
            if (fpfn) {
                fpfn(ctx, a, b, d, ca, hi - lo);
                continue;
            }
            for (uint64_t i = 0; i < ca; i++) {
                sdoc x;
                get_doc(&q, &x);
                for (size_t y = lo; y < hi; y++)
                    fn(ctx, &x, &o->docs[y], d);
            }
        }
    }
    bufs_free(out);
    bufs_free(in);
}
