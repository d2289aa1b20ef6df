/* The AffineChannel kernel, fused with the residual sum and ReLU:
 *   y[r, c] = act(x[r, c]*scale[c] + bias[c] + residual[r, c])
 * over rows x C (NHWC activations or a GEMM's [rows, out] output). This is
 * the pass Detectron's AffineChannel ran after each convolution; here it
 * also carries the bias + ReLU of linear layers and of convs that cuDNN
 * does not fuse. One read of x (and residual), one write of y; when C is a
 * multiple of 4 and the pointers are 16-byte aligned, float4 loads and
 * stores. y may alias x or residual (each element is read before written
 * by the same thread). NaN propagates through the ReLU as on the CPU. */
#include <stdint.h>

#include "cuda_launch.cuh"

static __device__ __forceinline__ float affine_one(float x, float s, float b, float r, int relu)
{
    float v = x * s + b + r;
    return relu && v < 0.0f ? 0.0f : v;
}

static __global__ void affine_kernel(float *y, const float *x, const float *scale, const float *bias,
                                     const float *residual, size_t n, int C, int relu)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C);
        float s = scale ? scale[c] : 1.0f, b = bias ? bias[c] : 0.0f, r = residual ? residual[i] : 0.0f;
        y[i] = affine_one(x[i], s, b, r, relu);
    }
}

/* n4 = n / 4 float4s; C4 = C / 4 channel groups per row. */
static __global__ void affine_kernel4(float4 *y, const float4 *x, const float4 *scale, const float4 *bias,
                                      const float4 *residual, size_t n4, int C4, int relu)
{
    const float4 one = make_float4(1.0f, 1.0f, 1.0f, 1.0f), zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C4);
        float4 v = x[i], s = scale ? scale[c] : one, b = bias ? bias[c] : zero, r = residual ? residual[i] : zero;
        float4 o;
        o.x = affine_one(v.x, s.x, b.x, r.x, relu);
        o.y = affine_one(v.y, s.y, b.y, r.y, relu);
        o.z = affine_one(v.z, s.z, b.z, r.z, relu);
        o.w = affine_one(v.w, s.w, b.w, r.w, relu);
        y[i] = o;
    }
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static void affine_launch(cudaStream_t s, float *y, const float *x, const float *scale, const float *bias,
                          const float *residual, size_t rows, int C, int relu)
{
    size_t n = rows * (size_t)C;
    if (C % 4 == 0 && aligned16(y) && aligned16(x) && aligned16(scale) && aligned16(bias) && aligned16(residual)) {
        affine_kernel4<<<cuda_grid(n / 4), MR_CUDA_BLOCK, 0, s>>>((float4 *)y, (const float4 *)x,
                                                                 (const float4 *)scale, (const float4 *)bias,
                                                                 (const float4 *)residual, n / 4, C / 4, relu);
    } else {
        affine_kernel<<<cuda_grid(n), MR_CUDA_BLOCK, 0, s>>>(y, x, scale, bias, residual, n, C, relu);
    }
}

extern "C" mr_status cuda_affine_launch(cudaStream_t s, const char *op, float *y, const float *x,
                                        const float *scale, const float *bias, const float *residual, size_t rows,
                                        int C, int relu, mr_error *err)
{
    if (C <= 0) return mr_fail(err, MR_ERR_SHAPE, "%s: affine pass over %d channels", op, C);
    if (rows == 0) return MR_OK;
    affine_launch(s, y, x, scale, bias, residual, rows, C, relu);
    return cuda_launch_status(op, err);
}
