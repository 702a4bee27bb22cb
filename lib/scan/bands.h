/* bands.h: the near-duplicate rule's band candidates over a store's
 * documents (bands.c), for the store-wide scans (pairs.h). */
#ifndef SIMS_SCAN_BANDS_H
#define SIMS_SCAN_BANDS_H

#include "scan/state.h"
#include "sort/recsort.h"

/* With resolved options o whose rule has bands (o->bands, a minimum
 * similarity that gives the store's sketch kind a band shape), push into
 * `joined` (the join's unfinished pair sorter, joinall.h) every pair of
 * distinct fingerprints of the state more than o->k apart of which some
 * document of one and some document of the other have sketches agreeing on
 * one band: possibly more than once (sims_scan_pairs_each drops repeats).
 * Without bands, nothing. Memory: about half of o->memory_bytes (8 bytes a
 * document with a sketch, 4 a band held, and 16 for a band sorted in
 * memory, else through a spilling sorter); the documents are read once,
 * then once more per pass of the bands that fit.
 * Errors: those of the reads and sorters. */
int sims_scan_band_pairs(scan_state *st, const simstore_scan_options *o, sims_recsort *joined);

#endif
