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

/* The launch's own error (bad configuration), named by op. */
static inline mr_status cuda_launch_status(const char *op, mr_error *err)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return MR_OK;
    return mr_fail(err, MR_ERR_BACKEND, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
}

#endif
