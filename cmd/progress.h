/* progress.h: progress lines on stderr for long commands ("phase: done of
 * total, rate, ETA"), redrawn at most a few times a second, and silent when
 * stderr is not a terminal or --quiet was given. */
#ifndef SIMS_CMD_PROGRESS_H
#define SIMS_CMD_PROGRESS_H

#include <pthread.h>
#include <stdint.h>

/* Safe to update from several threads (the build's table workers do). */
typedef struct cli_progress {
    pthread_mutex_t mu;
    int enabled;
    const char *cmd;
    char phase[64];
    double phase_start;
    double last_draw;
    int drawn; /* a line is on screen and needs finishing */
} cli_progress;

/* enabled: 1 to draw (when stderr is a terminal), 0 never. */
void cli_progress_init(cli_progress *p, const char *cmd, int enabled);
/* A simstore_progress_fn: ctx is the cli_progress. */
void cli_progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total);
/* End the line on screen, if any. */
void cli_progress_done(cli_progress *p);
/* The same, with the cli_progress as a void pointer (a callback). */
void cli_progress_done_cb(void *ctx);
/* Monotonic seconds. */
double cli_now(void);

/* "simstore CMD: N.N s, peak RSS X MiB" on stderr, since `start` (cli_now). */
void cli_report_resources(const char *cmd, double start);

#endif
