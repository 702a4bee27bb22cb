/* simstore.h: the public API of simstore, a compressed on-disk store of 64-bit
 * simhash fingerprints answering exact Hamming-distance-k queries.
 *
 * This is the only header users (and the simstore command) include.
 *
 * Conventions
 *  - Every function that can fail returns int: SIMSTORE_OK (0) or one of the
 *    negative SIMSTORE_E* codes below. simstore_strerror() names a code;
 *    simstore_last_error() gives the detail of the last failure in the calling
 *    thread (what went wrong and where: file, line, block, byte offset).
 *  - Objects the caller owns are returned through an out-parameter and have one
 *    free/close function that accepts NULL.
 *  - Borrowed pointers state how long they stay valid.
 */
#ifndef SIMSTORE_H
#define SIMSTORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ------------------------------------------------------------ */

#define SIMSTORE_VERSION_MAJOR 0
#define SIMSTORE_VERSION_MINOR 1
#define SIMSTORE_VERSION_PATCH 0
#define SIMSTORE_VERSION_NUMBER \
    (SIMSTORE_VERSION_MAJOR * 10000 + SIMSTORE_VERSION_MINOR * 100 + SIMSTORE_VERSION_PATCH)
#define SIMSTORE_VERSION_STRING "0.1.0"

/* The library's version, as SIMSTORE_VERSION_NUMBER was when it was built. */
unsigned simstore_version_number(void);
/* The library's version as "MAJOR.MINOR.PATCH"; a static string. */
const char *simstore_version_string(void);

/* ---- Error codes --------------------------------------------------------- */

#define SIMSTORE_OK 0
#define SIMSTORE_ENOTFOUND (-1)  /* no such store, file, document or entry     */
#define SIMSTORE_ECORRUPT (-2)   /* data on disk fails a check: checksum, bound */
#define SIMSTORE_EVERSION (-3)   /* on-disk format version this build can't read */
#define SIMSTORE_ENOMEM (-4)     /* out of memory                               */
#define SIMSTORE_EIO (-5)        /* an operating-system I/O call failed         */
#define SIMSTORE_EFULL (-6)      /* a fixed limit was reached (map size, count) */
#define SIMSTORE_EINVAL (-7)     /* invalid argument or malformed input         */
#define SIMSTORE_EBUSY (-8)      /* another writer holds the store              */
#define SIMSTORE_ERANGE (-9)     /* k larger than the store's design allows     */
#define SIMSTORE_EEXIST (-10)    /* the target already exists                   */
#define SIMSTORE_EREADONLY (-11) /* write attempted on a read-only handle       */

/* A short static description of an error code ("corrupt data", ...). */
const char *simstore_strerror(int err);

/* The detail message of the most recent failure in the calling thread, or ""
 * when none. Valid until the next simstore call in the same thread. */
const char *simstore_last_error(void);

/* ---- Fingerprints -------------------------------------------------------- */

/* Hamming distance between two fingerprints (0..64). */
static inline unsigned simstore_distance(uint64_t a, uint64_t b)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_popcountll(a ^ b);
#else
    uint64_t x = a ^ b;
    unsigned n = 0;
    while (x) {
        x &= x - 1;
        n++;
    }
    return n;
#endif
}

#ifdef __cplusplus
}
#endif

#endif /* SIMSTORE_H */
