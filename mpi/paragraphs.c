/* paragraphs.c: the pairs of documents sharing near-duplicate paragraphs (--paragraphs).
 * As `simstore pairs --paragraphs` counts them: of A's paragraphs (its list,
 * repeats counted each), shared(A, B) have a paragraph of B within k. So a
 * distinct paragraph p held m times by A adds m to shared(A, B) for every
 * other document B holding a paragraph within k of p, once whatever the
 * number of B's such paragraphs.
 * 1. Every rank reads its shard's documents with paragraphs (their homes:
 *    a document's key is its home rank and index there) and sends each
 *    distinct paragraph of each to the rank owning that paragraph, with the
 *    document's key, its paragraph count and the paragraph's multiplicity.
 * 2. The join of the distinct paragraphs, table by table (join_distinct).
 * 3. A joined pair (p, q) sends p's holders to q's owner and q's to p's:
 *    there each paragraph's near documents are its holders and those
 *    received, without repeats; each holder A of p and each near B other
 *    than A make (A, B, m), sent to the rank owning the pair {A, B}.
 * 4. That rank adds up shared(A, B) and shared(B, A), keeps the pairs whose
 *    fraction passes, and sends each on to A's home, which attaches A's id,
 *    then to B's, which makes the line (pairs); or to both homes as an edge
 *    (clusters, which takes those edges between the documents at their
 *    homes). */
#include "scan_internal.h"

#include "cli.h"
#include "simstore.h"

#include <stdlib.h>
#include <string.h>

/* A paragraph's holder: paragraph fp u64, document key u64, the document's
 * paragraph count u32, the paragraph's multiplicity in it u32. */
typedef struct holder {
    uint64_t p, key;
    uint32_t of, times;
} holder;

/* The holders received (24 bytes each) appended to v[0..*n), which grows;
 * in emptied. */
static holder *take_holders(buf *in, holder *v, size_t *n)
{
    size_t more = 0;
    for (int r = 0; r < nranks; r++)
        more += in[r].len / 24;
    v = must(realloc(v, (*n + more ? *n + more : 1) * sizeof *v));
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; (*n)++) {
            v[*n].p = get_u64(&q);
            v[*n].key = get_u64(&q);
            v[*n].of = get_u32(&q);
            v[*n].times = get_u32(&q);
        }
        in[r].len = 0;
    }
    return v;
}

static int holder_by_p_key(const void *x, const void *y)
{
    const holder *a = x, *b = y;
    if (a->p != b->p)
        return a->p < b->p ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

static int send_paragraphs(void *ctx, const simstore_document *doc)
{
    homes *h = (homes *)ctx;
    size_t n = doc->paragraph_count;
    if (n == 0)
        return 0;
    if (h->n + 1 >= h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->at = must(realloc(h->at, (h->cap + 1) * sizeof *h->at));
        h->flags = must(realloc(h->flags, h->cap));
        h->keep = must(realloc(h->keep, h->cap * sizeof *h->keep));
    }
    h->keep[h->n] = h->keep_rule ? simstore_keep_order(h->keep_rule, doc) : 0;
    if (h->n == 0)
        h->at[0] = 0;
    put(&h->ids, doc->id, doc->id_len);
    h->flags[h->n] = (uint8_t)doc->flags;
    h->at[h->n + 1] = h->ids.len;
    uint64_t key = (uint64_t)rank << DOC_KEY_BITS | h->n;
    h->n++;
    if (n > h->vcap) {
        h->v = must(realloc(h->v, n * sizeof *h->v));
        h->vcap = n;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (int b = 0; b < 8; b++)
            v |= (uint64_t)doc->paragraphs[8 * i + (size_t)b] << (8 * b);
        h->v[i] = v;
    }
    sort_items(h->v, n, sizeof *h->v, cmp_u64);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && h->v[j] == h->v[i]; j++)
            ;
        buf *b = &h->out[owner_of(h->v[i])];
        put64(b, h->v[i]);
        put64(b, key);
        put32(b, (uint32_t)n);
        put32(b, (uint32_t)(j - i));
    }
    return 0;
}

/* A directed count on its way to the pair's rank: A, B, m, of(A), of(B). */
typedef struct dcount {
    uint64_t a, b;
    uint32_t times, of_a, of_b;
} dcount;

static int dcount_cmp(const void *x, const void *y)
{
    const dcount *p = x, *q = y;
    uint64_t p0 = p->a < p->b ? p->a : p->b, p1 = p->a < p->b ? p->b : p->a;
    uint64_t q0 = q->a < q->b ? q->a : q->b, q1 = q->a < q->b ? q->b : q->a;
    if (p0 != q0)
        return p0 < q0 ? -1 : 1;
    if (p1 != q1)
        return p1 < q1 ? -1 : 1;
    return (p->a > q->a) - (p->a < q->a);
}

static int pair_owner(uint64_t x, uint64_t y)
{
    uint64_t lo = x < y ? x : y, hi = x < y ? y : x;
    return owner_of(lo * UINT64_C(0xD6E8FEB86659FD93) + hi);
}

int para_edge_cmp(const void *x, const void *y)
{
    const para_edge *a = x, *b = y;
    if (a->node != b->node)
        return a->node < b->node ? -1 : 1;
    return (a->other > b->other) - (a->other < b->other);
}

/* The line of a pair, made at the home of its second document. */
static void emit_para_pair(para_run *pr, const char *x, uint32_t xl, uint8_t xf, uint32_t sx,
                           uint32_t ox, const char *y, uint32_t yl, uint8_t yf, uint32_t sy,
                           uint32_t oy)
{
    if (id_cmp(x, xl, y, yl) > 0) {
        const char *t = x;
        x = y;
        y = t;
        uint32_t u = xl;
        xl = yl;
        yl = u;
        uint8_t f = xf;
        xf = yf;
        yf = f;
        u = sx, sx = sy, sy = u;
        u = ox, ox = oy, oy = u;
    }
    double fa = (double)sx / (double)ox, fb = (double)sy / (double)oy;
    double fraction = fa > fb ? fa : fb;
    uint64_t bits;
    memcpy(&bits, &fraction, sizeof bits); /* fraction >= 0: the bits order it */
    lines *l = &pr->l;
    key_u64(l, ~bits);
    key_id(l, x, xl);
    key_id(l, y, yl);
    int json = pr->json;
    fputs(json ? "{\"a\":" : "", l->f);
    print_id(l->f, x, xl, xf, json);
    fputs(json ? ",\"b\":" : "\t", l->f);
    print_id(l->f, y, yl, yf, json);
    fprintf(l->f,
            json ? ",\"shared_a\":%u,\"of_a\":%u,\"shared_b\":%u,\"of_b\":%u,\"fraction\":%.4f}\n"
                 : "\t%u\t%u\t%u\t%u\t%.4f\n",
            (unsigned)sx, (unsigned)ox, (unsigned)sy, (unsigned)oy, fraction);
    line_done(l);
}

/* This rank's paragraphs (step 1): the holders it received, by paragraph,
 * and the distinct paragraphs, fps[i]'s holders hv[first[i]..first[i+1]). */
typedef struct held {
    holder *hv;
    size_t nh;
    uint64_t *fps;
    size_t *first;
    size_t nfps;
} held;

/* Step 1: this rank's documents with paragraphs read into *h (its homes),
 * each distinct paragraph of each sent to the paragraph's owner; the
 * holders received into *p. Returns 0, or 1 when reading the documents
 * failed on this rank (said). Collective. */
static int read_holders(simstore *s, homes *h, buf *in, held *p)
{
    int failed = 0;
    if (simstore_export(s, NULL, 0, send_paragraphs, h)) {
        say("reading the documents: %s", simstore_last_error());
        failed = 1;
        for (int r = 0; r < nranks; r++)
            h->out[r].len = 0;
    }
    exchange_bufs(h->out, in, chunk_bytes);
    free(h->v);
    /* Step 1's holders, by paragraph; the distinct paragraphs. */
    p->nh = 0;
    p->hv = take_holders(in, NULL, &p->nh);
    sort_items(p->hv, p->nh, sizeof *p->hv, holder_by_p_key);
    size_t nh = p->nh;
    p->fps = must(malloc((nh ? nh : 1) * sizeof *p->fps));
    p->first = must(malloc((nh + 1) * sizeof *p->first));
    p->nfps = 0;
    for (size_t i = 0; i < nh; i++)
        if (i == 0 || p->hv[i].p != p->hv[i - 1].p) {
            p->first[p->nfps] = i;
            p->fps[p->nfps++] = p->hv[i].p;
        }
    p->first[p->nfps] = nh;
    if (show_progress) {
        uint64_t docs = sum_ranks(h->n), paras = sum_ranks(p->nfps);
        progress("read %llu %s with paragraphs, %llu distinct %s", (unsigned long long)docs,
                 CLI_NOUN(docs, "document"), (unsigned long long)paras,
                 CLI_NOUN(paras, "paragraph"));
    }
    return failed;
}

/* Step 3, first half: each joined pair to the owners of both paragraphs
 * (pairs freed), which send their holders to the other's owner, through
 * out and in. Collective. */
static void swap_holders(buf *out, buf *in, pairs_acc *pairs, const held *p)
{
    for (size_t i = 0; i < pairs->n; i++) {
        put64(&out[owner_of(pairs->v[i].a)], pairs->v[i].a);
        put64(&out[owner_of(pairs->v[i].a)], pairs->v[i].b);
        put64(&out[owner_of(pairs->v[i].b)], pairs->v[i].b);
        put64(&out[owner_of(pairs->v[i].b)], pairs->v[i].a);
    }
    free(pairs->v);
    pairs->v = NULL;
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t para = get_u64(&q), other = get_u64(&q);
            size_t lo = 0, hi = p->nfps; /* para's holders */
            while (lo < hi) {
                size_t m = lo + (hi - lo) / 2;
                if (p->fps[m] < para)
                    lo = m + 1;
                else
                    hi = m;
            }
            for (size_t x = p->first[lo]; x < p->first[lo + 1]; x++) {
                buf *b = &out[owner_of(other)];
                put64(b, other);
                put64(b, p->hv[x].key);
                put32(b, p->hv[x].of);
                put32(b, 0);
            }
        }
        in[r].len = 0;
    }
    exchange_bufs(out, in, chunk_bytes);
}

/* Step 3, second half: each paragraph's near documents are its holders
 * and those received (in); (A, B, m) for each holder A of a paragraph and
 * each other near B, to the rank owning the pair {A, B}, through out and
 * in. Collective. */
static void send_counts(buf *out, buf *in, const held *p)
{
    size_t nn = p->nh;
    holder *near = must(malloc((p->nh ? p->nh : 1) * sizeof *near));
    if (p->nh)
        memcpy(near, p->hv, p->nh * sizeof *near);
    near = take_holders(in, near, &nn);
    sort_items(near, nn, sizeof *near, holder_by_p_key);
    size_t w = 0;
    for (size_t i = 0; i < nn; i++)
        if (w == 0 || near[i].p != near[w - 1].p || near[i].key != near[w - 1].key)
            near[w++] = near[i];
    nn = w;
    for (size_t i = 0, j = 0; i < p->nfps; i++) {
        while (j < nn && near[j].p < p->fps[i])
            j++;
        size_t end = j;
        while (end < nn && near[end].p == p->fps[i])
            end++;
        for (size_t x = p->first[i]; x < p->first[i + 1]; x++)
            for (size_t y = j; y < end; y++) {
                const holder *a = &p->hv[x];
                if (near[y].key == a->key)
                    continue;
                buf *b = &out[pair_owner(a->key, near[y].key)];
                put64(b, a->key);
                put64(b, near[y].key);
                put32(b, a->times);
                put32(b, a->of);
                put32(b, near[y].of);
            }
        j = end;
    }
    free(near);
    exchange_bufs(out, in, chunk_bytes);
}

/* Step 4: the sums of both directions of each pair (in); a pair the
 * near-duplicate rule keeps goes to the home of its smaller key (or with
 * pr->want_edges, as an edge to both homes), through out and in.
 * Collective. */
static void sum_counts(const para_run *pr, buf *out, buf *in)
{
    size_t nd = 0;
    for (int r = 0; r < nranks; r++)
        nd += in[r].len / 28;
    dcount *dv = must(malloc((nd ? nd : 1) * sizeof *dv));
    nd = 0;
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; nd++) {
            dv[nd].a = get_u64(&q);
            dv[nd].b = get_u64(&q);
            dv[nd].times = get_u32(&q);
            dv[nd].of_a = get_u32(&q);
            dv[nd].of_b = get_u32(&q);
        }
        in[r].len = 0;
    }
    sort_items(dv, nd, sizeof *dv, dcount_cmp);
    for (size_t i = 0; i < nd;) {
        uint64_t lo = dv[i].a < dv[i].b ? dv[i].a : dv[i].b;
        uint64_t hi = dv[i].a < dv[i].b ? dv[i].b : dv[i].a;
        uint32_t shared_lo = 0, shared_hi = 0, of_lo = 0, of_hi = 0;
        for (; i < nd && (dv[i].a == lo || dv[i].a == hi) && (dv[i].b == lo || dv[i].b == hi);
             i++) {
            if (dv[i].a == lo) {
                shared_lo += dv[i].times;
                of_lo = dv[i].of_a;
                of_hi = dv[i].of_b;
            } else {
                shared_hi += dv[i].times;
                of_hi = dv[i].of_a;
                of_lo = dv[i].of_b;
            }
        }
        /* The near-duplicate rule by paragraphs, from either side. */
        if (!simstore_near_duplicate_paragraphs(pr->rule, shared_lo, of_lo) &&
            !simstore_near_duplicate_paragraphs(pr->rule, shared_hi, of_hi))
            continue;
        double fa = (double)shared_lo / (double)of_lo, fb = (double)shared_hi / (double)of_hi;
        double fraction = fa > fb ? fa : fb;
        if (pr->want_edges) { /* to both homes */
            uint64_t bits;
            memcpy(&bits, &fraction, sizeof bits);
            for (int end = 0; end < 2; end++) {
                buf *b = &out[(int)((end ? hi : lo) >> DOC_KEY_BITS)];
                put64(b, end ? hi : lo);
                put64(b, end ? lo : hi);
                put64(b, bits);
            }
            continue;
        }
        buf *b = &out[(int)(lo >> DOC_KEY_BITS)];
        put64(b, lo);
        put64(b, hi);
        put32(b, shared_lo);
        put32(b, of_lo);
        put32(b, shared_hi);
        put32(b, of_hi);
    }
    free(dv);
    exchange_bufs(out, in, chunk_bytes);
}

/* clusters: the edges received (in) at this home, sorted, in pr->edges. */
static void take_edges(para_run *pr, const buf *in)
{
    size_t ne = 0;
    for (int r = 0; r < nranks; r++)
        ne += in[r].len / 24;
    pr->edges = must(malloc((ne ? ne : 1) * sizeof *pr->edges));
    for (int r = 0; r < nranks; r++)
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            para_edge *e = &pr->edges[pr->nedges++];
            e->node = get_u64(&q);
            e->other = get_u64(&q);
            uint64_t bits = get_u64(&q);
            memcpy(&e->fraction, &bits, sizeof bits);
        }
    sort_items(pr->edges, pr->nedges, sizeof *pr->edges, para_edge_cmp);
}

/* pairs: each kept pair (in) at the home of its smaller key, which
 * attaches that document's id and sends it on to the other's home, which
 * makes the line. Collective. */
static void emit_kept(const homes *h, para_run *pr, buf *in)
{
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t lo = get_u64(&q), hi = get_u64(&q);
            size_t i = (size_t)(lo & ((UINT64_C(1) << DOC_KEY_BITS) - 1));
            buf *b = &h->out[(int)(hi >> DOC_KEY_BITS)];
            put64(b, hi);
            put(b, q, 16);
            q += 16;
            put(b, &h->flags[i], 1);
            put32(b, (uint32_t)(h->at[i + 1] - h->at[i]));
            put(b, h->ids.data + h->at[i], h->at[i + 1] - h->at[i]);
        }
        in[r].len = 0;
    }
    exchange_bufs(h->out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++)
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t hi = get_u64(&q);
            uint32_t s_lo = get_u32(&q), o_lo = get_u32(&q), s_hi = get_u32(&q), o_hi = get_u32(&q);
            uint8_t f_lo = (uint8_t)*q++;
            uint32_t l_lo = get_u32(&q);
            const char *id_lo = q;
            q += l_lo;
            size_t i = (size_t)(hi & ((UINT64_C(1) << DOC_KEY_BITS) - 1));
            emit_para_pair(pr, id_lo, l_lo, f_lo, s_lo, o_lo, h->ids.data + h->at[i],
                           (uint32_t)(h->at[i + 1] - h->at[i]), h->flags[i], s_hi, o_hi);
        }
}

int paragraph_pairs(simstore *s, unsigned k, uint64_t memory, para_run *pr, homes *hp)
{
    homes h = *hp;
    h.out = bufs_new();
    buf *in = bufs_new();
    held p;
    int failed = read_holders(s, &h, in, &p);
    pairs_acc pairs = {NULL, 0, 0};
    if (agree(failed, "reading the documents") ||
        (k > 0 && join_distinct(p.fps, p.nfps, k, memory, &pairs))) {
        failed = 1;
        goto done;
    }
    swap_holders(h.out, in, &pairs, &p);
    send_counts(h.out, in, &p);
    sum_counts(pr, h.out, in);
    if (pr->want_edges)
        take_edges(pr, in);
    else
        emit_kept(&h, pr, in);
done:
    free(pairs.v);
    free(p.hv);
    free(p.fps);
    free(p.first);
    bufs_free(in);
    bufs_free(h.out);
    h.out = NULL;
    *hp = h;
    return failed;
}

void homes_free(homes *h)
{
    free(h->ids.data);
    free(h->at);
    free(h->flags);
    free(h->keep);
    memset(h, 0, sizeof *h);
}
