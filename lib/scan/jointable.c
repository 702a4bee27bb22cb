/* jointable.c: the join's pieces for a program that spreads it over
 * processes (simstore_join_plan_*): the design simstore_join_fingerprints()
 * would use, each table's permutation and prefix width, and the join of one
 * table over a sorted array holding whole prefix groups. */
#include "scan/join.h"
#include "simstore_unstable.h"
#include "scan/joinall.h"

#include "common/error.h"
#include "sort/u64sort.h"

#include <stdlib.h>

struct simstore_join_plan {
    unsigned k;
    sims_design design;
};

int simstore_join_plan_new(unsigned k, uint64_t n, simstore_join_plan **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_join_plan_new: NULL out");
    *out = NULL;
    if (k < 1 || k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "join distance %u outside 1..%u", k, SIMSTORE_MAX_K);
    simstore_join_plan *p = malloc(sizeof *p);
    if (!p)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a design");
    p->k = k;
    int rc = sims_scan_join_design(k, n, &p->design);
    if (rc) {
        free(p);
        return rc;
    }
    *out = p;
    return SIMSTORE_OK;
}

void simstore_join_plan_free(simstore_join_plan *p)
{
    free(p);
}

unsigned simstore_join_plan_tables(const simstore_join_plan *p)
{
    return p ? p->design.n_tables : 0;
}

unsigned simstore_join_plan_prefix_bits(const simstore_join_plan *p, unsigned t)
{
    return p && t < p->design.n_tables ? p->design.tables[t].prefix_bits : 0;
}

uint64_t simstore_join_plan_permute(const simstore_join_plan *p, unsigned t, uint64_t fp)
{
    if (!p || t >= p->design.n_tables)
        return fp;
    return sims_permute(&p->design.tables[t].permuter, fp);
}

int simstore_join_plan_sort(const simstore_join_plan *p, unsigned t, uint64_t *permuted, size_t n)
{
    if (!p || (!permuted && n))
        return sims_fail(SIMSTORE_EINVAL, "simstore_join_plan_sort: NULL argument");
    if (t >= p->design.n_tables)
        return sims_fail(SIMSTORE_EINVAL, "table %u of a design of %u", t, p->design.n_tables);
    uint64_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory sorting %zu values", n);
    sims_radix_sort_u64_grouped(permuted, tmp, n, p->design.tables[t].prefix_bits);
    free(tmp);
    return SIMSTORE_OK;
}

int simstore_join_plan_table(const simstore_join_plan *p, unsigned t, const uint64_t *permuted,
                             size_t n, uint64_t memory_bytes, simstore_fp_pair_fn fn, void *ctx)
{
    if (!p || !fn || (!permuted && n))
        return sims_fail(SIMSTORE_EINVAL, "simstore_join_plan_table: NULL argument");
    if (t >= p->design.n_tables)
        return sims_fail(SIMSTORE_EINVAL, "table %u of a design of %u", t, p->design.n_tables);
    for (size_t i = 1; i < n; i++)
        if (permuted[i] < permuted[i - 1])
            return sims_fail(SIMSTORE_EINVAL, "table %u: values out of order at %zu", t, i);
    scan_joiner *j;
    int rc = sims_scan_joiner_new(&p->design, p->k, memory_bytes, &j);
    if (rc)
        return rc;
    scan_values src = {permuted, n, 0};
    rc = sims_scan_join_table(j, t, sims_scan_values_next, &src, fn, ctx);
    sims_scan_joiner_free(j);
    return rc;
}
