/* paraclusters.h: `simstore clusters --paragraphs` (paraclusters.c). */
#ifndef SIMS_CMD_PARACLUSTERS_H
#define SIMS_CMD_PARACLUSTERS_H

#include "simstore.h"

/* Print the clusters of documents sharing paragraphs: the connected
 * components of simstore_paragraph_pairs(s, k, min_fraction), each with the
 * document it keeps by `keep` (a simstore_keep_rule; key_field for the meta
 * rules), one line per member: CLUSTER<TAB>DOC_ID<TAB>KEPT<TAB>FRACTION
 * (the member's pair fraction with the kept document, '-' when they are
 * linked through others; 1.0000 for the kept one), or JSON Lines. Clusters
 * in the byte order of their kept id, the kept document first, then by id.
 * Returns 0 or a SIMSTORE_E* code; *sum gets the counts. */
int paragraph_clusters(const char *cmd, simstore *s, unsigned k, double min_fraction, int keep,
                       const char *key_field, int json, simstore_cluster_summary *sum);

#endif
