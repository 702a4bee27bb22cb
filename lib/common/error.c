/* error.c: error-code names, the per-thread detail message, the retry loop of
 * stale reads (SIMS_ERETRY), and the library's version functions. */
#include "common/error.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SIMS_ERRMSG_BYTES 1024

static _Thread_local char sims_errmsg[SIMS_ERRMSG_BYTES];
/* What sims_retry() returns when its attempts run out: the last attempt's
 * sims_retry_or_fail() code, beside the message it set. */
static _Thread_local int sims_retry_code;
/* What the current attempt saw, when it said (sims_retry_saw). */
static _Thread_local uint64_t sims_retry_stamp;
static _Thread_local int sims_retry_stamped;

unsigned simstore_version_number(void)
{
    return SIMSTORE_VERSION_NUMBER;
}

const char *simstore_version_string(void)
{
    return SIMSTORE_VERSION_STRING;
}

const char *simstore_strerror(int err)
{
    switch (err) {
    case SIMSTORE_OK: return "success";
    case SIMSTORE_ENOTFOUND: return "not found";
    case SIMSTORE_ECORRUPT: return "corrupt data";
    case SIMSTORE_EVERSION: return "unsupported format version";
    case SIMSTORE_ENOMEM: return "out of memory";
    case SIMSTORE_EIO: return "I/O error";
    case SIMSTORE_EFULL: return "limit reached";
    case SIMSTORE_EINVAL: return "invalid argument";
    case SIMSTORE_EBUSY: return "store is busy (another writer holds it)";
    case SIMSTORE_ERANGE: return "distance beyond the store's design";
    case SIMSTORE_EEXIST: return "already exists";
    case SIMSTORE_EREADONLY: return "store opened read-only";
    default: return "unknown error";
    }
}

const char *simstore_last_error(void)
{
    return sims_errmsg;
}

void sims_error_clear(void)
{
    sims_errmsg[0] = '\0';
}

int sims_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sims_errmsg, sizeof sims_errmsg, fmt, ap);
    va_end(ap);
    return code;
}

int sims_check_options_size(size_t got, size_t want, const char *type)
{
    if (got == want)
        return SIMSTORE_OK;
    return sims_fail(SIMSTORE_EINVAL,
                     "%s of size %zu: this library's is %zu bytes (fill it with %s_init() "
                     "first, then set its fields)",
                     type, got, want, type);
}

int sims_fail_errno(const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sims_errmsg, sizeof sims_errmsg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof sims_errmsg)
        snprintf(sims_errmsg + n, sizeof sims_errmsg - (size_t)n, ": %s", strerror(saved));
    errno = saved;
    return saved == ENOMEM ? SIMSTORE_ENOMEM : saved == ENOSPC ? SIMSTORE_EFULL : SIMSTORE_EIO;
}

int sims_fail_context(int code, const char *fmt, ...)
{
    char old[SIMS_ERRMSG_BYTES];
    memcpy(old, sims_errmsg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sims_errmsg, sizeof sims_errmsg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof sims_errmsg) {
        size_t used = (size_t)n;
        const char *rest = old[0] ? old : simstore_strerror(code);
        /* Append ": rest", truncating silently at the buffer's end. */
        size_t room = sizeof sims_errmsg - used - 1;
        size_t len = strlen(rest);
        if (room >= 2) {
            sims_errmsg[used++] = ':';
            sims_errmsg[used++] = ' ';
            room -= 2;
            if (len > room)
                len = room;
            memcpy(sims_errmsg + used, rest, len);
            sims_errmsg[used + len] = '\0';
        }
    }
    return code;
}

int sims_retry_or_fail(int code)
{
    sims_retry_code = code == SIMS_ERETRY ? SIMSTORE_EBUSY : code;
    return SIMS_ERETRY;
}

void sims_retry_pause(unsigned attempt)
{
    if (attempt <= SIMS_READ_ATTEMPTS) {
        sched_yield(); /* the next attempt on a fresh time slice */
        return;
    }
    unsigned ms = attempt - SIMS_READ_ATTEMPTS;
    struct timespec ts = {0, (long)(ms < 10 ? ms : 10) * 1000000L};
    nanosleep(&ts, NULL);
}

double sims_retry_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int sims_retry_more(unsigned attempt, unsigned min_attempts, double start, int moved)
{
    if (attempt < min_attempts)
        return 1;
    return moved && sims_retry_clock() - start < SIMS_RETRY_SECONDS;
}

int sims_retry_final(int rc)
{
    return rc == SIMS_ERETRY ? sims_retry_code : rc;
}

void sims_retry_saw(uint64_t stamp)
{
    sims_retry_stamp = stamp;
    sims_retry_stamped = 1;
}

int sims_retry(sims_attempt_fn attempt, void *ctx)
{
    /* An attempt that returned SIMS_ERETRY without naming its error. */
    sims_retry_code = SIMSTORE_EBUSY;
    /* A retry loop inside an attempt of another leaves the outer one's
     * stamp as it found it. */
    uint64_t outer_stamp = sims_retry_stamp;
    int outer_stamped = sims_retry_stamped;
    double start = sims_retry_clock();
    uint64_t last = 0;
    int have_last = 0;
    int rc;
    for (unsigned i = 0;; i++) {
        if (i > 0)
            sims_retry_pause(i);
        sims_retry_stamped = 0;
        rc = attempt(ctx);
        if (rc != SIMS_ERETRY)
            break;
        /* The store moved on since the last attempt: a writer is at work. */
        int moved = sims_retry_stamped && have_last && sims_retry_stamp != last;
        if (sims_retry_stamped) {
            last = sims_retry_stamp;
            have_last = 1;
        }
        if (!sims_retry_more(i + 1, SIMS_READ_ATTEMPTS, start, moved))
            break;
    }
    sims_retry_stamp = outer_stamp;
    sims_retry_stamped = outer_stamped;
    return sims_retry_final(rc);
}

#ifndef NDEBUG
int sims_fail_at(const char *src, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sims_errmsg, sizeof sims_errmsg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof sims_errmsg)
        snprintf(sims_errmsg + n, sizeof sims_errmsg - (size_t)n, " [%s:%d]", src, line);
    return SIMSTORE_ECORRUPT;
}
#endif
