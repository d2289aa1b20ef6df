/* Max pooling and nearest-neighbour upsampling over NHWC tensors, one
 * thread per output element (consecutive threads: consecutive channels,
 * so loads and stores coalesce). Same rules as the CPU backend
 * (engine/cpu/backend_cpu.c): padded taps never win (PyTorch's -inf padding),
 * NaN propagates; the nearest source index is floor(dst * in/out) in
 * float, clamped (PyTorch's "nearest"). Float or half tensors (x and y of
 * one type; a max or a copy of halves is exact, so fp16 changes nothing
 * here but the bytes moved). */
#include <float.h>

#include "cuda_launch.cuh"
#include "elem.cuh"

template <typename T>
static __global__ void max_pool_kernel(const T *x, T *y, int n, int ih, int iw, int oh, int ow, int C,
                                       int kernel, int stride, int pad)
{
    size_t total = (size_t)n * oh * ow * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C);
        size_t pix = i / (size_t)C;
        int ox = (int)(pix % (size_t)ow), oy = (int)((pix / (size_t)ow) % (size_t)oh);
        int b = (int)(pix / ((size_t)ow * (size_t)oh));
        float m = -FLT_MAX;
        for (int ky = 0; ky < kernel; ky++) {
            int iy = oy * stride - pad + ky;
            if (iy < 0 || iy >= ih) continue;
            for (int kx = 0; kx < kernel; kx++) {
                int ix = ox * stride - pad + kx;
                if (ix < 0 || ix >= iw) continue;
                float v = elem_load(x, (((size_t)b * ih + iy) * iw + ix) * C + c);
                m = v > m || v != v ? v : m;
            }
        }
        elem_store(y, i, m);
    }
}

template <typename T>
static void max_pool_typed(cudaStream_t s, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, const T *xd,
                           T *yd)
{
    size_t total = mr_tensor_numel(y);
    max_pool_kernel<T><<<cuda_grid(total), MR_CUDA_BLOCK, 0, s>>>(xd, yd, y->n, x->h, x->w, y->h, y->w, y->c,
                                                                  p->kernel, p->stride, p->pad);
}

static void max_pool(cudaStream_t s, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y)
{
    if (x->dtype == MR_ELEM_F16)
        max_pool_typed(s, p, x, y, (const __half *)elem_f16(x), elem_f16(y));
    else
        max_pool_typed(s, p, x, y, (const float *)x->data, y->data);
}

extern "C" mr_status cuda_max_pool_launch(cudaStream_t s, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y,
                                          mr_error *err)
{
    if (x->c != y->c || x->n != y->n) return mr_fail(err, MR_ERR_SHAPE, "max_pool: channel/batch mismatch");
    if (x->dtype != y->dtype) return mr_fail(err, MR_ERR_SHAPE, "max_pool: input and output types differ");
    if (p->kernel < 1 || p->stride < 1 || p->pad < 0)
        return mr_fail(err, MR_ERR_SHAPE, "max_pool: bad kernel %d / stride %d / pad %d", p->kernel, p->stride,
                       p->pad);
    if (y->h != (x->h + 2 * p->pad - p->kernel) / p->stride + 1 || y->w != (x->w + 2 * p->pad - p->kernel) / p->stride + 1)
        return mr_fail(err, MR_ERR_SHAPE, "max_pool: a %dx%d input does not give a %dx%d output", x->h, x->w, y->h,
                       y->w);
    if (mr_tensor_numel(y) == 0) return MR_OK;
    max_pool(s, p, x, y);
    return cuda_launch_status("max_pool", err);
}

static __device__ __forceinline__ int nearest_index(int dst, int in, int out)
{
    if (in == out) return dst;
    if (out == 2 * in) return dst >> 1;
    float scale = (float)in / (float)out;
    int i = (int)floorf((float)dst * scale);
    return i < in - 1 ? i : in - 1;
}

template <typename T>
static __global__ void upsample_nearest_kernel(const T *x, T *y, int n, int ih, int iw, int oh, int ow, int C)
{
    size_t total = (size_t)n * oh * ow * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C);
        size_t pix = i / (size_t)C;
        int ox = (int)(pix % (size_t)ow), oy = (int)((pix / (size_t)ow) % (size_t)oh);
        int b = (int)(pix / ((size_t)ow * (size_t)oh));
        int iy = nearest_index(oy, ih, oh), ix = nearest_index(ox, iw, ow);
        y[i] = x[(((size_t)b * ih + iy) * iw + ix) * C + c]; /* a copy: no conversion */
    }
}

template <typename T>
static void upsample_typed(cudaStream_t s, const mr_tensor *x, mr_tensor *y, const T *xd, T *yd)
{
    size_t total = mr_tensor_numel(y);
    upsample_nearest_kernel<T><<<cuda_grid(total), MR_CUDA_BLOCK, 0, s>>>(xd, yd, y->n, x->h, x->w, y->h, y->w,
                                                                          y->c);
}

static void upsample_nearest(cudaStream_t s, const mr_tensor *x, mr_tensor *y)
{
    if (x->dtype == MR_ELEM_F16)
        upsample_typed(s, x, y, (const __half *)elem_f16(x), elem_f16(y));
    else
        upsample_typed(s, x, y, (const float *)x->data, y->data);
}

extern "C" mr_status cuda_upsample_nearest_launch(cudaStream_t s, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    if (x->c != y->c || x->n != y->n) return mr_fail(err, MR_ERR_SHAPE, "upsample_nearest: channel/batch mismatch");
    if (x->dtype != y->dtype) return mr_fail(err, MR_ERR_SHAPE, "upsample_nearest: input and output types differ");
    if (mr_tensor_numel(y) == 0) return MR_OK;
    if (x->h <= 0 || x->w <= 0)
        return mr_fail(err, MR_ERR_SHAPE, "upsample_nearest: an empty %dx%d input cannot fill %dx%d", x->h, x->w, y->h,
                       y->w);
    upsample_nearest(s, x, y);
    return cuda_launch_status("upsample_nearest", err);
}
