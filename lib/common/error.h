/* error.h: internal error reporting: set the thread's detail message and return
 * a SIMSTORE_E* code in one expression; the corruption macro used by every
 * parser of on-disk bytes; the private "read again" code and its loop. */
#ifndef SIMS_COMMON_ERROR_H
#define SIMS_COMMON_ERROR_H

#include "simstore.h"

#if defined(__GNUC__) || defined(__clang__)
#define SIMS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define SIMS_LIKELY(x) __builtin_expect(!!(x), 1)
#define SIMS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define SIMS_PRINTF(f, a)
#define SIMS_LIKELY(x) (x)
#define SIMS_UNLIKELY(x) (x)
#endif

/* Record a detail message for simstore_last_error() and return `code`. */
int sims_fail(int code, const char *fmt, ...) SIMS_PRINTF(2, 3);

/* Like sims_fail(SIMSTORE_EIO, ...) but appends ": strerror(errno)" using the
 * errno value current at the call. */
int sims_fail_errno(const char *fmt, ...) SIMS_PRINTF(1, 2);

/* Prefix the current detail message with "prefix: " (adds context such as the
 * file name while an error travels up), then return `code`. */
int sims_fail_context(int code, const char *fmt, ...) SIMS_PRINTF(2, 3);

/* Clear the detail message. */
void sims_error_clear(void);

/* The size check of an options struct (simstore.h, "Options structs"):
 * SIMSTORE_OK when `got` is `want`, else SIMSTORE_EINVAL with a message
 * naming `type` and its _init. SIMS_CHECK_OPTIONS(o, name) checks a
 * pointer that may be NULL (the defaults). */
int sims_check_options_size(size_t got, size_t want, const char *type);
#define SIMS_CHECK_OPTIONS(o, name)                                                                \
    ((o) ? sims_check_options_size((o)->size, sizeof *(o), #name) : SIMSTORE_OK)

/* ---- "the store changed under this read: read again" ------------------------
 * A reader's view of a store (an LMDB read transaction, the segment files its
 * state names, the meta page it pins) can go stale while it is used: a writer
 * commits, then removes files of the state the view saw or rewrites that meta
 * page. The step that finds out returns SIMS_ERETRY (through
 * sims_retry_or_fail); sims_retry() owns the loop that reads again, and the
 * limit. The code never reaches a caller of the public API. */
#define SIMS_ERETRY (-1001)

/* Attempts sims_retry() makes before a view that keeps going stale is an
 * error. Past them it goes on, for up to SIMS_RETRY_SECONDS in all and
 * pausing longer and longer (sims_retry_pause), only while each attempt saw
 * the store in a new state (sims_retry_saw): a reader outlasts a burst of
 * commits on a slow or loaded machine, but bytes that look torn and stay
 * the same are damage, reported at once. */
#define SIMS_READ_ATTEMPTS 8
#define SIMS_RETRY_SECONDS 5

/* Before attempt number `attempt` (1, 2, ...) of a read whose view went
 * stale: yield the CPU for the first SIMS_READ_ATTEMPTS, then sleep 1 ms,
 * 2 ms, ... up to 10 ms. */
void sims_retry_pause(unsigned attempt);

/* Whether a read that began at `start` (CLOCK_MONOTONIC seconds,
 * sims_retry_clock) may make attempt number `attempt` (from 0): always
 * within `min_attempts`; past them while the store `moved` (the last
 * attempt saw another state than the one before) and within
 * SIMS_RETRY_SECONDS. */
double sims_retry_clock(void);
int sims_retry_more(unsigned attempt, unsigned min_attempts, double start, int moved);

/* The attempt under way found its view stale in the store's state `stamp`
 * (the LMDB transaction it read, a hash of the bytes it checked): the same
 * stamp in two attempts in a row means nothing moved. An attempt that says
 * nothing gets SIMS_READ_ATTEMPTS attempts. */
void sims_retry_saw(uint64_t stamp);

/* This attempt found its view stale: return SIMS_ERETRY, and keep `code`
 * (with the detail message already set) as the result sims_retry() gives if
 * no attempt is left. */
int sims_retry_or_fail(int code);

/* One attempt of a read; returns SIMS_ERETRY (from sims_retry_or_fail) to be
 * attempted again from a new view, anything else to end. */
typedef int (*sims_attempt_fn)(void *ctx);

/* Call attempt(ctx) until it returns anything but SIMS_ERETRY (at least
 * SIMS_READ_ATTEMPTS times, then while the store moves: sims_retry_more),
 * and return what it returned; when every attempt
 * found its view stale, the code the last one gave sims_retry_or_fail().
 * Never returns SIMS_ERETRY. */
int sims_retry(sims_attempt_fn attempt, void *ctx);

/* Where a read cannot begin again (it has handed out results from a view
 * it holds): `rc`, or when it is SIMS_ERETRY the code the attempt gave
 * sims_retry_or_fail(). */
int sims_retry_final(int rc);

/* Up to 40 bytes of an id (or any bytes) for a message, control
 * characters, quotes, backslashes and bytes that are not UTF-8 escaped
 * (\xHH, \u00HH), so that a message can neither forge lines nor reach a
 * terminal with control sequences: sims_excerpt(id, len).text. */
typedef struct sims_excerpt_buf {
    char text[200];
} sims_excerpt_buf;
sims_excerpt_buf sims_excerpt(const void *bytes, size_t len);

/* Every rejection of on-disk bytes goes through SIMS_CORRUPT: it returns
 * SIMSTORE_ECORRUPT with a message naming what is wrong; debug builds append
 * the source location that caught it. */
#ifdef NDEBUG
#define SIMS_CORRUPT(...) sims_fail(SIMSTORE_ECORRUPT, __VA_ARGS__)
#else
#define SIMS_CORRUPT(...) sims_fail_at(__FILE__, __LINE__, __VA_ARGS__)
int sims_fail_at(const char *src, int line, const char *fmt, ...) SIMS_PRINTF(3, 4);
#endif

#endif
