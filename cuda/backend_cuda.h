/* The CUDA backend: the backend interface (engine/backend/backend.h) on one NVIDIA
 * GPU, with cuDNN for convolutions, cuBLAS for the GEMMs and kernels in
 * cuda/<op>.cu for the rest. Plain C; see cuda/cuda_internal.h for how it is
 * built and README.md (Options) for the command-line switches.
 *
 * A context owns its device, one stream, the cuDNN and cuBLAS handles and
 * one workspace; two contexts share nothing. Errors from CUDA, cuDNN and
 * cuBLAS come back as MR_ERR_BACKEND with the op that failed; nothing
 * aborts. MR_CUDA_SYNC=1 in the environment synchronises after every launch,
 * so an asynchronous fault is reported by the op that caused it.
 *
 * The backend lives in its own shared library, build/libdetect_cuda.so,
 * which alone links cuDNN, cuBLAS and the CUDA runtime; the functions below
 * (engine/backend/backend_cuda_loader.c) load it on first use. A CPU run never maps
 * those libraries: about 200 MB of resident memory and their start-up time. */
#ifndef MR_BACKEND_CUDA_H
#define MR_BACKEND_CUDA_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;      /* CUDA device ordinal */
    int tf32;        /* 1: TF32 tensor-core math in cuDNN and cuBLAS (sm_80 and later); 0: strict fp32 */
    int fold_affine; /* 1: batchnorm folded into the conv (cuDNN's fused conv + bias + ReLU, residual as z);
                        0: conv without bias, then one AffineChannel kernel per conv (--no-fold) */
    int fp16;        /* 1 (--precision fp16): weights and feature maps in fp16, NHWC, tensor cores with
                        fp32 accumulation; boxes, scores and logits stay fp32 (backend.h feature_dtype).
                        tf32 is then ignored */
} mr_cuda_params;

/* Strict fp32, folded affine: the setting the parity tests use. Fails with
 * MR_ERR_BACKEND "no CUDA device: ..." when there is no usable GPU. */
mr_status backend_cuda_create(mr_backend *out, int device, mr_error *err);
mr_status backend_cuda_create_ex(mr_backend *out, const mr_cuda_params *p, mr_error *err);

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

/* What libdetect_cuda.so exports: mr_cuda_backend_entry() returns this
 * table (the version guards against a stale library beside a newer
 * binary). */
#define MR_CUDA_ENTRY_VERSION 2 /* 2: mr_cuda_params.fp16 */
typedef struct {
    int version;
    int (*device_count)(char *why, size_t why_len);
    int (*has_tf32)(int device);
    mr_status (*create)(mr_backend *out, const mr_cuda_params *p, mr_error *err);
} mr_cuda_entry;
const mr_cuda_entry *mr_cuda_backend_entry(void);

#ifdef __cplusplus
}
#endif

#endif
