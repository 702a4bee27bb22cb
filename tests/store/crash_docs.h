/* crash_docs.h: the deterministic documents the crash and concurrency tests
 * and their helper program (crash_op) agree on. Document i of a seeded
 * universe has the id "doc-NNNNNNN" and a fingerprint derived from (seed, i);
 * every fifth document repeats the fingerprint of another one, so that stores
 * hold fingerprints with several documents, deletes leave some fingerprints
 * alive and kill others, and fingerprint-only inputs carry repeats. In the
 * paragraph scenarios each document also has paragraph fingerprints, some
 * shared (cdoc_paragraphs). */
#ifndef SIMS_TEST_CRASH_DOCS_H
#define SIMS_TEST_CRASH_DOCS_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline uint64_t cdoc_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Documents i and j share a fingerprint iff cdoc_key(i) == cdoc_key(j). */
static inline uint64_t cdoc_key(uint64_t i)
{
    return i % 5 == 4 ? i / 2 : i;
}

static inline uint64_t cdoc_fp(uint64_t seed, uint64_t i)
{
    return cdoc_mix(seed ^ cdoc_mix(cdoc_key(i)));
}

static inline void cdoc_id(uint64_t i, char *buf, size_t size)
{
    snprintf(buf, size, "doc-%07" PRIu64, i);
}

/* The paragraph fingerprints of document i in the paragraph scenarios: one
 * shared by documents 3j..3j+2, near (2 bits) a shared centre, and one of
 * its own. */
#define CDOC_PARAGRAPHS 2
static inline void cdoc_paragraphs(uint64_t seed, uint64_t i, uint64_t out[CDOC_PARAGRAPHS])
{
    out[0] = cdoc_mix(seed ^ 0x5041524153ULL ^ cdoc_mix(i / 3)) ^ (i % 3 == 2 ? 0x11 : 0);
    out[1] = cdoc_mix(seed ^ 0x4f574e ^ cdoc_mix(i + 0x10000));
}

/* The index of an id made by cdoc_id, or -1. */
static inline long long cdoc_parse_id(const char *id, size_t len)
{
    if (len != 11 || id[0] != 'd' || id[1] != 'o' || id[2] != 'c' || id[3] != '-')
        return -1;
    long long v = 0;
    for (size_t i = 4; i < len; i++) {
        if (id[i] < '0' || id[i] > '9')
            return -1;
        v = v * 10 + (id[i] - '0');
    }
    return v;
}

#endif
