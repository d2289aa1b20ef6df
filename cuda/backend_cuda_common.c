/* The helpers every file of the CUDA backend calls (ggml-cuda's common.cuh
 * in spirit): CUDA, cuDNN and cuBLAS errors as statuses, the check after a
 * launch (MR_CUDA_SYNC), and device and host allocation against the memory
 * planned at load. They call nothing of the backend's other files, so the
 * function table (backend_cuda.c) and the ops it drives
 * (backend_cuda_layers.c, _detect.c, _post.c, ...) all call down to here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

mr_status cuda_fail(mr_error *err, const char *op, const char *what, cudaError_t e)
{
    return mr_fail(err, MR_ERR_BACKEND, "%s: %s failed: %s (%s)", op, what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

mr_status cudnn_fail(mr_error *err, const char *op, const char *what, cudnnStatus_t s)
{
    return mr_fail(err, MR_ERR_BACKEND, "%s: cuDNN %s failed: %s", op, what, cudnnGetErrorString(s));
}

mr_status cublas_fail(mr_error *err, const char *op, const char *what, cublasStatus_t s)
{
    return mr_fail(err, MR_ERR_BACKEND, "%s: cuBLAS %s failed: %s", op, what, cublasGetStatusString(s));
}

mr_status cuda_after_launch(cuda_ctx *c, const char *op, mr_error *err)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(err, op, "launch", e);
    if (!c->sync_each) return MR_OK;
    e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "kernel (MR_CUDA_SYNC)", e);
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

mr_status cuda_use_device(cuda_ctx *c, const char *op, mr_error *err)
{
    cudaError_t e = cudaSetDevice(c->device);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "cudaSetDevice", e);
}

mr_status cuda_alloc(cuda_ctx *c, void **buf, size_t bytes, const char *what, mr_error *err)
{
    *buf = NULL;
    cudaError_t e = cudaMalloc(buf, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        *buf = NULL;
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        return mr_fail(err, MR_ERR_OOM, "cuda:%d: out of GPU memory allocating %s: %zu bytes (%.1f MiB)", c->device,
                       what, bytes, mib(bytes));
    }
    return MR_OK;
}

mr_status cuda_reserve(cuda_ctx *c, void **buf, size_t *size, size_t bytes, const char *op, mr_error *err)
{
    if (bytes <= *size) return MR_OK;
    if (c->planned)
        return mr_fail(err, MR_ERR_BACKEND, "%s: needs %zu bytes of scratch, which exceeds the memory planned at "
                       "load (%zu bytes)", op, bytes, *size);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) return cuda_fail(err, op, "stream synchronise", e);
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *size = 0;
    MR_TRY(cuda_alloc(c, buf, bytes, op, err));
    *size = bytes;
    return MR_OK;
}

mr_status cuda_host_reserve(cuda_ctx *c, size_t bytes, const char *op, mr_error *err)
{
    if (bytes <= c->host_size) return MR_OK;
    if (c->planned)
        return mr_fail(err, MR_ERR_BACKEND, "%s: needs %zu bytes of host staging, which exceeds the memory planned "
                       "at load (%zu bytes)", op, bytes, c->host_size);
    void *p = realloc(c->host, bytes);
    if (!p) return mr_fail(err, MR_ERR_OOM, "%s: out of memory (%zu bytes of host staging)", op, bytes);
    c->host = p;
    c->host_size = bytes;
    return MR_OK;
}
