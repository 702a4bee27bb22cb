/* progress.c: throttled progress lines on a terminal's stderr. */
#include "progress.h"

#include <stdio.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, const char *cmd, int enabled)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->cmd = cmd;
    p->enabled = enabled && isatty(STDERR_FILENO);
}

static void human(double v, char *buf, size_t size)
{
    if (v >= 1e9)
        snprintf(buf, size, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, size, "%.2fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, size, "%.1fk", v / 1e3);
    else
        snprintf(buf, size, "%.0f", v);
}

void cli_progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
    cli_progress *p = (cli_progress *)ctx;
    if (!p->enabled)
        return;
    pthread_mutex_lock(&p->mu);
    double now = cli_now();
    int new_phase = strncmp(p->phase, phase, sizeof p->phase - 1) != 0;
    if (new_phase) {
        snprintf(p->phase, sizeof p->phase, "%s", phase);
        p->phase_start = now;
    } else if (now - p->last_draw < 0.25 && !(total && done >= total)) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    p->last_draw = now;
    double elapsed = now - p->phase_start;
    char d[32], t[32], r[32];
    human((double)done, d, sizeof d);
    human(elapsed > 0 ? (double)done / elapsed : 0, r, sizeof r);
    if (total) {
        human((double)total, t, sizeof t);
        double eta = done && elapsed > 0 ? elapsed * (double)(total - done) / (double)done : 0;
        fprintf(stderr, "\r\033[Ksimstore %s: %s %s/%s (%s/s, ETA %.0fs)", p->cmd, phase, d, t, r,
                eta);
    } else if (done) {
        fprintf(stderr, "\r\033[Ksimstore %s: %s %s (%s/s)", p->cmd, phase, d, r);
    } else {
        fprintf(stderr, "\r\033[Ksimstore %s: %s", p->cmd, phase);
    }
    p->drawn = 1;
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_done(cli_progress *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->enabled && p->drawn)
        fputs("\r\033[K", stderr);
    p->drawn = 0;
    pthread_mutex_unlock(&p->mu);
}

void cli_report_resources(const char *cmd, double start)
{
    struct rusage ru;
    double peak_mib = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        peak_mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
    fprintf(stderr, "simstore %s: %.1f s, peak RSS %.1f MiB\n", cmd, cli_now() - start, peak_mib);
}

void cli_progress_done_cb(void *ctx)
{
    cli_progress_done((cli_progress *)ctx);
}
