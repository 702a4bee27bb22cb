/* pool.c: the library's thread pool: ordered parallel work (simstore_ordered,
 * simstore.h), and the one rule for the default thread count.
 *
 * Items sit in a ring of max_in_flight entries, indexed by their submission
 * number; each entry goes READY -> WORKING -> DONE and leaves the ring when
 * the consumer releases it (its next call of simstore_ordered_next). Workers
 * claim items in submission order, so work starts in order, and the consumer
 * takes them back strictly in order, whatever order they finish in. */
#include "simstore.h"
#include "simstore_unstable.h"

#include "common/error.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define POOL_MAX_THREADS 256u
#define POOL_MAX_IN_FLIGHT 65536u

unsigned simstore_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > (long)POOL_MAX_THREADS ? POOL_MAX_THREADS : (unsigned)n;
}

enum entry_state { ENTRY_READY = 1, ENTRY_WORKING, ENTRY_DONE };

typedef struct pool_entry {
    void *item;
    int state;
} pool_entry;

typedef struct pool_worker {
    simstore_ordered *pool;
    unsigned index;
} pool_worker;

struct simstore_ordered {
    pthread_mutex_t mu;
    pthread_cond_t space; /* an item left the ring (producer) */
    pthread_cond_t work;  /* an item was submitted (workers) */
    pthread_cond_t done;  /* an item is processed (consumer) */
    simstore_work_fn fn;
    void *ctx;
    pool_entry *ring;
    unsigned max_in_flight;
    uint64_t submitted; /* items submitted */
    uint64_t claimed;   /* items a worker has started */
    uint64_t taken;     /* items given back by next() */
    uint64_t released;  /* items out of the ring */
    int held;           /* next() returned an item not yet released */
    int finished, stopped;
    pthread_t *threads;
    pool_worker *workers;
    unsigned nthreads;
};

static void *worker_main(void *arg)
{
    pool_worker *w = (pool_worker *)arg;
    simstore_ordered *p = w->pool;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->stopped)
            break;
        if (p->claimed < p->submitted) {
            pool_entry *e = &p->ring[p->claimed % p->max_in_flight];
            p->claimed++;
            e->state = ENTRY_WORKING;
            pthread_mutex_unlock(&p->mu);
            p->fn(p->ctx, e->item, w->index);
            pthread_mutex_lock(&p->mu);
            e->state = ENTRY_DONE;
            pthread_cond_broadcast(&p->done);
            continue;
        }
        if (p->finished)
            break;
        pthread_cond_wait(&p->work, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int simstore_ordered_new(unsigned threads, unsigned max_in_flight, simstore_work_fn fn, void *ctx,
                         simstore_ordered **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "ordered pool: out is NULL");
    *out = NULL;
    if (!fn)
        return sims_fail(SIMSTORE_EINVAL, "ordered pool: no work function");
    if (threads == 0)
        threads = simstore_default_threads();
    if (threads > POOL_MAX_THREADS)
        return sims_fail(SIMSTORE_EINVAL, "ordered pool: %u threads (at most %u)", threads,
                         POOL_MAX_THREADS);
    if (max_in_flight < 1 || max_in_flight > POOL_MAX_IN_FLIGHT)
        return sims_fail(SIMSTORE_EINVAL, "ordered pool: %u items in flight (1 to %u)",
                         max_in_flight, POOL_MAX_IN_FLIGHT);
    simstore_ordered *p = calloc(1, sizeof *p);
    if (!p)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a thread pool");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->space, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->fn = fn;
    p->ctx = ctx;
    p->max_in_flight = max_in_flight;
    p->ring = calloc(max_in_flight, sizeof *p->ring);
    p->threads = calloc(threads, sizeof *p->threads);
    p->workers = calloc(threads, sizeof *p->workers);
    if (!p->ring || !p->threads || !p->workers) {
        simstore_ordered_free(p);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a thread pool");
    }
    for (unsigned i = 0; i < threads; i++) {
        p->workers[p->nthreads] = (pool_worker){p, p->nthreads};
        if (pthread_create(&p->threads[p->nthreads], NULL, worker_main, &p->workers[p->nthreads]) !=
            0)
            break;
        p->nthreads++;
    }
    if (p->nthreads == 0) {
        simstore_ordered_free(p);
        return sims_fail(SIMSTORE_EIO, "cannot start a thread");
    }
    *out = p;
    return SIMSTORE_OK;
}

unsigned simstore_ordered_threads(const simstore_ordered *p)
{
    return p->nthreads;
}

int simstore_ordered_submit(simstore_ordered *p, void *item)
{
    pthread_mutex_lock(&p->mu);
    while (!p->stopped && !p->finished && p->submitted - p->released == p->max_in_flight)
        pthread_cond_wait(&p->space, &p->mu);
    int rc = SIMSTORE_OK;
    if (p->stopped || p->finished) {
        rc = sims_fail(SIMSTORE_EINVAL, "ordered pool: submit after finish or stop");
    } else {
        pool_entry *e = &p->ring[p->submitted % p->max_in_flight];
        e->item = item;
        e->state = ENTRY_READY;
        p->submitted++;
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void simstore_ordered_finish(simstore_ordered *p)
{
    pthread_mutex_lock(&p->mu);
    p->finished = 1;
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
}

int simstore_ordered_next(simstore_ordered *p, void **item)
{
    pthread_mutex_lock(&p->mu);
    if (p->held) {
        p->held = 0;
        p->released++;
        pthread_cond_broadcast(&p->space);
    }
    for (;;) {
        if (p->stopped)
            break;
        if (p->taken < p->submitted && p->ring[p->taken % p->max_in_flight].state == ENTRY_DONE) {
            *item = p->ring[p->taken % p->max_in_flight].item;
            p->taken++;
            p->held = 1;
            pthread_mutex_unlock(&p->mu);
            return 1;
        }
        if (p->finished && p->taken == p->submitted)
            break;
        pthread_cond_wait(&p->done, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    *item = NULL;
    return 0;
}

void simstore_ordered_stop(simstore_ordered *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopped = 1;
    pthread_cond_broadcast(&p->space);
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
}

void simstore_ordered_free(simstore_ordered *p)
{
    if (!p)
        return;
    simstore_ordered_stop(p);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->workers);
    free(p->ring);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->space);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p);
}
