/* What the public objects of include/detect.h hold, shared by the files of
 * engine/api/ (and nothing else: other programs see only the opaque names).
 *
 *   api.c         errors, versions, options, opening a model, its facts
 *   api_image.c   decoding, pixels in, PNG out, the decode-ahead queue
 *   api_result.c  running the model, results, JSON/RLE, drawing, documents
 *   api_calibrate.c  int8 calibration: activation ranges beside the weights
 *   api_queue.c   the run queue: several images in flight from one thread */
#ifndef MR_API_INTERNAL_H
#define MR_API_INTERNAL_H

#include <pthread.h>
#include <signal.h>

#include "detect.h"

#include "backend/backend.h"
#include "core/config.h"
#include "core/status.h"
#include "io/image.h"
#include "model/model.h"

struct detect_options {
    char device[32];     /* "auto", "cpu", "cuda", "cuda:N" */
    char precision[8];   /* "" (the device's best), "fp32", "tf32", "fp16", "bf16", "int8" */
    int threads;         /* 0: every core */
    double score_thresh; /* < 0: the config's */
    int max_dets;        /* <= 0: the config's */
    char *classes;       /* comma-separated names; NULL: all */
    int fold;            /* 0: batchnorm as a separate pass (GPU) */
    int agnostic_nms;    /* 1 on, 0 off, -1: the config's */
    int in_flight;       /* 0: the device's default (1 on the CPU; on a GPU what its memory holds, at most 4) */
    int canvas_h, canvas_w; /* -1: the config's input.canvas_h, canvas_w; 0: none */
};

/* The most images one model runs at once (detect_options_set_in_flight). */
#define API_MAX_IN_FLIGHT 16
#define API_MAX_SIZES_SEEN 4096
#define API_WARM_SIZES 64

/* One execution context: a backend with the model's layers prepared and
 * its activations planned in it. A run holds one context for the whole
 * forward pass; contexts share nothing, so runs on different contexts go
 * on at once (on a GPU each has its own stream, graphs and memory). */
typedef struct {
    mr_backend be;
    mr_model *model;
    int threads;        /* CPU: the OpenMP threads its runs use (0: the backend's own setting) */
    int busy;           /* a run holds it (detect_model.lock) */
    /* The padded input sizes it ran last (h << 32 | w; a ring): on a GPU a
     * context replays a size's graph only after running it twice, so a
     * run prefers a free context that ran its size (api_context_take). */
    uint64_t warm[API_WARM_SIZES];
    int warm_next;
    size_t device_bytes; /* device memory it took at open (0 on the CPU) */
} api_context;

struct detect_model {
    mr_config cfg;
    api_context ctx[API_MAX_IN_FLIGHT];
    int contexts;              /* ctx[0 .. contexts) are open */
    pthread_mutex_t lock;      /* guards the contexts' busy flags */
    pthread_cond_t ctx_freed;  /* a context became free */
    unsigned char *keep_class; /* per class id, 1 = reported; NULL: all */
    char device[32];
    char precision[8];        /* as asked ("" the device's best) */
    char weights_path[1024];  /* where int8 ranges live beside */
    int calibrating;          /* a detect_calibration observes ctx[0] */
    /* The padded input sizes met (h << 32 | w), for detect_model_sizes_seen;
     * past API_MAX_SIZES_SEEN new ones are only counted as more. */
    uint64_t sizes_seen[API_MAX_SIZES_SEEN];
    int sizes_count;
    char notice[2 * MR_ERROR_MSG_LEN];
};

/* Takes a free context for one run (waiting while all are busy), and gives
 * it back (api.c). */
/* The padded network input size of an in_h x in_w image, as one key
 * (h << 32 | w; 0 for an image the geometry refuses). */
uint64_t api_size_key(const detect_model *m, int in_h, int in_w);
/* key: the image's api_size_key, for the affinity (0: none). */
api_context *api_context_take(detect_model *m, uint64_t key);
/* ran_key: the key of the image c's model has just run, noted among the
 * sizes seen and c's warm sizes; 0 when it ran none (or failed). */
void api_context_give_back(detect_model *m, api_context *c, uint64_t ran_key);

struct detect_image {
    mr_image img;
};

struct detect_result {
    mr_result res;
    mr_stage_times times;
};

/* Asynchronous signals (Ctrl-C, kill, timers, SIGCHLD, ...) are held on the
 * calling thread while the engine computes, and delivered when the call
 * returns. oneDNN's JIT GEMM kernels before 3.11 point the stack pointer
 * into the heap while they run (oneDNN issue 4845, fixed by PR 4855), so
 * the frame the kernel pushes for a caught signal's handler overwrites
 * heap memory: `detect` interrupted during sgemm died of heap corruption
 * about one Ctrl-C in ten (bench/NOTES.md section 21). SIGPROF is held
 * too: a sampling profiler's tick does the same damage, so such a
 * profiler sees the engine's time at the call's return (perf, which uses
 * no signals, sees it all). Synchronous faults (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGTRAP, SIGSYS) and SIGABRT are never held. OpenMP's workers started inside a held call
 * keep the mask; api_hold_signals_in_workers masks those started before. */
void api_async_signals(sigset_t *set); /* the set held */
void api_hold_signals(sigset_t *saved);
void api_release_signals(const sigset_t *saved);
void api_hold_signals_in_workers(void);

/* Records err's message as this thread's last error and returns its status
 * as the public one. */
detect_status api_fail(const mr_error *err);
/* The same for a message made here. */
detect_status api_failf(detect_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The public status of an internal one. */
detect_status api_status(mr_status st);

#endif
