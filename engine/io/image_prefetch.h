/* Decoding ahead: images decoded on worker threads while the caller runs
 * the model on earlier ones.
 *
 * A batch spends its decode time (libjpeg/libpng, 5-30 ms an image) on the
 * thread that also drives the model unless decoding overlaps it. Here
 * `threads` workers decode a list of files in list order, at most `depth`
 * images ahead of the one the caller takes next (so at most `depth`
 * decoded images wait in memory: double buffering at depth 2), each with
 * image_load(). The caller takes them in increasing index order, each with
 * the status, pixels and error message image_load gave, exactly as if it
 * had called image_load itself at that point.
 *
 *   image_prefetch *pf;
 *   image_prefetch_start(&pf, paths, n, &params, &err);
 *   for (i = 0; i < n; i++) { st = image_prefetch_take(pf, i, &img, &secs, &err); ... }
 *   image_prefetch_stop(pf);
 *
 * paths[i] == NULL marks an entry not to decode (a skipped input); taking it
 * gives MR_OK and an empty image. An index the caller passes over (takes a
 * later one, or stops) is discarded: its image is freed. The worker threads
 * block SIGINT and SIGTERM, so the application's handlers run on its own
 * threads. Nothing here is global; any number of prefetchers may run. */
#ifndef MR_IMAGE_PREFETCH_H
#define MR_IMAGE_PREFETCH_H

#include "io/image.h"
#include "core/status.h"

typedef struct image_prefetch image_prefetch;

typedef struct {
    int threads;  /* decoder threads, 1..64                                      */
    int depth;    /* images decoded ahead of the next one taken, 1..256;
                     fewer than threads leaves threads idle                     */
    int max_side; /* image_load's limit (config input.max_image_side)             */
} image_prefetch_params;

/* Starts the workers on paths[0, count); the paths must outlive the
 * prefetcher. MR_ERR_RANGE for parameters outside the ranges above,
 * MR_ERR_OOM / MR_ERR_BACKEND when memory or threads cannot be had. */
mr_status image_prefetch_start(image_prefetch **out, const char *const *paths, int count,
                               const image_prefetch_params *p, mr_error *err);

/* Waits for image `index` (>= every index taken before, < count) and hands
 * it over: *img owns the pixels (image_free), *decode_seconds is the time
 * its decode took on its worker. Returns image_load's status; on failure
 * err holds image_load's message and *img is empty. MR_ERR_RANGE for an
 * index out of order. */
mr_status image_prefetch_take(image_prefetch *pf, int index, mr_image *img, double *decode_seconds, mr_error *err);

/* Stops the workers (an image being decoded is finished first), frees the
 * images not taken and the prefetcher. NULL is allowed. */
void image_prefetch_stop(image_prefetch *pf);

#endif
