/* near.c: the near-duplicate rule (simstore.h, "The near-duplicate rule"):
 * its defaults (bands included), resolved here alone from what a store is,
 * and the predicates every path that drops or pairs near-duplicates asks. */
#include "common/bits.h"
#include "common/error.h"
#include "common/sketch.h"

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
    rule->bands = SIMSTORE_NEAR_DEFAULT_BANDS;
}

int simstore_near_rule_resolve(simstore_near_rule *rule, unsigned store_k,
                               simstore_sketch_kind sketch, unsigned flags)
{
    if (!rule)
        return sims_fail(SIMSTORE_EINVAL, "simstore_near_rule_resolve: NULL rule");
    int rc = SIMS_CHECK_OPTIONS(rule, simstore_near_rule);
    if (rc)
        return rc;
    if (flags &
        ~(SIMSTORE_NEAR_BY_PARAGRAPHS | SIMSTORE_NEAR_BY_FINGERPRINT | SIMSTORE_NEAR_WITHOUT_BANDS))
        return sims_fail(SIMSTORE_EINVAL, "simstore_near_rule_resolve: unknown flags %#x", flags);
    int k_default = rule->k == SIMSTORE_NEAR_DEFAULT_K;
    if (rule->min_similarity == SIMSTORE_NEAR_DEFAULT_SIMILARITY)
        /* The near-duplicate setting, where it can be told: documents
         * (not fingerprints or paragraphs) with sketches, k not given. */
        rule->min_similarity =
            !(flags & (SIMSTORE_NEAR_BY_PARAGRAPHS | SIMSTORE_NEAR_BY_FINGERPRINT)) &&
                    sketch != SIMSTORE_SKETCH_NONE && k_default
                ? SIMSTORE_NEAR_SIMILARITY
                : 0;
    if (rule->min_fraction == SIMSTORE_NEAR_DEFAULT_FRACTION)
        rule->min_fraction = SIMSTORE_NEAR_FRACTION;
    if (rule->k == SIMSTORE_NEAR_STORE_K)
        rule->k = store_k;
    if (!k_default && rule->k > SIMSTORE_MAX_K)
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
    if (rule->bands != SIMSTORE_NEAR_DEFAULT_BANDS && rule->bands != 0 && rule->bands != 1)
        return sims_fail(SIMSTORE_EINVAL, "bands %d: give 0 (off) or 1 (on)", rule->bands);
    if (rule->bands == 1 && !(rule->min_similarity >= SIMSTORE_NEAR_BANDS_MIN_SIMILARITY))
        return sims_fail(SIMSTORE_EINVAL,
                         "bands need a minimum similarity of at least %g (they are derived "
                         "from it)",
                         SIMSTORE_NEAR_BANDS_MIN_SIMILARITY);
    if (rule->bands == 1 && (flags & SIMSTORE_NEAR_WITHOUT_BANDS))
        return sims_fail(SIMSTORE_EINVAL, "bands are not taken one document at a time against a "
                                          "stored store yet (queries, insert-if-new, dedup "
                                          "--store): give no bands");
    if (rule->bands == SIMSTORE_NEAR_DEFAULT_BANDS && (flags & SIMSTORE_NEAR_WITHOUT_BANDS))
        rule->bands = 0;
    if (rule->bands == SIMSTORE_NEAR_DEFAULT_BANDS)
        rule->bands = SIMSTORE_NEAR_BANDS_BY_DEFAULT &&
                      rule->min_similarity >= SIMSTORE_NEAR_BANDS_MIN_SIMILARITY;
    rule->band_rows = rule->band_count = 0;
    if (rule->bands)
        simstore_sketch_bands(sketch, rule->min_similarity, &rule->band_rows, &rule->band_count);
    /* k not given: with bands the store's own (its tables' join: the bands
     * find what 7 bits would and more, format/sketch.md 6.2), with a
     * minimum similarity and no bands SIMSTORE_NEAR_K, else the store's. */
    if (k_default)
        rule->k = !rule->bands && rule->min_similarity > 0 ? SIMSTORE_NEAR_K : store_k;
    if (rule->k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_ERANGE, "the store's distance %u is above %u", rule->k,
                         SIMSTORE_MAX_K);
    return SIMSTORE_OK;
}

int simstore_near_duplicate_sketches(const simstore_near_rule *rule, simstore_sketch_kind kind,
                                     unsigned distance, const uint8_t *a, const uint8_t *b,
                                     double *similarity)
{
    double sim = simstore_sketch_similarity(kind, a, b);
    if (similarity)
        *similarity = sim;
    /* The minimum first: it is the cheaper test, and most band candidates
     * of a low threshold fail it. */
    if (!(rule->min_similarity <= 0 || sim >= rule->min_similarity))
        return 0;
    return distance <= rule->k || (rule->band_count && a && b &&
                                   sims_sketch_share_band(a, b, rule->band_rows, rule->band_count));
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
