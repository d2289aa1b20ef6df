/* Per-image outputs on worker threads: see output_pool.h.
 *
 * A ring of `depth` slots under one mutex: job n (counted from 0 as added)
 * lives in slot n % depth; workers claim jobs in the order added, the main
 * thread takes them back in the same order, so a slot is free again once
 * its job was taken. */
#include "output_pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    void *job;
    int done, rc;
    cli_error err;
} pool_slot;

struct output_pool {
    output_write_fn write;
    int depth;
    pool_slot *slots;
    long added, claimed, taken;
    int stop;
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job was added, or stop was set */
    pthread_cond_t done; /* a job was written */
    pthread_t *workers;
    int started;
};

static void *worker_main(void *arg)
{
    output_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->claimed == p->added) pthread_cond_wait(&p->work, &p->lock);
        if (p->stop) break;
        pool_slot *s = &p->slots[p->claimed++ % p->depth];
        pthread_mutex_unlock(&p->lock);
        cli_error err = {0};
        int rc = p->write(s->job, &err);
        pthread_mutex_lock(&p->lock);
        s->rc = rc;
        s->err = err;
        s->done = 1;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int output_pool_start(output_pool **out, output_write_fn write, int threads, int depth, cli_error *err)
{
    *out = NULL;
    if (threads < 1 || threads > 64 || depth < 1) return cli_fail(err, "output pool: %d threads, depth %d", threads, depth);
    output_pool *p = calloc(1, sizeof *p);
    if (!p) return cli_fail(err, "out of memory");
    p->write = write;
    p->depth = depth;
    p->slots = calloc((size_t)depth, sizeof *p->slots);
    p->workers = calloc((size_t)threads, sizeof *p->workers);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    if (!p->slots || !p->workers) {
        output_pool_stop(p);
        return cli_fail(err, "out of memory");
    }
    /* Ctrl-C belongs to the main thread, which decides what to finish. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = 0;
    while (p->started < threads && (rc = pthread_create(&p->workers[p->started], NULL, worker_main, p)) == 0)
        p->started++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (p->started == 0) {
        output_pool_stop(p);
        return cli_fail(err, "output pool: cannot start a thread: %s", strerror(rc));
    }
    *out = p;
    return 0;
}

int output_pool_pending(const output_pool *p)
{
    output_pool *w = (output_pool *)p; /* the lock only */
    pthread_mutex_lock(&w->lock);
    int n = (int)(p->added - p->taken);
    pthread_mutex_unlock(&w->lock);
    return n;
}

int output_pool_depth(const output_pool *p)
{
    return p->depth;
}

void output_pool_add(output_pool *p, void *job)
{
    pthread_mutex_lock(&p->lock);
    pool_slot *s = &p->slots[p->added++ % p->depth];
    memset(s, 0, sizeof *s);
    s->job = job;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

void *output_pool_take(output_pool *p, int *rc, cli_error *err)
{
    pthread_mutex_lock(&p->lock);
    pool_slot *s = &p->slots[p->taken % p->depth];
    while (!s->done) pthread_cond_wait(&p->done, &p->lock);
    p->taken++;
    void *job = s->job;
    *rc = s->rc;
    if (s->rc != 0 && err) *err = s->err;
    pthread_mutex_unlock(&p->lock);
    return job;
}

void output_pool_stop(output_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p->slots);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
