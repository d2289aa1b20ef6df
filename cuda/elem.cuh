/* Loads and stores of a feature map's element type (engine/core/tensor.h): the
 * kernels that move feature maps (affine, pool, upsample, RoIAlign,
 * depth-to-space, preprocess) are templates on T = float or __half and
 * compute in float either way; a half is converted once on load and
 * rounded once (to nearest even) on store. With T = float the code is the
 * strict fp32 kernel it was, bit for bit. */
#ifndef MR_CUDA_ELEM_CUH
#define MR_CUDA_ELEM_CUH

#include <cuda_fp16.h>

static __device__ __forceinline__ float elem_load(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float elem_load(const __half *p, size_t i) { return __half2float(p[i]); }
static __device__ __forceinline__ void elem_store(float *p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void elem_store(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

/* The device pointer of a tensor, as the type its dtype says. */
static inline __half *elem_f16(const mr_tensor *t) { return (__half *)(void *)t->data; }

#endif
