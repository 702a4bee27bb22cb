/* parts.h: a store's bytes on disk by part (tables, LMDB's records,
 * mapping, other and free pages) per document, as stats and inspect print
 * them. */
#ifndef SIMSTORE_CMD_PARTS_H
#define SIMSTORE_CMD_PARTS_H

#include "simstore.h"
#include <stdio.h>

/* "bytes per document: T (tables A, records B, mapping C, other D, free E)"
 * on one line; per fingerprint in a fingerprint-only store. */
void parts_text(FILE *out, const simstore_stats *st);

/* The JSON member "bytes_per_document":{...} (or "bytes_per_fingerprint"),
 * without a separator before or after. */
void parts_json(FILE *out, const simstore_stats *st);

#endif
