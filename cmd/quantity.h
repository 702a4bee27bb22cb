/* quantity.h: counts and sizes as people write them on a command line, one
 * parser for the simstore command (--memory, --expected, ...) and the bench
 * programs (gen_fingerprints --count). Pure C, no dependencies. */
#ifndef SIMS_CMD_QUANTITY_H
#define SIMS_CMD_QUANTITY_H

#include <stdint.h>

/* Parse a whole number written as
 *   digits                    1073741824
 *   digits.digits             1.5 (with a suffix or exponent that makes it whole)
 *   a decimal exponent        1e9, 2.5E6, 1e+9
 *   a power of two            2^30 (exponent 0..63)
 * the first three optionally followed by a binary suffix, case-insensitive:
 *   K, M, G, T (powers of 1024), each optionally followed by i and then
 *   optionally by B: 64M, 64Mi, 64MB, 64MiB, 64mib, 4kB; B alone is bytes.
 * The value must be whole (1.5K is 1536; 1.3K and 0.5 are refused) and fit
 * in 64 bits. Nothing else is accepted: no sign, no spaces, no text after.
 * Returns 0 with *out set, or -1. */
int quantity_parse(const char *s, uint64_t *out);

#endif
