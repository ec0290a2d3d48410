/* tmm_parallel_for (parallel.h): workers take the next item from a shared
 * counter; the first failure's status and message are kept under a lock. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "analysis/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct pool {
    uint32_t count;
    tmm_status (*fn)(void *ctx, uint32_t i);
    void *ctx;
    atomic_uint next;
    atomic_bool failed;
    pthread_mutex_t lock;
    tmm_status status;  /* the first failure, under lock */
    char message[1024];
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    tmm_status s = TMM_OK;
    while (s == TMM_OK && !atomic_load(&p->failed)) {
        const uint32_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->count)
            break;
        s = p->fn(p->ctx, i);
    }
    if (s != TMM_OK) {
        pthread_mutex_lock(&p->lock);
        if (!atomic_exchange(&p->failed, true)) {
            p->status = s;
            snprintf(p->message, sizeof p->message, "%s", tmm_last_error());
        }
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

tmm_status tmm_parallel_for(uint32_t count, uint32_t jobs, tmm_status (*fn)(void *ctx, uint32_t i), void *ctx)
{
    long n = jobs ? (long)jobs : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > (long)count ? (long)(count ? count : 1) : n;
    pool p = { .count = count, .fn = fn, .ctx = ctx, .status = TMM_OK };
    atomic_init(&p.next, 0);
    atomic_init(&p.failed, false);
    pthread_mutex_init(&p.lock, NULL);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    uint32_t started = 0;
    for (; threads && started + 1 < (uint32_t)n; started++) /* this thread is the last worker */
        if (pthread_create(&threads[started], NULL, worker, &p) != 0)
            break;
    worker(&p);
    for (uint32_t t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
    free(threads);
    pthread_mutex_destroy(&p.lock);
    return p.status == TMM_OK ? TMM_OK : tmm_fail(p.status, "%s", p.message);
}
