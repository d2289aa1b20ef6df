/* A dense float32 tensor. Activations are NHWC: element (n, y, x, ch) sits at
 * ((n*h + y)*w + x)*c + ch. oneDNN's fastest CPU convolutions and tensor-core
 * GPU convolutions both work in NHWC, so the whole network stays in it and
 * nothing is reordered between layers. A 2-D array (boxes [N,4], logits
 * [N,K]) is a tensor with h = w = 1 and c = row length. `data` belongs to the
 * backend that made it (host memory for the CPU backend). */
#ifndef MR_TENSOR_H
#define MR_TENSOR_H

#include <stddef.h>

typedef struct {
    float *data;
    int n, h, w, c;
    size_t cap; /* elements allocated at data; n*h*w*c never exceeds it */
} mr_tensor;

static inline size_t mr_tensor_numel(const mr_tensor *t)
{
    return (size_t)t->n * (size_t)t->h * (size_t)t->w * (size_t)t->c;
}

static inline mr_tensor mr_tensor_make(float *data, int n, int h, int w, int c)
{
    mr_tensor t = {data, n, h, w, c, (size_t)n * (size_t)h * (size_t)w * (size_t)c};
    return t;
}

#endif
