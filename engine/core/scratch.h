/* Carving one caller-provided scratch block into typed arrays, 64-byte
 * aligned. The same walk with base == NULL only measures, so an op's
 * *_scratch_bytes() and its run can share one layout function:
 *
 *   mr_scratch sc = {base, 0};
 *   float *boxes = scratch_take(&sc, sizeof(float) * 4 * n);
 *   ...                          sc.used is the total size */
#ifndef MR_SCRATCH_H
#define MR_SCRATCH_H

#include <stddef.h>

typedef struct {
    char *base; /* NULL: measure only */
    size_t used;
} mr_scratch;

static inline void *scratch_take(mr_scratch *sc, size_t bytes)
{
    void *p = sc->base ? sc->base + sc->used : NULL;
    sc->used += (bytes + 63) & ~(size_t)63;
    return p;
}

#endif
