/* Shared by the .cu files: C linkage for the engine's status functions,
 * the internal header, and the grid size of a grid-stride loop. */
#ifndef MR_CUDA_LAUNCH_CUH
#define MR_CUDA_LAUNCH_CUH

extern "C" {
#include "core/status.h"
}
#include "cuda_internal.h"

#define MR_CUDA_BLOCK 256

/* Enough blocks to cover n items, capped: the grid-stride loops do the rest. */
static inline unsigned int cuda_grid(size_t n)
{
    size_t blocks = (n + MR_CUDA_BLOCK - 1) / MR_CUDA_BLOCK;
    if (blocks < 1) blocks = 1;
    return blocks > 65535u * 8u ? 65535u * 8u : (unsigned int)blocks;
}

/* dst[0..n) = src[0..n), this thread's share of a grid-stride copy: 16-byte
 * words, then the tail. Both pointers must be 16-byte aligned (allocation
 * starts, or 256-aligned offsets in them); either may be pinned host memory. */
static __device__ inline void grid_copy_bytes(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst, size_t n)
{
    const size_t words = n / 16, stride = (size_t)gridDim.x * blockDim.x;
    const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (size_t i = first; i < words; i += stride) ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
    for (size_t i = 16 * words + first; i < n; i += stride) dst[i] = src[i];
}

/* The launch's own error (bad configuration), named by op. */
static inline mr_status cuda_launch_status(const char *op, mr_error *err)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return MR_OK;
    return mr_fail(err, MR_ERR_BACKEND, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
}

#endif
