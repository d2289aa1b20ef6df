/* A dense tensor, float32 unless a backend asks for fp16 features (below).
 * Activations are NHWC: element (n, y, x, ch) sits at
 * ((n*h + y)*w + x)*c + ch. oneDNN's fastest CPU convolutions and tensor-core
 * GPU convolutions both work in NHWC, so the whole network stays in it and
 * nothing is reordered between layers. A 2-D array (boxes [N,4], logits
 * [N,K]) is a tensor with h = w = 1 and c = row length. `data` belongs to the
 * backend that made it (host memory for the CPU backend). */
#ifndef MR_TENSOR_H
#define MR_TENSOR_H

#include <stddef.h>

/* What `data` holds. MR_ELEM_F16 (IEEE binary16) only where a backend's
 * feature_dtype asks for it (the CUDA backend's --precision fp16), and only
 * for the feature maps between layers (backend.h says which); boxes,
 * scores, logits and masks are always MR_ELEM_F32. `data` keeps its float type
 * so that the CPU code, which never sees MR_ELEM_F16, reads as before. */
typedef enum { MR_ELEM_F32 = 0, MR_ELEM_F16 = 1 } mr_elem_type;

static inline size_t mr_elem_size(mr_elem_type t) { return t == MR_ELEM_F16 ? 2 : 4; }

typedef struct {
    float *data;
    int n, h, w, c;
    size_t cap;     /* elements allocated at data; n*h*w*c never exceeds it */
    mr_elem_type dtype; /* MR_ELEM_F32 (0) unless planned otherwise */
    /* NULL: all n rows are meant. Otherwise a count in backend memory that
     * a detection op wrote (backend.h, counts_on_device): rows
     * [0, *device_count) are meant and n is the capacity; the rest are
     * padding that the ops reading this tensor skip. The host learns the
     * count only by copying it (the paste stage does, once per image). */
    const int *device_count;
} mr_tensor;

static inline size_t mr_tensor_numel(const mr_tensor *t)
{
    return (size_t)t->n * (size_t)t->h * (size_t)t->w * (size_t)t->c;
}

static inline mr_tensor mr_tensor_make(float *data, int n, int h, int w, int c)
{
    mr_tensor t = {data, n, h, w, c, (size_t)n * (size_t)h * (size_t)w * (size_t)c, MR_ELEM_F32, NULL};
    return t;
}

#endif
