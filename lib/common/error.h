/* error.h: internal error reporting: set the thread's detail message and return
 * a SIMSTORE_E* code in one expression; the corruption macro used by every
 * parser of on-disk bytes. */
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
