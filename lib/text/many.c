/* many.c: documents in, fingerprints out, on N threads
 * (simstore_fingerprint_many): the texts are cut into chunks that the
 * library's ordered pool (lib/common/pool.c) fingerprints, each worker with a
 * fingerprinter of its own; every result goes to its document's index, so
 * the output is the same whatever the thread count. */
#include "simstore.h"
#include "simstore_unstable.h"

#include "common/error.h"

#include <stdlib.h>

#define CHUNK_DOCS 256

typedef struct chunk {
    size_t first, count;
    int rc;          /* the first failure in the chunk, or 0 */
    size_t rc_index; /* the document that failed */
} chunk;

typedef struct many {
    simstore_fingerprinter **fpr; /* one per worker */
    const char *const *texts;
    const size_t *lens;
    uint64_t *fps;
    unsigned *flags;
} many;

static void fingerprint_chunk(void *ctx, void *item, unsigned worker)
{
    many *m = (many *)ctx;
    chunk *c = (chunk *)item;
    c->rc = SIMSTORE_OK;
    for (size_t i = c->first; i < c->first + c->count; i++) {
        unsigned f = 0;
        int rc = simstore_fingerprint_text(m->fpr[worker], m->texts[i], m->lens[i], &m->fps[i], &f);
        if (m->flags)
            m->flags[i] = f;
        if (rc && c->rc == SIMSTORE_OK) {
            c->rc = rc;
            c->rc_index = i;
        }
    }
}

int simstore_fingerprint_many(const simstore_text_options *o, unsigned threads,
                              const char *const *texts, const size_t *lens, size_t n, uint64_t *fps,
                              unsigned *flags)
{
    if (SIMS_CHECK_OPTIONS(o, simstore_text_options))
        return SIMSTORE_EINVAL;
    if (n == 0)
        return SIMSTORE_OK;
    if (!texts || !lens || !fps)
        return sims_fail(SIMSTORE_EINVAL, "fingerprint_many: texts, lens and fps are needed");
    size_t nchunks = (n + CHUNK_DOCS - 1) / CHUNK_DOCS;
    if (threads == 0)
        threads = simstore_default_threads();
    if ((size_t)threads > nchunks)
        threads = (unsigned)nchunks;
    /* Two chunks a thread keep every worker busy; chunk descriptors are
     * reused in a ring of max + 1. */
    unsigned max = 2 * threads + 2;
    many m = {NULL, texts, lens, fps, flags};
    chunk *ring = calloc(max + 1, sizeof *ring);
    m.fpr = calloc(threads, sizeof *m.fpr);
    simstore_ordered *pool = NULL;
    int rc = SIMSTORE_OK;
    size_t fail_index = n;
    if (!ring || !m.fpr) {
        rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
        goto out;
    }
    for (unsigned i = 0; i < threads && rc == SIMSTORE_OK; i++)
        rc = simstore_fingerprinter_new(o, &m.fpr[i]);
    if (rc)
        goto out;
    rc = simstore_ordered_new(threads, max, fingerprint_chunk, &m, &pool);
    if (rc)
        goto out;
    int first_rc = SIMSTORE_OK;
    size_t submitted = 0, taken = 0;
    int finished = 0;
    void *item;
    while (taken < nchunks) {
        /* Submit while that cannot block: next() releases the chunk it
         * returned last only on its following call, so keep one spare. */
        if (submitted < nchunks && submitted - taken + 1 < max) {
            chunk *c = &ring[submitted % (max + 1)];
            c->first = submitted * CHUNK_DOCS;
            c->count = n - c->first < CHUNK_DOCS ? n - c->first : CHUNK_DOCS;
            rc = simstore_ordered_submit(pool, c);
            if (rc)
                goto out;
            submitted++;
            continue;
        }
        if (submitted == nchunks && !finished) {
            simstore_ordered_finish(pool);
            finished = 1;
        }
        if (!simstore_ordered_next(pool, &item))
            break;
        chunk *c = (chunk *)item;
        if (c->rc && first_rc == SIMSTORE_OK) {
            first_rc = c->rc;
            fail_index = c->rc_index;
        }
        taken++;
    }
    if (taken < nchunks && rc == SIMSTORE_OK)
        rc = sims_fail(SIMSTORE_EIO, "fingerprint_many: the pool stopped early");
    if (rc == SIMSTORE_OK && first_rc != SIMSTORE_OK)
        rc = sims_fail(first_rc, "document %zu could not be fingerprinted", fail_index);
out:
    simstore_ordered_free(pool);
    for (unsigned i = 0; m.fpr && i < threads; i++)
        simstore_fingerprinter_free(m.fpr[i]);
    free(m.fpr);
    free(ring);
    return rc;
}
