/* idcheck.h: repeated document ids among records a command does not keep in
 * memory (dedup's dropped records), found at the end of a run in bounded
 * memory: the ids go to hash partitions in an unlinked temporary file each,
 * and every partition is sorted on its own. */
#ifndef SIMSTORE_CMD_IDCHECK_H
#define SIMSTORE_CMD_IDCHECK_H

#include <stddef.h>

typedef struct idcheck idcheck;

/* A checker spilling to $TMPDIR (or /tmp). 0, or -1 with errno set. */
int idcheck_new(idcheck **out);

/* Note id, read at file:line (the name is copied; files are numbered in
 * the order they are first given, which is the input order). 0, or -1 with
 * errno set (a write failed). */
int idcheck_add(idcheck *c, const char *id, size_t len, const char *file, unsigned long long line);

/* Nonzero when id belongs to a record the command kept. */
typedef int (*idcheck_kept_fn)(void *ctx, const char *id, size_t len);

/* One repeat: the record at file:line has the id of a kept record (when
 * first_file is NULL) or of the record at first_file:first_line, noted
 * before it. */
typedef void (*idcheck_report_fn)(void *ctx, const char *file, unsigned long long line,
                                  const char *id, size_t len, const char *first_file,
                                  unsigned long long first_line);

/* Every noted record whose id a kept record has, or an earlier noted record
 * has: *repeats counts them, and report() gets the first `max_reports` of
 * them in input order. 0, or -1 with errno set (reading back failed, or no
 * memory for a partition). */
int idcheck_finish(idcheck *c, idcheck_kept_fn kept, void *kept_ctx, idcheck_report_fn report,
                   void *report_ctx, size_t max_reports, unsigned long long *repeats);

void idcheck_free(idcheck *c);

#endif
