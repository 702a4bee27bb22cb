/* pairs.h: what clusters.c shares with pairs.c: the spill sorters of a
 * scan and the join of a store's state into sorted fingerprint pairs. */
#ifndef SIMS_SCAN_PAIRS_H
#define SIMS_SCAN_PAIRS_H

#include "scan/state.h"
#include "sort/recsort.h"

/* Where a scan's spill files go: o->tmp_dir, else $TMPDIR, else /tmp. */
const char *sims_scan_tmp_dir(const simstore_scan_options *o);

/* A record sorter with 1/share of o->memory_bytes, spilling to
 * sims_scan_tmp_dir(o). */
int sims_scan_sorter_new(const simstore_scan_options *o, unsigned share, sims_recsort **out);

/* Join the state's tables at o->k into *joined (finished: read it with
 * sims_scan_pairs_each, joinall.h), dead fingerprints
 * included, with the rule's band candidates beyond o->k (bands.h). With o->k above the store's design, the distinct fingerprints
 * are joined in memory under a design for o->k instead (the same pairs),
 * within half of o->memory_bytes (SIMSTORE_EFULL, saying what it needs,
 * when they do not fit). The caller frees *joined, also on failure. */
int sims_scan_join_store(scan_state *st, const simstore_scan_options *o, sims_recsort **joined);

#endif
