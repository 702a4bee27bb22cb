/* bits.h: counting the set bits of a word, and the distance of two
 * fingerprints, for the layers' bit-level code (table searches, Elias-Fano
 * select, joins, batches, the in-memory index, designs, sketches).
 *
 * The rule: the instruction where the compile target has it (aarch64, or
 * x86-64 with -mpopcnt, -march=x86-64-v2 or later, -march=native); in a
 * portable x86-64 build (the default target, which lacks POPCNT) the
 * instruction too when the CPU running the library has it, chosen at run
 * time by one predictable test of the CPU's feature bits (libgcc's
 * __cpu_model, set before main), and a branch-free count on the rare CPUs
 * without it (before 2008, or virtual CPUs that hide it). Never a call into
 * libgcc's __popcountdi2. A portable build's queries were 0.6-1.4 us slower
 * at 2^23 documents without the instruction (bench_query, README "Numbers").
 *
 * simstore_distance (simstore.h) is the public, header-only form: it keeps
 * the compile-time rule, as a program including simstore.h compiles it for
 * its own target. */
#ifndef SIMS_COMMON_BITS_H
#define SIMS_COMMON_BITS_H

#include <stdint.h>

#include "simstore.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(__POPCNT__)
#define SIMS_POPCNT_AT_RUN_TIME 1
#else
#define SIMS_POPCNT_AT_RUN_TIME 0
#endif

static inline unsigned sims_popcount64(uint64_t x)
{
#if SIMS_POPCNT_AT_RUN_TIME
    if (__builtin_expect(__builtin_cpu_supports("popcnt"), 1)) {
        uint64_t n;
        /* Zeroing the output first breaks the false dependency some Intel
         * cores give POPCNT on its destination. */
        __asm__("xorl %k0, %k0\n\tpopcntq %1, %0" : "=&r"(n) : "rm"(x) : "cc");
        return (unsigned)n;
    }
#endif
    return simstore_distance(x, 0);
}

/* The Hamming distance of two fingerprints: simstore_distance's value. */
static inline unsigned sims_distance(uint64_t a, uint64_t b)
{
    return sims_popcount64(a ^ b);
}

#endif
