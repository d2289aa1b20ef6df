/* The run queue (include/detect.h, "Several images in flight"): images
 * submitted from one thread, run by one worker per execution context,
 * collected in submission order.
 *
 * One mutex guards the ring of jobs. Submission s lives in jobs[s % depth];
 * a job's slot is free again once it was collected, and at most depth are
 * pending, so a slot is never reused early. Workers start jobs in
 * submission order (next_start); each run takes a free context of the
 * model (api_context_take), so the model's contexts, not the workers,
 * bound what runs at once. */
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { JOB_WAITING, JOB_RUNNING, JOB_DONE } job_state;

typedef struct {
    job_state state;
    const detect_image *img; /* the caller's image, or NULL for a file */
    char *path;              /* a submitted file (ours) */
    void *user;
    detect_status status;
    detect_result *result;
    char error[MR_ERROR_MSG_LEN]; /* the run's message on failure */
} queue_job;

struct detect_run_queue {
    detect_model *model;
    int depth;
    queue_job *jobs;
    long submitted, collected, next_start;
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job was submitted, or stop was set */
    pthread_cond_t done; /* a job finished */
    int stop;
    pthread_t workers[API_MAX_IN_FLIGHT];
    int started;
};

static void *worker_main(void *arg)
{
    detect_run_queue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->stop && q->next_start == q->submitted) pthread_cond_wait(&q->work, &q->lock);
        if (q->stop) break;
        queue_job *j = &q->jobs[q->next_start++ % q->depth];
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&q->lock);

        detect_result *res = NULL;
        detect_status st = j->path ? detect_run_file(q->model, j->path, &res) : detect_run_image(q->model, j->img, &res);

        pthread_mutex_lock(&q->lock);
        j->status = st;
        j->result = res;
        if (st != DETECT_OK) snprintf(j->error, sizeof j->error, "%s", detect_last_error());
        j->state = JOB_DONE;
        pthread_cond_broadcast(&q->done);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

detect_status detect_run_queue_start(detect_run_queue **out, detect_model *m, int depth)
{
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_run_queue_start: out is NULL");
    *out = NULL;
    if (!m) return api_failf(DETECT_ERR_ARGUMENT, "detect_run_queue_start: model is NULL");
    if (depth < 0 || depth > 1024)
        return api_failf(DETECT_ERR_RANGE, "run queue depth %d: expected 0 (twice the images in flight) to 1024",
                         depth);
    detect_run_queue *q = calloc(1, sizeof *q);
    if (!q) return api_failf(DETECT_ERR_OOM, "out of memory");
    q->model = m;
    q->depth = depth ? depth : 2 * m->contexts;
    q->jobs = calloc((size_t)q->depth, sizeof *q->jobs);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    if (!q->jobs) {
        detect_run_queue_stop(q);
        return api_failf(DETECT_ERR_OOM, "out of memory");
    }
    /* The workers inherit this mask for their whole life: a signal must
     * reach the caller's threads, never a worker inside the engine. */
    sigset_t held, saved;
    api_async_signals(&held);
    pthread_sigmask(SIG_BLOCK, &held, &saved);
    int rc = 0;
    while (q->started < m->contexts && (rc = pthread_create(&q->workers[q->started], NULL, worker_main, q)) == 0)
        q->started++;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (q->started == 0) {
        detect_run_queue_stop(q);
        return api_failf(DETECT_ERR_OOM, "run queue: cannot start a worker thread: %s", strerror(rc));
    }
    *out = q;
    return DETECT_OK;
}

int detect_run_queue_depth(const detect_run_queue *q)
{
    return q ? q->depth : 0;
}

int detect_run_queue_pending(const detect_run_queue *q)
{
    if (!q) return 0;
    detect_run_queue *w = (detect_run_queue *)q; /* the lock only: nothing visible changes */
    pthread_mutex_lock(&w->lock);
    int n = (int)(q->submitted - q->collected);
    pthread_mutex_unlock(&w->lock);
    return n;
}

static detect_status submit(detect_run_queue *q, const detect_image *img, const char *path, void *user)
{
    char *copy = path ? strdup(path) : NULL;
    if (path && !copy) return api_failf(DETECT_ERR_OOM, "out of memory");
    pthread_mutex_lock(&q->lock);
    if (q->submitted - q->collected >= q->depth) {
        pthread_mutex_unlock(&q->lock);
        free(copy);
        return api_failf(DETECT_ERR_RANGE, "run queue: %d images are pending, its depth: collect one first",
                         q->depth);
    }
    queue_job *j = &q->jobs[q->submitted++ % q->depth];
    memset(j, 0, sizeof *j);
    j->state = JOB_WAITING;
    j->img = img;
    j->path = copy;
    j->user = user;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->lock);
    return DETECT_OK;
}

detect_status detect_run_queue_submit(detect_run_queue *q, const detect_image *img, void *user)
{
    if (!q || !img) return api_failf(DETECT_ERR_ARGUMENT, "detect_run_queue_submit: %s is NULL", q ? "image" : "queue");
    return submit(q, img, NULL, user);
}

detect_status detect_run_queue_submit_file(detect_run_queue *q, const char *path, void *user)
{
    if (!q || !path)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_run_queue_submit_file: %s is NULL", q ? "path" : "queue");
    return submit(q, NULL, path, user);
}

detect_status detect_run_queue_collect(detect_run_queue *q, detect_result **out, void **user)
{
    if (!q || !out) return api_failf(DETECT_ERR_ARGUMENT, "detect_run_queue_collect: %s is NULL", q ? "out" : "queue");
    *out = NULL;
    if (user) *user = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->collected == q->submitted) {
        pthread_mutex_unlock(&q->lock);
        return api_failf(DETECT_ERR_ARGUMENT, "detect_run_queue_collect: no image is pending");
    }
    queue_job *j = &q->jobs[q->collected % q->depth];
    while (j->state != JOB_DONE) pthread_cond_wait(&q->done, &q->lock);
    q->collected++;
    pthread_mutex_unlock(&q->lock);
    /* the slot is ours until the next submit, which only this thread makes */
    detect_status st = j->status;
    *out = j->result;
    if (user) *user = j->user;
    free(j->path);
    j->path = NULL;
    if (st != DETECT_OK) return api_failf(st, "%s", j->error);
    return DETECT_OK;
}

void detect_run_queue_stop(detect_run_queue *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->lock);
    for (int i = 0; i < q->started; i++) pthread_join(q->workers[i], NULL);
    for (long s = q->collected; q->jobs && s < q->submitted; s++) {
        queue_job *j = &q->jobs[s % q->depth];
        detect_result_free(j->result); /* NULL for a job not run */
        free(j->path);
    }
    free(q->jobs);
    pthread_cond_destroy(&q->done);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->lock);
    free(q);
}
