/* statsjson.h: the one JSON object of a store's stats, as `stats --json`
 * prints it and the server's GET /v1/stats answers it. */
#ifndef SIMSTORE_CMD_STATSJSON_H
#define SIMSTORE_CMD_STATSJSON_H

#include "simstore.h"
#include <stdio.h>

/* Write the object (no newline) for the open store s, whose stats are st. */
void stats_json(FILE *out, simstore *s, const simstore_stats *st);

#endif
