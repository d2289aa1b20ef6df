/* The AffineChannel kernel, fused with the residual sum and ReLU:
 *   y[r, c] = act(x[r, c]*scale[c] + bias[c] + residual[r, c])
 * over rows x C (NHWC activations or a GEMM's [rows, out] output). This is
 * the pass Detectron's AffineChannel ran after each convolution; here it
 * also carries the bias + ReLU of linear layers and of convs that cuDNN
 * does not fuse. One read of x (and residual), one write of y; when C is a
 * multiple of 4 and the pointers are 16-byte aligned, float4 loads and
 * stores. y may alias x or residual (each element is read before written
 * by the same thread). NaN propagates through the ReLU as on the CPU.
 *
 * fp16 feature maps (--precision fp16): x, y and residual are halves, the
 * scale and bias stay float, the sum is formed in float and rounded once;
 * eight halves (16 bytes) per thread when C is a multiple of 8 and the
 * pointers are 16-byte aligned. */
#include <stdint.h>
#include <string.h>

#include "cuda_launch.cuh"
#include "elem.cuh"

static __device__ __forceinline__ float affine_one(float x, float s, float b, float r, int relu)
{
    float v = x * s + b + r;
    return relu && v < 0.0f ? 0.0f : v;
}

template <typename T>
static __global__ void affine_kernel(T *y, const T *x, const float *scale, const float *bias, const T *residual,
                                     size_t n, int C, int relu)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C);
        float s = scale ? scale[c] : 1.0f, b = bias ? bias[c] : 0.0f;
        float r = residual ? elem_load(residual, i) : 0.0f;
        elem_store(y, i, affine_one(elem_load(x, i), s, b, r, relu));
    }
}

/* Eight halves per thread: n8 = n / 8 groups, C8 = C / 8 per row. */
static __global__ void affine_kernel_h8(uint4 *y, const uint4 *x, const float *scale, const float *bias,
                                        const uint4 *residual, size_t n8, int C8, int relu)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        int c0 = (int)(i % (size_t)C8) * 8;
        /* one 16-byte load each; the halves are copied out of it, not read
         * through a cast pointer (that would break C++'s aliasing rule: g++
         * drops such reads, tests/emu showed it) */
        uint4 v = x[i], r = residual ? residual[i] : make_uint4(0, 0, 0, 0), o;
        __half2 vh[4], rh[4], oh[4];
        memcpy((void *)vh, &v, sizeof v);
        memcpy((void *)rh, &r, sizeof r);
        for (int k = 0; k < 4; k++) {
            float2 a = __half22float2(vh[k]), res = residual ? __half22float2(rh[k]) : make_float2(0.0f, 0.0f);
            int c = c0 + 2 * k;
            float lo = affine_one(a.x, scale ? scale[c] : 1.0f, bias ? bias[c] : 0.0f, res.x, relu);
            float hi = affine_one(a.y, scale ? scale[c + 1] : 1.0f, bias ? bias[c + 1] : 0.0f, res.y, relu);
            oh[k] = __floats2half2_rn(lo, hi);
        }
        memcpy(&o, oh, sizeof o);
        y[i] = o;
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
        affine_kernel<float><<<cuda_grid(n), MR_CUDA_BLOCK, 0, s>>>(y, x, scale, bias, residual, n, C, relu);
    }
}

static void affine_launch_f16(cudaStream_t s, __half *y, const __half *x, const float *scale, const float *bias,
                              const __half *residual, size_t rows, int C, int relu)
{
    size_t n = rows * (size_t)C;
    if (C % 8 == 0 && aligned16(y) && aligned16(x) && aligned16(residual)) {
        affine_kernel_h8<<<cuda_grid(n / 8), MR_CUDA_BLOCK, 0, s>>>((uint4 *)y, (const uint4 *)x, scale, bias,
                                                                  (const uint4 *)residual, n / 8, C / 8, relu);
    } else {
        affine_kernel<__half><<<cuda_grid(n), MR_CUDA_BLOCK, 0, s>>>(y, x, scale, bias, residual, n, C, relu);
    }
}

extern "C" mr_status cuda_affine_launch(cudaStream_t s, const char *op, mr_elem_type t, void *y, const void *x,
                                        const float *scale, const float *bias, const void *residual, size_t rows,
                                        int C, int relu, mr_error *err)
{
    if (C <= 0) return mr_fail(err, MR_ERR_SHAPE, "%s: affine pass over %d channels", op, C);
    if (rows == 0) return MR_OK;
    if (t == MR_ELEM_F16)
        affine_launch_f16(s, (__half *)y, (const __half *)x, scale, bias, (const __half *)residual, rows, C, relu);
    else
        affine_launch(s, (float *)y, (const float *)x, scale, bias, (const float *)residual, rows, C, relu);
    return cuda_launch_status(op, err);
}
