/* design.c: table designs for exact Hamming-distance-k queries: building a
 * design from its construction parameters, the candidate list and the cost
 * model that chooses among it, descriptions, and the design record
 * (format/design.md). */
#include "design/design.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const uint8_t record_magic[4] = {'S', 'M', 'D', 'G'};

/* ---- small helpers ------------------------------------------------------- */

/* C(n, r), saturating at UINT64_MAX (callers only compare against small
 * limits). Each partial product is itself a binomial, so the division is
 * exact. */
static uint64_t binom(unsigned n, unsigned r)
{
    if (r > n)
        return 0;
    if (r > n - r)
        r = n - r;
    uint64_t c = 1;
    for (unsigned i = 1; i <= r; i++) {
        uint64_t f = n - r + i;
        if (c > UINT64_MAX / f)
            return UINT64_MAX;
        c = c * f / i;
    }
    return c;
}

/* The block-splitting rule: n_bits cut into m blocks whose sizes differ by
 * at most one, the first (n_bits mod m) blocks one bit larger. */
static unsigned block_size(unsigned n_bits, unsigned m, unsigned j)
{
    return n_bits / m + (j < n_bits % m ? 1u : 0u);
}

/* r-subsets of 0..m-1 in lexicographic order. */
static void combo_first(uint8_t *c, unsigned r)
{
    for (unsigned i = 0; i < r; i++)
        c[i] = (uint8_t)i;
}

static int combo_next(uint8_t *c, unsigned r, unsigned m)
{
    for (unsigned i = r; i-- > 0;) {
        if (c[i] < m - r + i) {
            c[i]++;
            for (unsigned j = i + 1; j < r; j++)
                c[j] = (uint8_t)(c[j - 1] + 1);
            return 1;
        }
    }
    return 0;
}

static uint64_t bit_range(unsigned lo, unsigned size)
{
    uint64_t ones = size >= 64 ? UINT64_MAX : (UINT64_C(1) << size) - 1;
    return ones << lo;
}

/* Appending formatter with snprintf's contract: `len` counts what the full
 * text needs even once `buf` is full. */
typedef struct strbuf {
    char *buf;
    size_t size;
    size_t len;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...) SIMS_PRINTF(2, 3);

static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    char scratch[1];
    char *dst = scratch;
    size_t room = 0;
    if (sb->buf && sb->len < sb->size) {
        dst = sb->buf + sb->len;
        room = sb->size - sb->len;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? dst : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb->len += (size_t)n;
}

static int sb_result(const strbuf *sb)
{
    if (sb->buf && sb->size > 0 && sb->len >= sb->size)
        sb->buf[sb->size - 1] = '\0';
    return sb->len > INT_MAX ? INT_MAX : (int)sb->len;
}

/* ---- construction -------------------------------------------------------- */

typedef struct design_shape {
    uint32_t n_tables;
    unsigned min_prefix_bits;
    unsigned max_prefix_bits;
    double range_fraction;
} design_shape;

/* Validate construction parameters; on success *m1, *m2 are the block
 * counts and *n_tables the table count. On failure returns SIMSTORE_EINVAL
 * with a message naming the field in why[] (not in the thread's error:
 * the candidate search probes invalid constructions on purpose and must
 * not leave their messages behind a successful call). */
#define REJECT(...) (snprintf(why, why_size, __VA_ARGS__), SIMSTORE_EINVAL)
static int params_check(const sims_design_params *p, unsigned *m1, unsigned *m2, uint32_t *n_tables,
                        char *why, size_t why_size)
{
    if (p->k > SIMS_DESIGN_MAX_K)
        return REJECT("design: k = %u exceeds the maximum %d", p->k, SIMS_DESIGN_MAX_K);
    if (p->levels != 1 && p->levels != 2)
        return REJECT("design: levels = %u (must be 1 or 2)", p->levels);
    if (p->r1 == 0)
        return REJECT("design: r1 = 0 (must be at least 1)");
    if ((unsigned)p->k + p->r1 > 64)
        return REJECT("design: k + r1 = %u blocks exceed the 64 bits", (unsigned)p->k + p->r1);
    *m1 = (unsigned)p->k + p->r1;
    uint64_t t1 = binom(*m1, p->r1);
    uint64_t t2 = 1;
    *m2 = 0;
    if (p->levels == 1) {
        if (p->r2 != 0)
            return REJECT("design: r2 = %u with one level (must be 0)", p->r2);
    } else {
        if (p->r2 == 0)
            return REJECT("design: r2 = 0 with two levels (must be at least 1)");
        *m2 = (unsigned)p->k + p->r2;
        /* The first r1 level-1 blocks are the largest, so they leave the
         * fewest bits for level 2; every level-2 block needs at least one. */
        unsigned p1_max = 0;
        for (unsigned j = 0; j < p->r1; j++)
            p1_max += block_size(64, *m1, j);
        if (64 - p1_max < *m2)
            return REJECT("design: level 2 needs %u blocks but as few as %u bits remain", *m2,
                          64 - p1_max);
        t2 = binom(*m2, p->r2);
    }
    if (t1 > SIMS_DESIGN_MAX_TABLES || t2 > SIMS_DESIGN_MAX_TABLES ||
        t1 * t2 > SIMS_DESIGN_MAX_TABLES)
        return REJECT("design: more than %d tables", SIMS_DESIGN_MAX_TABLES);
    *n_tables = (uint32_t)(t1 * t2);
    return SIMSTORE_OK;
}
#undef REJECT

/* The canonical permutation of a prefix mask: prefix bits first, then the
 * rest, each group in descending original order (a stable partition). */
static void perm_from_mask(uint64_t mask, uint8_t perm[64])
{
    unsigned out = 64;
    for (unsigned src = 64; src-- > 0;)
        if (mask >> src & 1)
            perm[--out] = (uint8_t)src;
    for (unsigned src = 64; src-- > 0;)
        if (!(mask >> src & 1))
            perm[--out] = (uint8_t)src;
}

static int emit_table(sims_design *out, design_shape *shape, uint64_t prefix_mask, uint64_t blocks1,
                      uint64_t blocks2)
{
    unsigned p = sims_popcount64(prefix_mask);
    uint32_t t = shape->n_tables++;
    if (p < shape->min_prefix_bits)
        shape->min_prefix_bits = p;
    if (p > shape->max_prefix_bits)
        shape->max_prefix_bits = p;
    shape->range_fraction += ldexp(1.0, -(int)p);
    if (!out)
        return SIMSTORE_OK;
    sims_design_table *tab = &out->tables[t];
    memset(tab, 0, sizeof *tab);
    tab->prefix_mask = prefix_mask;
    tab->blocks1 = blocks1;
    tab->blocks2 = blocks2;
    tab->prefix_bits = (uint8_t)p;
    perm_from_mask(prefix_mask, tab->perm);
    return sims_permuter_init(&tab->permuter, tab->perm);
}

/* Generate the tables `p` describes: into *out when out is non-NULL, and
 * always their shape (count, prefix lengths, range fraction). Invalid
 * parameters set the thread's error message only when `report`. */
static int design_generate(const sims_design_params *p, sims_design *out, design_shape *shape,
                           int report)
{
    unsigned m1, m2;
    uint32_t n_tables;
    char why[128];
    int rc = params_check(p, &m1, &m2, &n_tables, why, sizeof why);
    if (rc)
        return report ? sims_fail(rc, "%s", why) : rc;

    memset(shape, 0, sizeof *shape);
    shape->min_prefix_bits = 64;
    if (out) {
        /* Only the header and the used tables are written: clearing the
         * whole ~100 KiB value would dominate decoding a small design. */
        out->params = *p;
        out->blocks1_count = (uint8_t)m1;
        out->blocks2_count = (uint8_t)m2;
    }

    uint64_t block1_mask[64];
    unsigned top = 64;
    for (unsigned j = 0; j < m1; j++) {
        unsigned size = block_size(64, m1, j);
        top -= size;
        block1_mask[j] = bit_range(top, size);
    }

    uint8_t c1[64], c2[64];
    combo_first(c1, p->r1);
    do {
        uint64_t mask1 = 0, set1 = 0;
        for (unsigned i = 0; i < p->r1; i++) {
            mask1 |= block1_mask[c1[i]];
            set1 |= UINT64_C(1) << c1[i];
        }
        if (p->levels == 1) {
            if ((rc = emit_table(out, shape, mask1, set1, 0)) != 0)
                return rc;
            continue;
        }
        /* Level 2 cuts the bits outside this level-1 choice, taken in
         * descending original order, into m2 blocks. */
        uint8_t rest[64];
        unsigned n_rest = 0;
        for (unsigned src = 64; src-- > 0;)
            if (!(mask1 >> src & 1))
                rest[n_rest++] = (uint8_t)src;
        uint64_t block2_mask[64];
        unsigned at = 0;
        for (unsigned j = 0; j < m2; j++) {
            unsigned size = block_size(n_rest, m2, j);
            block2_mask[j] = 0;
            for (unsigned b = 0; b < size; b++)
                block2_mask[j] |= UINT64_C(1) << rest[at++];
        }
        combo_first(c2, p->r2);
        do {
            uint64_t mask2 = 0, set2 = 0;
            for (unsigned i = 0; i < p->r2; i++) {
                mask2 |= block2_mask[c2[i]];
                set2 |= UINT64_C(1) << c2[i];
            }
            if ((rc = emit_table(out, shape, mask1 | mask2, set1, set2)) != 0)
                return rc;
        } while (combo_next(c2, p->r2, m2));
    } while (combo_next(c1, p->r1, m1));

    if (out) {
        out->n_tables = shape->n_tables;
        out->min_prefix_bits = (uint8_t)shape->min_prefix_bits;
        out->max_prefix_bits = (uint8_t)shape->max_prefix_bits;
    }
    return SIMSTORE_OK;
}

int sims_design_build(const sims_design_params *params, sims_design *out)
{
    design_shape shape;
    return design_generate(params, out, &shape, 1);
}

/* ---- candidates ----------------------------------------------------------- */

/* Offer one construction: keep it when it is the best so far for its table
 * count. Generation order (one level before two, r1 ascending) makes the
 * earlier of two equal offers the simpler one, and it is kept on ties. */
static void offer(unsigned k, unsigned levels, unsigned r1, unsigned r2,
                  sims_design_candidate *best, uint8_t *have)
{
    sims_design_params p = {(uint8_t)k, (uint8_t)levels, (uint8_t)r1, (uint8_t)r2};
    design_shape shape;
    /* Invalid constructions (e.g. too few bits left for level 2) are
     * simply not candidates. */
    if (design_generate(&p, NULL, &shape, 0) != SIMSTORE_OK)
        return;
    if (k > 0 && shape.min_prefix_bits > SIMS_DESIGN_USEFUL_PREFIX_BITS)
        return;
    sims_design_candidate *b = &best[shape.n_tables];
    if (have[shape.n_tables] && b->range_fraction <= shape.range_fraction)
        return;
    have[shape.n_tables] = 1;
    b->params = p;
    b->n_tables = shape.n_tables;
    b->min_prefix_bits = (uint8_t)shape.min_prefix_bits;
    b->max_prefix_bits = (uint8_t)shape.max_prefix_bits;
    b->range_fraction = shape.range_fraction;
}

/* All candidates for k into list[SIMS_DESIGN_MAX_CANDIDATES]. */
static size_t candidates_all(unsigned k, sims_design_candidate *list)
{
    /* Zeroed, though only entries with have[t] are read: the compiler cannot
     * see that through offer(). */
    sims_design_candidate best[SIMS_DESIGN_MAX_TABLES + 1];
    memset(best, 0, sizeof best);
    uint8_t have[SIMS_DESIGN_MAX_TABLES + 1] = {0};

    if (k == 0) {
        /* k + r blocks choose r is the identity for every r at k = 0. */
        offer(0, 1, 1, 0, best, have);
    } else {
        for (unsigned r1 = 1; k + r1 <= 64 && binom(k + r1, r1) <= SIMS_DESIGN_MAX_TABLES; r1++)
            offer(k, 1, r1, 0, best, have);
        /* A level-2 factor is at least k + 1 >= 2, so level 1 can offer at
         * most half the table budget. */
        for (unsigned r1 = 1; k + r1 <= 64 && binom(k + r1, r1) <= SIMS_DESIGN_MAX_TABLES / 2;
             r1++) {
            uint64_t t1 = binom(k + r1, r1);
            for (unsigned r2 = 1; k + r2 <= 64 && t1 * binom(k + r2, r2) <= SIMS_DESIGN_MAX_TABLES;
                 r2++)
                offer(k, 2, r1, r2, best, have);
        }
    }

    /* Keep only candidates that beat every smaller one on range fraction:
     * any other is worse for every N and F (more tables, no fewer
     * candidates per query). */
    size_t n = 0;
    double last = INFINITY;
    for (unsigned t = 1; t <= SIMS_DESIGN_MAX_TABLES; t++) {
        if (!have[t] || !(best[t].range_fraction < last))
            continue;
        if (n < SIMS_DESIGN_MAX_CANDIDATES)
            list[n++] = best[t];
        last = best[t].range_fraction;
    }
    return n;
}

int sims_design_candidates(unsigned k, sims_design_candidate *out, size_t cap, size_t *n)
{
    *n = 0;
    if (k > SIMS_DESIGN_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "design: k = %u exceeds the maximum %d", k,
                         SIMS_DESIGN_MAX_K);
    sims_design_candidate list[SIMS_DESIGN_MAX_CANDIDATES];
    size_t count = candidates_all(k, list);
    *n = count;
    size_t copy = count < cap ? count : cap;
    if (copy)
        memcpy(out, list, copy * sizeof *list);
    if (cap < count)
        return sims_fail(SIMSTORE_EFULL, "design: %zu candidates for k = %u, room for %zu", count,
                         k, cap);
    return SIMSTORE_OK;
}

/* ---- cost model ----------------------------------------------------------- */

static const sims_cost_model default_model = SIMS_COST_MODEL_DEFAULT;

double sims_design_bits_per_fp(uint64_t expected_n)
{
    double n = expected_n < 1 ? 1.0 : (double)expected_n;
    return 64.0 - log2(n) + 1.5;
}

double sims_design_fps_per_block(uint64_t expected_n, size_t block_bytes)
{
    return (double)block_bytes * 8.0 / sims_design_bits_per_fp(expected_n);
}

double sims_design_cost(const sims_design_candidate *c, uint64_t expected_n, double fps_per_block,
                        const sims_cost_model *model)
{
    const sims_cost_model *m = model ? model : &default_model;
    double n = expected_n < 1 ? 1.0 : (double)expected_n;
    /* A store smaller than one block never decodes more than itself. */
    double lead = fps_per_block < n ? fps_per_block : n;
    double tables = (double)c->n_tables;
    return tables * (m->probe_ns + m->decode_ns * lead / 2.0) +
           m->decode_ns * n * c->range_fraction +
           m->space_ns_per_byte * tables * sims_design_bits_per_fp(expected_n) / 8.0;
}

static int check_choice_args(unsigned k, double fps_per_block, const sims_cost_model *m)
{
    if (k > SIMS_DESIGN_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "design: k = %u exceeds the maximum %d", k,
                         SIMS_DESIGN_MAX_K);
    if (!isfinite(fps_per_block) || !(fps_per_block > 0))
        return sims_fail(SIMSTORE_EINVAL, "design: fingerprints per block %g (must be > 0)",
                         fps_per_block);
    if (!isfinite(m->probe_ns) || m->probe_ns < 0 || !isfinite(m->decode_ns) || m->decode_ns < 0 ||
        !isfinite(m->space_ns_per_byte) || m->space_ns_per_byte < 0)
        return sims_fail(SIMSTORE_EINVAL, "design: cost model constants must be finite and >= 0");
    return SIMSTORE_OK;
}

/* The candidates' table counts, "1, 2, ...", into buf. */
static void counts_text(char *buf, size_t size, const sims_design_candidate *list, size_t n)
{
    strbuf sb = {buf, size, 0};
    for (size_t i = 0; i < n; i++)
        sb_printf(&sb, "%s%u", i ? ", " : "", (unsigned)list[i].n_tables);
    sb_result(&sb);
}

/* Index of the cheapest candidate within the table limit, or -1. Strict
 * comparison over an ascending list sends ties to fewer tables. */
static long choose_index(const sims_design_candidate *list, size_t n, uint64_t expected_n,
                         double fps_per_block, const sims_cost_model *m)
{
    uint32_t limit = m->max_tables ? m->max_tables : SIMS_DESIGN_MAX_TABLES;
    long pick = -1;
    double pick_cost = INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (list[i].n_tables > limit)
            break;
        double c = sims_design_cost(&list[i], expected_n, fps_per_block, m);
        if (pick < 0 || c < pick_cost) {
            pick = (long)i;
            pick_cost = c;
        }
    }
    return pick;
}

int sims_design_choose(unsigned k, uint64_t expected_n, double fps_per_block,
                       const sims_cost_model *model, sims_design *out)
{
    const sims_cost_model *m = model ? model : &default_model;
    int rc = check_choice_args(k, fps_per_block, m);
    if (rc)
        return rc;
    sims_design_candidate list[SIMS_DESIGN_MAX_CANDIDATES];
    size_t n = candidates_all(k, list);
    long pick = choose_index(list, n, expected_n, fps_per_block, m);
    if (pick < 0) {
        char counts[512];
        counts_text(counts, sizeof counts, list, n);
        return sims_fail(SIMSTORE_EINVAL,
                         "design: no design for k = %u within %u tables; available: %s", k,
                         (unsigned)m->max_tables, counts);
    }
    return sims_design_build(&list[pick].params, out);
}

int sims_design_with_tables(unsigned k, unsigned tables, sims_design *out)
{
    if (k > SIMS_DESIGN_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "design: k = %u exceeds the maximum %d", k,
                         SIMS_DESIGN_MAX_K);
    sims_design_candidate list[SIMS_DESIGN_MAX_CANDIDATES];
    size_t n = candidates_all(k, list);
    for (size_t i = 0; i < n; i++)
        if (list[i].n_tables == tables)
            return sims_design_build(&list[i].params, out);
    char counts[512];
    counts_text(counts, sizeof counts, list, n);
    return sims_fail(SIMSTORE_EINVAL,
                     "no table design for k = %u with %u tables; available table counts: %s", k,
                     tables, counts);
}

static void describe_params(strbuf *sb, const sims_design_params *p)
{
    unsigned m1 = (unsigned)p->k + p->r1;
    if (p->levels == 1)
        sb_printf(sb, "1 level (%u block%s choose %u)", m1, m1 == 1 ? "" : "s", p->r1);
    else
        sb_printf(sb, "2 levels (%u blocks choose %u, then %u choose %u)", m1, p->r1,
                  (unsigned)p->k + p->r2, p->r2);
}

static void describe_prefix_range(strbuf *sb, unsigned lo, unsigned hi)
{
    if (lo == hi)
        sb_printf(sb, "prefix %u bits", lo);
    else
        sb_printf(sb, "prefix %u..%u bits", lo, hi);
}

int sims_design_explain(unsigned k, uint64_t expected_n, double fps_per_block,
                        const sims_cost_model *model, char *buf, size_t size)
{
    const sims_cost_model *m = model ? model : &default_model;
    int rc = check_choice_args(k, fps_per_block, m);
    if (rc)
        return rc;
    sims_design_candidate list[SIMS_DESIGN_MAX_CANDIDATES];
    size_t n = candidates_all(k, list);
    long pick = choose_index(list, n, expected_n, fps_per_block, m);

    strbuf sb = {buf, size, 0};
    sb_printf(&sb,
              "k=%u N=%llu F=%.1f fps/block; model: probe %.0f ns, decode %.1f ns/fp, "
              "space %.1f ns per B/fp, max tables %u\n",
              k, (unsigned long long)expected_n, fps_per_block, m->probe_ns, m->decode_ns,
              m->space_ns_per_byte, m->max_tables ? m->max_tables : SIMS_DESIGN_MAX_TABLES);
    sb_printf(&sb, "%7s  %-48s %-7s %14s %12s\n", "tables", "construction", "prefix", "cand/query",
              "cost ns");
    for (size_t i = 0; i < n; i++) {
        char what[64], prefix[16];
        strbuf w = {what, sizeof what, 0};
        describe_params(&w, &list[i].params);
        sb_result(&w);
        if (list[i].min_prefix_bits == list[i].max_prefix_bits)
            snprintf(prefix, sizeof prefix, "%u", list[i].min_prefix_bits);
        else
            snprintf(prefix, sizeof prefix, "%u..%u", list[i].min_prefix_bits,
                     list[i].max_prefix_bits);
        double n_fp = expected_n < 1 ? 1.0 : (double)expected_n;
        sb_printf(&sb, "%7u  %-48s %-7s %14.3f %12.1f%s\n", (unsigned)list[i].n_tables, what,
                  prefix, n_fp * list[i].range_fraction,
                  sims_design_cost(&list[i], expected_n, fps_per_block, m),
                  (long)i == pick ? "  <- chosen" : "");
    }
    if (pick < 0)
        sb_printf(&sb, "no candidate within the table limit\n");
    return sb_result(&sb);
}

/* ---- using designs -------------------------------------------------------- */

int sims_design_covering_table(const sims_design *d, uint64_t flips)
{
    for (uint32_t t = 0; t < d->n_tables; t++)
        if (!(d->tables[t].prefix_mask & flips))
            return (int)t;
    return -1;
}

/* The largest sum of the r smallest of m counts adding up to x: the
 * counts as even as integers allow (x/m each, x mod m of them one more). */
static unsigned smallest_sum_bound(unsigned m, unsigned r, unsigned x)
{
    unsigned q = x / m, rem = x % m;
    return r * q + (r > m - rem ? r - (m - rem) : 0);
}

unsigned sims_design_prefix_flips(const sims_design *d, unsigned k2)
{
    const sims_design_params *p = &d->params;
    if (k2 <= p->k)
        return 0;
    unsigned m1 = d->blocks1_count, f1max = smallest_sum_bound(m1, p->r1, k2);
    if (p->levels < 2)
        return f1max;
    /* The level-1 choice with the fewest flips has f1 <= f1max of them; its
     * rest holds k2 - f1, spread over the m2 level-2 blocks. */
    unsigned worst = 0;
    for (unsigned f1 = 0; f1 <= f1max; f1++) {
        unsigned f = f1 + smallest_sum_bound(d->blocks2_count, p->r2, k2 - f1);
        worst = f > worst ? f : worst;
    }
    return worst;
}

/* Every set of at most `left` more bits below `below` (and at or above
 * `low`) added to mask, in out[*n..) while there is room. */
static void prefix_masks(uint64_t mask, unsigned below, unsigned low, unsigned left, uint64_t *out,
                         size_t cap, size_t *n)
{
    if (*n < cap)
        out[*n] = mask;
    (*n)++;
    for (unsigned b = low; left > 0 && b < below; b++)
        prefix_masks(mask | (uint64_t)1 << b, b, low, left - 1, out, cap, n);
}

size_t sims_design_prefix_masks(unsigned prefix_bits, unsigned flips, uint64_t *out, size_t cap)
{
    size_t n = 0;
    if (prefix_bits > 64)
        prefix_bits = 64;
    prefix_masks(0, 64, 64 - prefix_bits, flips, out, out ? cap : 0, &n);
    return n;
}

uint64_t sims_design_probes(const sims_design *d, unsigned k2)
{
    unsigned flips = sims_design_prefix_flips(d, k2);
    uint64_t total = 0;
    for (uint32_t t = 0; t < d->n_tables; t++) {
        for (unsigned i = 0; i <= flips && i <= d->tables[t].prefix_bits; i++) {
            uint64_t c = binom(d->tables[t].prefix_bits, i);
            if (c == UINT64_MAX || total > UINT64_MAX - c)
                return UINT64_MAX;
            total += c;
        }
    }
    return total;
}

int sims_design_equal(const sims_design *a, const sims_design *b)
{
    if (memcmp(&a->params, &b->params, sizeof a->params) != 0 || a->n_tables != b->n_tables)
        return 0;
    for (uint32_t t = 0; t < a->n_tables; t++) {
        const sims_design_table *x = &a->tables[t], *y = &b->tables[t];
        if (x->prefix_bits != y->prefix_bits || x->prefix_mask != y->prefix_mask ||
            memcmp(x->perm, y->perm, sizeof x->perm) != 0)
            return 0;
    }
    return 1;
}

int sims_design_describe(const sims_design *d, char *buf, size_t size)
{
    strbuf sb = {buf, size, 0};
    sb_printf(&sb, "k=%u: ", d->params.k);
    describe_params(&sb, &d->params);
    sb_printf(&sb, ", %u table%s, ", (unsigned)d->n_tables, d->n_tables == 1 ? "" : "s");
    describe_prefix_range(&sb, d->min_prefix_bits, d->max_prefix_bits);
    return sb_result(&sb);
}

static void describe_block_set(strbuf *sb, uint64_t set)
{
    int first = 1;
    for (unsigned b = 0; b < 64; b++) {
        if (set >> b & 1) {
            sb_printf(sb, first ? "%u" : ",%u", b);
            first = 0;
        }
    }
}

int sims_design_describe_table(const sims_design *d, unsigned t, char *buf, size_t size)
{
    strbuf sb = {buf, size, 0};
    if (t >= d->n_tables) {
        sb_printf(&sb, "no table %u", t);
        return sb_result(&sb);
    }
    const sims_design_table *tab = &d->tables[t];
    sb_printf(&sb, "blocks ");
    describe_block_set(&sb, tab->blocks1);
    if (d->params.levels == 2) {
        sb_printf(&sb, " | ");
        describe_block_set(&sb, tab->blocks2);
    }
    sb_printf(&sb, ": bits");
    /* Runs of the prefix mask from the top: the prefix's bits in order. */
    uint64_t mask = tab->prefix_mask;
    while (mask) {
        unsigned hi = 63u - (unsigned)__builtin_clzll(mask);
        uint64_t below = ~mask & ((hi == 63) ? UINT64_MAX : (UINT64_C(1) << (hi + 1)) - 1);
        unsigned lo = below ? 64u - (unsigned)__builtin_clzll(below) : 0;
        if (lo == hi)
            sb_printf(&sb, " %u", hi);
        else
            sb_printf(&sb, " %u..%u", hi, lo);
        mask &= ~bit_range(lo, hi - lo + 1);
    }
    sb_printf(&sb, " (p=%u)", tab->prefix_bits);
    return sb_result(&sb);
}

/* ---- the record ----------------------------------------------------------- */

size_t sims_design_record_bytes(const sims_design *d)
{
    return SIMS_DESIGN_RECORD_HEADER_BYTES + (size_t)d->n_tables * SIMS_DESIGN_RECORD_TABLE_BYTES +
           SIMS_DESIGN_RECORD_TRAILER_BYTES;
}

int sims_design_encode(const sims_design *d, uint8_t *buf, size_t cap, size_t *len)
{
    size_t need = sims_design_record_bytes(d);
    if (cap < need)
        return sims_fail(SIMSTORE_EFULL, "design record: needs %zu bytes, room for %zu", need, cap);
    memcpy(buf, record_magic, 4);
    buf[4] = SIMS_DESIGN_RECORD_VERSION;
    buf[5] = 64;
    buf[6] = d->params.k;
    buf[7] = d->params.levels;
    buf[8] = d->blocks1_count;
    buf[9] = d->params.r1;
    buf[10] = d->blocks2_count;
    buf[11] = d->params.r2;
    le_store16(buf + 12, (uint16_t)d->n_tables);
    le_store16(buf + 14, 0);
    uint8_t *p = buf + SIMS_DESIGN_RECORD_HEADER_BYTES;
    for (uint32_t t = 0; t < d->n_tables; t++) {
        p[0] = d->tables[t].prefix_bits;
        p[1] = 0;
        memcpy(p + 2, d->tables[t].perm, 64);
        p += SIMS_DESIGN_RECORD_TABLE_BYTES;
    }
    le_store64(p, sims_xxh3_64(buf, need - 8, SIMS_DESIGN_RECORD_SEED));
    *len = need;
    return SIMSTORE_OK;
}

int sims_design_decode(const uint8_t *buf, size_t len, sims_design *out)
{
    const size_t min_len = SIMS_DESIGN_RECORD_HEADER_BYTES + SIMS_DESIGN_RECORD_TRAILER_BYTES;
    if (len < min_len)
        return SIMS_CORRUPT("design record: %zu bytes, shorter than the %zu-byte minimum", len,
                            min_len);
    if (memcmp(buf, record_magic, 4) != 0)
        return SIMS_CORRUPT("design record: bad magic %02x %02x %02x %02x (expected \"SMDG\")",
                            buf[0], buf[1], buf[2], buf[3]);
    /* The checksum comes before any field so that a damaged byte anywhere
     * reads as damage, not as a plausible different design. */
    uint64_t stored = le_load64(buf + len - 8);
    uint64_t computed = sims_xxh3_64(buf, len - 8, SIMS_DESIGN_RECORD_SEED);
    if (stored != computed)
        return SIMS_CORRUPT("design record: checksum mismatch (stored %016llx, computed %016llx)",
                            (unsigned long long)stored, (unsigned long long)computed);

    sims_cursor c;
    cursor_init(&c, buf + 4, len - 8 - 4);
    uint8_t version, f_bits, k, levels, m1, r1, m2, r2;
    uint16_t n_tables, reserved;
    /* The header fits: len >= 24 was checked above. */
    cursor_u8(&c, &version);
    cursor_u8(&c, &f_bits);
    cursor_u8(&c, &k);
    cursor_u8(&c, &levels);
    cursor_u8(&c, &m1);
    cursor_u8(&c, &r1);
    cursor_u8(&c, &m2);
    cursor_u8(&c, &r2);
    cursor_u16(&c, &n_tables);
    cursor_u16(&c, &reserved);
    if (c.overrun)
        return SIMS_CORRUPT("design record: header truncated");

    if (version != SIMS_DESIGN_RECORD_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "design record: format version %u; this build reads version %d", version,
                         SIMS_DESIGN_RECORD_VERSION);
    if (f_bits != 64)
        return SIMS_CORRUPT("design record: fingerprint bits %u (must be 64)", f_bits);
    if (k > SIMS_DESIGN_MAX_K)
        return SIMS_CORRUPT("design record: k = %u exceeds %d", k, SIMS_DESIGN_MAX_K);
    if (levels != 1 && levels != 2)
        return SIMS_CORRUPT("design record: levels = %u (must be 1 or 2)", levels);
    if (r1 == 0 || m1 != k + r1)
        return SIMS_CORRUPT("design record: level-1 blocks %u, r1 %u do not fit k = %u", m1, r1, k);
    if (levels == 1 && (m2 != 0 || r2 != 0))
        return SIMS_CORRUPT("design record: level-2 fields %u, %u set in a one-level design", m2,
                            r2);
    if (levels == 2 && (r2 == 0 || m2 != k + r2))
        return SIMS_CORRUPT("design record: level-2 blocks %u, r2 %u do not fit k = %u", m2, r2, k);
    if (n_tables == 0 || n_tables > SIMS_DESIGN_MAX_TABLES)
        return SIMS_CORRUPT("design record: table count %u outside 1..%d", n_tables,
                            SIMS_DESIGN_MAX_TABLES);
    if (reserved != 0)
        return SIMS_CORRUPT("design record: reserved header field is %u (must be 0)", reserved);
    size_t expect = SIMS_DESIGN_RECORD_HEADER_BYTES +
                    (size_t)n_tables * SIMS_DESIGN_RECORD_TABLE_BYTES +
                    SIMS_DESIGN_RECORD_TRAILER_BYTES;
    if (len != expect)
        return SIMS_CORRUPT("design record: %zu bytes, expected %zu for %u tables", len, expect,
                            n_tables);

    sims_design_params params = {k, levels, r1, r2};
    if (sims_design_build(&params, out) != SIMSTORE_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", simstore_last_error());
        return SIMS_CORRUPT("design record: construction parameters rejected: %s", why);
    }
    if (out->n_tables != n_tables)
        return SIMS_CORRUPT("design record: %u tables stored, the parameters give %u", n_tables,
                            (unsigned)out->n_tables);
    for (uint32_t t = 0; t < n_tables; t++) {
        uint8_t prefix_bits, table_reserved;
        const uint8_t *perm;
        cursor_u8(&c, &prefix_bits);
        cursor_u8(&c, &table_reserved);
        cursor_bytes(&c, 64, &perm);
        if (c.overrun)
            return SIMS_CORRUPT("design record: table %u truncated", t);
        if (table_reserved != 0)
            return SIMS_CORRUPT("design record: table %u reserved byte is %u (must be 0)", t,
                                table_reserved);
        if (prefix_bits != out->tables[t].prefix_bits)
            return SIMS_CORRUPT("design record: table %u prefix %u bits, the design has %u", t,
                                prefix_bits, out->tables[t].prefix_bits);
        if (memcmp(perm, out->tables[t].perm, 64) != 0)
            return SIMS_CORRUPT("design record: table %u permutation differs from the design's", t);
    }
    if (cursor_remaining(&c) != 0)
        return SIMS_CORRUPT("design record: %zu bytes after the tables", cursor_remaining(&c));
    return SIMSTORE_OK;
}
