/* near.c: the near-duplicate rule (simstore.h, "The near-duplicate rule"):
 * its defaults, resolved here alone from what a store is, and the predicate
 * every path that drops or pairs near-duplicates asks. */
#include "common/error.h"

#include "simstore.h"

#include <string.h>

void simstore_near_rule_init(simstore_near_rule *rule)
{
    if (!rule)
        return;
    memset(rule, 0, sizeof *rule);
    rule->size = sizeof *rule;
    rule->k = SIMSTORE_NEAR_DEFAULT_K;
    rule->min_similarity = SIMSTORE_NEAR_DEFAULT_SIMILARITY;
    rule->min_fraction = SIMSTORE_NEAR_DEFAULT_FRACTION;
}

int simstore_near_rule_resolve(simstore_near_rule *rule, unsigned store_k,
                               simstore_sketch_kind sketch, unsigned flags)
{
    if (!rule)
        return sims_fail(SIMSTORE_EINVAL, "simstore_near_rule_resolve: NULL rule");
    int rc = SIMS_CHECK_OPTIONS(rule, simstore_near_rule);
    if (rc)
        return rc;
    if (flags & ~(SIMSTORE_NEAR_BY_PARAGRAPHS | SIMSTORE_NEAR_BY_FINGERPRINT))
        return sims_fail(SIMSTORE_EINVAL, "simstore_near_rule_resolve: unknown flags %#x", flags);
    int k_default = rule->k == SIMSTORE_NEAR_DEFAULT_K;
    if (rule->min_similarity == SIMSTORE_NEAR_DEFAULT_SIMILARITY)
        /* The near-duplicate setting, where it can be told: documents
         * (not fingerprints or paragraphs) with sketches, k not given. */
        rule->min_similarity =
            !flags && sketch != SIMSTORE_SKETCH_NONE && k_default ? SIMSTORE_NEAR_SIMILARITY : 0;
    if (rule->min_fraction == SIMSTORE_NEAR_DEFAULT_FRACTION)
        rule->min_fraction = SIMSTORE_NEAR_FRACTION;
    if (k_default)
        rule->k = rule->min_similarity > 0 ? SIMSTORE_NEAR_K : store_k;
    if (rule->k == SIMSTORE_NEAR_STORE_K)
        rule->k = store_k;
    if (rule->k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_ERANGE, "distance %u is above %u, the largest there is", rule->k,
                         SIMSTORE_MAX_K);
    if (!(rule->min_similarity >= 0 && rule->min_similarity <= 1))
        return sims_fail(SIMSTORE_EINVAL, "minimum similarity %g is outside 0..1",
                         rule->min_similarity);
    if (!(rule->min_fraction >= 0 && rule->min_fraction <= 1))
        return sims_fail(SIMSTORE_EINVAL, "minimum fraction %g is outside 0..1",
                         rule->min_fraction);
    if (rule->min_similarity > 0 && (flags & SIMSTORE_NEAR_BY_FINGERPRINT))
        return sims_fail(SIMSTORE_EINVAL, "pairs by fingerprint have no similarity: a minimum "
                                          "similarity needs pairs of documents");
    if (rule->min_similarity > 0 && (flags & SIMSTORE_NEAR_BY_PARAGRAPHS))
        return sims_fail(SIMSTORE_EINVAL, "judged by their paragraphs, documents have no "
                                          "minimum similarity");
    if (rule->min_similarity > 0 && sketch == SIMSTORE_SKETCH_NONE)
        return sims_fail(SIMSTORE_EINVAL,
                         "the store keeps no sketches (built with sketch kind none, from "
                         "fingerprints, or before sketches): a minimum similarity needs them");
    return SIMSTORE_OK;
}

int simstore_near_duplicate(const simstore_near_rule *rule, unsigned distance, double similarity)
{
    /* An unknown similarity (-1) is below every minimum: !(x >= min). */
    return distance <= rule->k && (rule->min_similarity <= 0 || similarity >= rule->min_similarity);
}

int simstore_near_duplicate_paragraphs(const simstore_near_rule *rule, uint64_t shared, uint64_t of)
{
    return shared > 0 && of > 0 && (double)shared / (double)of >= rule->min_fraction;
}
