/* test_pool.c: the ordered thread pool (simstore_ordered, lib/common/pool.c):
 * items come back in submission order whatever order they finish in, each is
 * processed exactly once, never more than max_in_flight are in flight (a
 * producer cycling through max_in_flight + 1 buffers never refills one in
 * use), and stop, finish and the argument checks behave as documented. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "simstore_unstable.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
    uint64_t seq;    /* what the producer put in */
    uint64_t result; /* what the worker computed */
    int processed;   /* times processed */
    int in_use;      /* set by the producer, cleared by the consumer */
    unsigned delay_us;
} job;

static void work(void *ctx, void *item, unsigned worker)
{
    (void)ctx;
    job *j = (job *)item;
    assert_true(j->in_use);
    (void)worker;
    if (j->delay_us) {
        struct timespec ts = {0, (long)j->delay_us * 1000};
        nanosleep(&ts, NULL);
    }
    j->result = j->seq * 0x9E3779B97F4A7C15ULL;
    j->processed++;
}

typedef struct producer {
    simstore_ordered *pool;
    job *ring;
    unsigned nring;
    uint64_t count;
    int reused_in_use; /* a buffer was refilled while in use */
} producer;

static void *produce(void *arg)
{
    producer *p = (producer *)arg;
    for (uint64_t i = 0; i < p->count; i++) {
        job *j = &p->ring[i % p->nring];
        if (__atomic_load_n(&j->in_use, __ATOMIC_SEQ_CST))
            p->reused_in_use = 1;
        j->seq = i;
        j->processed = 0;
        /* Uneven work, so later items often finish first. */
        j->delay_us = (unsigned)((i * 7919) % 5 == 0 ? 300 : (i % 3) * 20);
        __atomic_store_n(&j->in_use, 1, __ATOMIC_SEQ_CST);
        if (simstore_ordered_submit(p->pool, j) != SIMSTORE_OK)
            break;
    }
    simstore_ordered_finish(p->pool);
    return NULL;
}

static void run(unsigned threads, unsigned max_in_flight, uint64_t count)
{
    simstore_ordered *pool;
    assert_int_equal(simstore_ordered_new(threads, max_in_flight, work, NULL, &pool), SIMSTORE_OK);
    producer p = {pool, calloc(max_in_flight + 1, sizeof(job)), max_in_flight + 1, count, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, produce, &p), 0);
    uint64_t expect = 0;
    void *item;
    while (simstore_ordered_next(pool, &item)) {
        job *j = (job *)item;
        if (j->seq != expect)
            fail_msg("threads %u, in flight %u: got item %llu, expected %llu", threads,
                     max_in_flight, (unsigned long long)j->seq, (unsigned long long)expect);
        assert_int_equal(j->processed, 1);
        assert_true(j->result == j->seq * 0x9E3779B97F4A7C15ULL);
        __atomic_store_n(&j->in_use, 0, __ATOMIC_SEQ_CST);
        expect++;
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(expect == count);
    assert_false(p.reused_in_use);
    simstore_ordered_free(pool);
    free(p.ring);
}

static void test_pool_ordered__in_order_bounded(void **state)
{
    (void)state;
    static const unsigned threads[] = {1, 2, 3, 8};
    static const unsigned flight[] = {1, 2, 5, 17};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            run(threads[a], flight[b], 300);
}

static void test_pool_ordered__empty_and_default_threads(void **state)
{
    (void)state;
    simstore_ordered *pool;
    assert_int_equal(simstore_ordered_new(0, 4, work, NULL, &pool), SIMSTORE_OK);
    assert_int_equal(simstore_ordered_threads(pool), simstore_default_threads());
    assert_true(simstore_default_threads() >= 1);
    simstore_ordered_finish(pool);
    void *item = &item;
    assert_int_equal(simstore_ordered_next(pool, &item), 0);
    assert_null(item);
    job j = {0};
    j.in_use = 1;
    assert_int_equal(simstore_ordered_submit(pool, &j), SIMSTORE_EINVAL);
    assert_int_equal(j.processed, 0);
    simstore_ordered_free(pool);
    simstore_ordered_free(NULL);
}

static void test_pool_ordered__stop_releases_everyone(void **state)
{
    (void)state;
    simstore_ordered *pool;
    assert_int_equal(simstore_ordered_new(2, 2, work, NULL, &pool), SIMSTORE_OK);
    producer p = {pool, calloc(3, sizeof(job)), 3, 1000000, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, produce, &p), 0);
    void *item;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(simstore_ordered_next(pool, &item), 1);
        __atomic_store_n(&((job *)item)->in_use, 0, __ATOMIC_SEQ_CST);
    }
    /* The producer is blocked in submit or about to be: stop frees it. */
    simstore_ordered_stop(pool);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(simstore_ordered_next(pool, &item), 0);
    simstore_ordered_free(pool);
    free(p.ring);
}

static void test_pool_ordered__bad_arguments(void **state)
{
    (void)state;
    simstore_ordered *pool = (simstore_ordered *)&pool;
    assert_int_equal(simstore_ordered_new(1, 1, NULL, NULL, &pool), SIMSTORE_EINVAL);
    assert_null(pool);
    assert_int_equal(simstore_ordered_new(1, 0, work, NULL, &pool), SIMSTORE_EINVAL);
    assert_int_equal(simstore_ordered_new(1, 65537, work, NULL, &pool), SIMSTORE_EINVAL);
    assert_int_equal(simstore_ordered_new(257, 1, work, NULL, &pool), SIMSTORE_EINVAL);
    assert_int_equal(simstore_ordered_new(1, 1, work, NULL, NULL), SIMSTORE_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_ordered__in_order_bounded),
        cmocka_unit_test(test_pool_ordered__empty_and_default_threads),
        cmocka_unit_test(test_pool_ordered__stop_releases_everyone),
        cmocka_unit_test(test_pool_ordered__bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
