/* gen_fingerprints.c: synthetic fingerprint sets for benchmarks and scale
 * runs, written to stdout: uniform random 64-bit values, or clusters (a random
 * centre and members within a given Hamming distance of it, as near-duplicate
 * documents give). Deterministic for a seed.
 *
 * Usage: gen_fingerprints --count N [--seed S] [--shape uniform|clustered]
 *                         [--cluster-size C] [--spread D] [--format u64|hex|tsv]
 *   N is a count as the simstore command takes them (cmd/quantity.h): 2^30,
 *   1e9, 1073741824, 64M (powers of 1024). u64: raw little-endian values (for
 *   `simstore build --fingerprint-only --format u64`); hex: one hex16 per
 *   line; tsv: "d<index><TAB>hex16" (documents). */
#include "quantity.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void usage(void)
{
    fprintf(stderr, "usage: gen_fingerprints --count N [--seed S] [--shape uniform|clustered] "
                    "[--cluster-size C] [--spread D] [--format u64|hex|tsv]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t count = 0, seed = 1, cluster = 16;
    unsigned spread = 6;
    int clustered = 0;
    const char *format = "u64";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(a, "--count") == 0) {
            if (quantity_parse(v, &count))
                usage();
        } else if (strcmp(a, "--seed") == 0) {
            seed = strtoull(v, NULL, 0);
        } else if (strcmp(a, "--shape") == 0) {
            if (strcmp(v, "clustered") == 0)
                clustered = 1;
            else if (strcmp(v, "uniform") != 0)
                usage();
        } else if (strcmp(a, "--cluster-size") == 0) {
            cluster = strtoull(v, NULL, 0);
            if (cluster == 0)
                usage();
        } else if (strcmp(a, "--spread") == 0) {
            spread = (unsigned)strtoul(v, NULL, 0);
            if (spread > 64)
                usage();
        } else if (strcmp(a, "--format") == 0) {
            format = v;
            if (strcmp(v, "u64") && strcmp(v, "hex") && strcmp(v, "tsv"))
                usage();
        } else {
            usage();
        }
        i++;
    }
    if (count == 0)
        usage();
    static uint64_t buf[1 << 16];
    size_t n = 0;
    uint64_t centre = 0;
    int raw = strcmp(format, "u64") == 0, tsv = strcmp(format, "tsv") == 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t v;
        if (!clustered) {
            v = splitmix(&seed);
        } else {
            if (i % cluster == 0)
                centre = splitmix(&seed);
            v = centre;
            unsigned flips = (unsigned)(splitmix(&seed) % (spread + 1u));
            for (unsigned f = 0; f < flips; f++)
                v ^= 1ULL << (splitmix(&seed) & 63);
        }
        if (raw) {
            buf[n++] = v; /* little-endian hosts: the values are their own bytes */
            if (n == sizeof buf / sizeof buf[0]) {
                if (fwrite(buf, sizeof buf[0], n, stdout) != n)
                    return 1;
                n = 0;
            }
        } else if (tsv) {
            printf("d%" PRIu64 "\t%016" PRIx64 "\n", i, v);
        } else {
            printf("%016" PRIx64 "\n", v);
        }
    }
    if (raw && n && fwrite(buf, sizeof buf[0], n, stdout) != n)
        return 1;
    return fflush(stdout) ? 1 : 0;
}
