/* Decoding ahead on worker threads: see image_prefetch.h.
 *
 * One mutex guards everything but the decoding itself. Index i lives in
 * slot i % depth. The workers claim indices in order (`next_claim`) and
 * only below `taken + depth`, where `taken` is the first index the caller
 * has not yet taken or passed over; so index i's slot is free again by the
 * time i + depth can be claimed, and no more than depth images wait. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "io/image_prefetch.h"
#include "core/clock.h"

typedef enum { SLOT_EMPTY, SLOT_DECODING, SLOT_DONE } slot_state;

typedef struct {
    slot_state state;
    int index;
    mr_status status;
    mr_image img;
    double seconds;
    mr_error err;
} prefetch_slot;

struct image_prefetch {
    const char *const *paths;
    int count, depth, max_side;
    pthread_mutex_t lock;
    pthread_cond_t done;  /* a slot became SLOT_DONE: the caller may go on */
    pthread_cond_t space; /* taken moved or stop was set: a worker may claim */
    int next_claim, taken, stop;
    prefetch_slot *slots;
    pthread_t *workers;
    int started; /* workers running */
};

static void *worker_main(void *arg)
{
    image_prefetch *pf = arg;
    pthread_mutex_lock(&pf->lock);
    for (;;) {
        while (!pf->stop && pf->next_claim < pf->count && pf->next_claim >= pf->taken + pf->depth)
            pthread_cond_wait(&pf->space, &pf->lock);
        if (pf->stop || pf->next_claim >= pf->count) break;
        int i = pf->next_claim++;
        prefetch_slot *s = &pf->slots[i % pf->depth];
        memset(s, 0, sizeof *s);
        s->index = i;
        s->state = SLOT_DECODING;
        pthread_mutex_unlock(&pf->lock);

        double t0 = mr_seconds();
        mr_image img = {0};
        mr_error err = {0};
        mr_status st = pf->paths[i] ? image_load(pf->paths[i], pf->max_side, &img, &err) : MR_OK;
        double seconds = mr_seconds() - t0;

        pthread_mutex_lock(&pf->lock);
        s->status = st;
        s->img = img;
        s->err = err;
        s->seconds = seconds;
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&pf->done);
    }
    pthread_mutex_unlock(&pf->lock);
    return NULL;
}

/* Waits (lock held) until index i, claimed already, is decoded. */
static prefetch_slot *wait_done(image_prefetch *pf, int i)
{
    prefetch_slot *s = &pf->slots[i % pf->depth];
    while (!(s->state == SLOT_DONE && s->index == i)) pthread_cond_wait(&pf->done, &pf->lock);
    return s;
}

mr_status image_prefetch_start(image_prefetch **out, const char *const *paths, int count,
                               const image_prefetch_params *p, mr_error *err)
{
    *out = NULL;
    if (count < 0 || p->threads < 1 || p->threads > 64 || p->depth < 1 || p->depth > 256)
        return mr_fail(err, MR_ERR_RANGE, "image prefetch: %d images, %d threads, depth %d: out of range", count,
                       p->threads, p->depth);
    image_prefetch *pf = calloc(1, sizeof *pf);
    if (!pf) return mr_fail(err, MR_ERR_OOM, "image prefetch: out of memory");
    pf->paths = paths;
    pf->count = count;
    pf->depth = p->depth;
    pf->max_side = p->max_side;
    pthread_mutex_init(&pf->lock, NULL);
    pthread_cond_init(&pf->done, NULL);
    pthread_cond_init(&pf->space, NULL);
    pf->slots = calloc((size_t)p->depth, sizeof *pf->slots);
    pf->workers = calloc((size_t)p->threads, sizeof *pf->workers);
    if (!pf->slots || !pf->workers) {
        image_prefetch_stop(pf);
        return mr_fail(err, MR_ERR_OOM, "image prefetch: out of memory");
    }
    /* The workers inherit this mask: Ctrl-C must reach the caller's
     * handler on its own thread, not interrupt a decoder. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = 0;
    while (pf->started < p->threads && (rc = pthread_create(&pf->workers[pf->started], NULL, worker_main, pf)) == 0)
        pf->started++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pf->started == 0) {
        image_prefetch_stop(pf);
        return mr_fail(err, MR_ERR_BACKEND, "image prefetch: cannot start a decoder thread: %s", strerror(rc));
    }
    *out = pf; /* fewer threads than asked (rc != 0) still decode everything */
    return MR_OK;
}

mr_status image_prefetch_take(image_prefetch *pf, int index, mr_image *img, double *decode_seconds, mr_error *err)
{
    memset(img, 0, sizeof *img);
    *decode_seconds = 0;
    pthread_mutex_lock(&pf->lock);
    if (index < pf->taken || index >= pf->count) {
        int taken = pf->taken;
        pthread_mutex_unlock(&pf->lock);
        return mr_fail(err, MR_ERR_RANGE, "image prefetch: image %d taken after %d (of %d)", index, taken - 1,
                       pf->count);
    }
    /* Passed-over indices: free what was decoded; never claim the rest. */
    for (int i = pf->taken; i < index; i++) {
        if (i >= pf->next_claim) break;
        prefetch_slot *s = wait_done(pf, i);
        image_free(&s->img);
        s->state = SLOT_EMPTY;
    }
    if (pf->next_claim < index) pf->next_claim = index;
    pf->taken = index; /* index itself is claimable now */
    pthread_cond_broadcast(&pf->space);
    prefetch_slot *s = wait_done(pf, index);
    mr_status st = s->status;
    *img = s->img;
    *decode_seconds = s->seconds;
    if (st != MR_OK && err) *err = s->err;
    memset(s, 0, sizeof *s);
    pf->taken = index + 1;
    pthread_cond_broadcast(&pf->space);
    pthread_mutex_unlock(&pf->lock);
    return st;
}

void image_prefetch_stop(image_prefetch *pf)
{
    if (!pf) return;
    if (pf->started) {
        pthread_mutex_lock(&pf->lock);
        pf->stop = 1;
        pthread_cond_broadcast(&pf->space);
        pthread_mutex_unlock(&pf->lock);
        for (int t = 0; t < pf->started; t++) pthread_join(pf->workers[t], NULL);
    }
    pthread_mutex_destroy(&pf->lock);
    pthread_cond_destroy(&pf->done);
    pthread_cond_destroy(&pf->space);
    for (int i = 0; pf->slots && i < pf->depth; i++) image_free(&pf->slots[i].img);
    free(pf->slots);
    free(pf->workers);
    free(pf);
}
