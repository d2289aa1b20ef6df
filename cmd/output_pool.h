/* Per-image outputs written on worker threads and finished in input order.
 *
 * With several images in flight (--in-flight) the model returns results
 * faster than one thread can draw, encode and write each image's files
 * (a 640x480 PNG takes milliseconds). The pool runs each job's `write` on a
 * worker; the main thread takes the jobs back oldest first, so everything
 * that must keep the inputs' order (--json and --coco-results entries,
 * stdout, progress) is done there, after the job's files. */
#ifndef DETECT_OUTPUT_POOL_H
#define DETECT_OUTPUT_POOL_H

#include "cli_error.h"

typedef struct output_pool output_pool;

/* A job's work on a worker thread: 0, or -1 with err set. */
typedef int (*output_write_fn)(void *job, cli_error *err);

/* threads: 1..64 workers; depth: the most jobs added and not yet taken. */
int output_pool_start(output_pool **out, output_write_fn write, int threads, int depth, cli_error *err);
/* Jobs added and not yet taken back. */
int output_pool_pending(const output_pool *p);
int output_pool_depth(const output_pool *p);
/* Queues job (the caller's until taken back); the pool must have room
 * (pending < depth). */
void output_pool_add(output_pool *p, void *job);
/* Waits for the oldest job's write and gives it back with its outcome
 * (*rc 0, or -1 and *err). */
void *output_pool_take(output_pool *p, int *rc, cli_error *err);
/* Waits for the jobs being written, drops the rest; the caller still owns
 * every job it added and did not take. */
void output_pool_stop(output_pool *p);

#endif
