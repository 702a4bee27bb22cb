/* segment.h: the CJK word segmenter: friso's dictionary, loaded once per
 * process and shared read-only, and per-fingerprinter friso tasks that cut a
 * run of Han characters into dictionary words (format/fingerprint.md,
 * "Han runs"). */
#ifndef SIMS_TEXT_SEGMENT_H
#define SIMS_TEXT_SEGMENT_H

#include "simstore.h"

#include <stddef.h>

/* Environment variable naming the friso.ini to use instead of the built-in
 * candidates; when set, it is the only one tried. */
#define SIMS_FRISO_INI_ENV "SIMSTORE_FRISO_INI"

/* Load the shared dictionary on first use (pthread_once) and report what
 * SIMSTORE_CJK_AUTO resolves to: SIMSTORE_CJK_FRISO or SIMSTORE_CJK_BIGRAM.
 * *description, when wanted, is a static sentence saying which and why. */
simstore_cjk_mode sims_cjk_auto(const char **description);

/* A friso task: the per-thread cursor friso segments with. */
typedef struct sims_friso_task sims_friso_task;

/* Create a task for friso words. The dictionary loads at the task's first
 * Han run (sims_friso_begin) when the friso.ini the loader tries first names
 * a readable lexicon index; otherwise now, and a dictionary that does not
 * load is SIMSTORE_ENOTFOUND here. So a process that never meets Han text
 * never spends the ~0.07 s of loading it. Returns 0, SIMSTORE_ENOTFOUND or
 * SIMSTORE_ENOMEM. */
int sims_friso_task_new(sims_friso_task **out);
void sims_friso_task_free(sims_friso_task *task);

/* Segment `run`, `len` bytes of well-formed UTF-8 holding only Han code points
 * and followed by a NUL byte (run[len] == 0; friso needs the terminator). The
 * run must stay unchanged until sims_friso_next() returns 0. Returns 0, or
 * SIMSTORE_ENOTFOUND when the dictionary, loaded now, does not load. */
int sims_friso_begin(sims_friso_task *task, char *run, size_t len);
/* The next word: 1 with its byte offset in the run and byte length (the words
 * partition the run in order), 0 at the end. */
int sims_friso_next(sims_friso_task *task, size_t *offset, size_t *len);

#endif
