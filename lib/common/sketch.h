/* sketch.h: the sketch kinds of format/sketch.md as every layer needs them
 * (bins and bytes of a kind, the similarity of two sketches); the text layer
 * makes the sketches, records and scans only carry and compare them. */
#ifndef SIMS_COMMON_SKETCH_H
#define SIMS_COMMON_SKETCH_H

#include "simstore.h"

#include <stddef.h>
#include <stdint.h>

/* The largest kind number a format may record (simstore_sketch_kind). */
#define SIMS_SKETCH_KIND_MAX 5u

/* log2 of the bins of a kind (7..11), or 0 for none or no kind. */
unsigned sims_sketch_bin_bits(unsigned kind);

/* Whether kind names a sketch (1..SIMS_SKETCH_KIND_MAX). */
static inline int sims_sketch_kind_valid(unsigned kind)
{
    return kind >= 1 && kind <= SIMS_SKETCH_KIND_MAX;
}

/* Band `band` of a sketch: its bits band * rows .. band * rows + rows - 1
 * (rows 1..32), bit i of the band as bit i of the key (format/sketch.md
 * 6.2). The caller keeps band * rows + rows within the sketch's bins. */
uint32_t sims_sketch_band_key(const uint8_t *sketch, unsigned rows, unsigned band);

/* Whether sketches a and b agree on every bit of one of the first `count`
 * bands of `rows` bits. */
int sims_sketch_share_band(const uint8_t *a, const uint8_t *b, unsigned rows, unsigned count);

#endif
