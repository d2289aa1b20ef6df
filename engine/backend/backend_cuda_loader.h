/* The CUDA backend as the engine sees it: entry points that load
 * build/libdetect_cuda.so on first use (backend_cuda_loader.c; the library's
 * side of the contract is backend_cuda_entry.h). backend_cuda_open, the
 * registry's entry, is declared in backend_registry.h. */
#ifndef MR_BACKEND_CUDA_LOADER_H
#define MR_BACKEND_CUDA_LOADER_H

#include <stddef.h>

/* Number of usable devices (0 with no GPU or no driver, or when
 * libdetect_cuda.so cannot be loaded); `why` (may be NULL) receives the
 * reason when it is 0. */
int backend_cuda_device_count(char *why, size_t why_len);
/* 1 when the device has TF32 tensor cores (compute capability >= 8.0). */
int backend_cuda_has_tf32(int device);

/* 1 when libdetect_cuda.so loads here (every symbol resolved, cuDNN,
 * cuBLAS and the runtime found) and is this build's, GPU or not: the check
 * a machine without a GPU can still make. */
int backend_cuda_library_loads(char *why, size_t why_len);

#endif
