/* The contract between engine/backend/backend_cuda_loader.c and the CUDA
 * backend's own library, build/libdetect_cuda.so (cuda/): the one symbol the
 * library exports and the table it returns. The loader dlopens the library
 * on first use, so only it links cuDNN, cuBLAS and the CUDA runtime and a
 * CPU run never maps them (about 200 MB of resident memory and their
 * start-up time).
 *
 * A context the table creates owns its device, one stream, the cuDNN and
 * cuBLAS handles and one workspace; two contexts share nothing. Errors from
 * CUDA, cuDNN and cuBLAS come back as MR_ERR_BACKEND with the op that
 * failed; nothing aborts. MR_CUDA_SYNC=1 in the environment synchronises
 * after every launch, so an asynchronous fault is reported by the op that
 * caused it. cuda/cuda_internal.h says how the library is built. */
#ifndef MR_BACKEND_CUDA_ENTRY_H
#define MR_BACKEND_CUDA_ENTRY_H

#include <stddef.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version guards against a stale library beside a newer binary. */
#define MR_CUDA_ENTRY_VERSION 4 /* 4: mr_backend_i ends with device_memory; 3: create takes mr_backend_params */
typedef struct {
    int version;
    int (*device_count)(char *why, size_t why_len);
    int (*has_tf32)(int device);
    /* p->precision DEFAULT: TF32 where the device has it, else fp32. Fails
     * with MR_ERR_BACKEND "no CUDA device: ..." when there is no usable GPU. */
    mr_status (*create)(const mr_backend_params *p, mr_backend *out, mr_error *err);
} mr_cuda_entry;

/* Defined in cuda/backend_cuda.c; looked up by name with dlsym. */
const mr_cuda_entry *mr_cuda_backend_entry(void);

#ifdef __cplusplus
}
#endif

#endif
