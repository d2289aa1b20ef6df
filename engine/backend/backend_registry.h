/* Backends opened by name: the one place that knows which backends this
 * build has. api/ opens its backend here and nowhere else; the model sees
 * only the interface (backend.h) that every backend fills in.
 *
 * Each backend defines its entry point (backend_<name>_open, declared
 * below) in its own folder and includes this header for the prototype, so
 * the registry includes nothing of any backend and the include graph runs
 * one way: cpu/ and cuda/ include backend/, never the reverse (the shape of
 * ggml's backend registry, where each backend registers behind one
 * interface). */
#ifndef MR_BACKEND_REGISTRY_H
#define MR_BACKEND_REGISTRY_H

#include <stddef.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The arithmetic a backend computes in. */
typedef enum {
    MR_PRECISION_DEFAULT = 0, /* the backend's own: TF32 on a CUDA device that has it, else fp32 */
    MR_PRECISION_FP32,        /* strict fp32 (the parity tests' setting) */
    MR_PRECISION_TF32,        /* CUDA: TF32 tensor-core math in cuDNN and cuBLAS (sm_80 and later) */
    MR_PRECISION_FP16,        /* CUDA: weights and feature maps in fp16, NHWC, tensor cores with fp32
                                 accumulation; boxes, scores and logits stay fp32 (backend.h feature_dtype) */
    MR_PRECISION_BF16,        /* CPU, with AVX512_BF16 or AMX: convolutions read bf16 inputs and weights and
                                 sum and write fp32, except the layers that ask for fp32
                                 (mr_conv_params.keep_fp32); feature maps stay fp32 between layers */
    MR_PRECISION_INT8,        /* CPU: the same layers as u8 or s8 inputs (quantized by their calibrated
                                 range, mr_conv_params.int8_range) times s8 weights (per output channel),
                                 summed in s32, written fp32 with bias, sum and ReLU */
} mr_precision;

/* What a backend is opened with; each reads the fields that concern it, and
 * a zeroed struct is every backend's default. */
typedef struct {
    mr_precision precision;
    int threads;   /* cpu: OpenMP threads; 0: the library's default (every core) */
    int cpu_block; /* cpu: the channel block between convolutions, 8 (nChw8c) or 16 (nChw16c); 0: chosen
                      (MR_CPU_BLOCK if set, else 16 where oneDNN runs AVX-512, else 8). Results agree across
                      blocks to the convolution tolerance; the tests run both */
    int device;    /* cuda: the device ordinal */
    int no_fold;   /* cuda: conv without bias, then one AffineChannel kernel per conv (--no-fold), instead of
                      batchnorm folded into the conv (cuDNN's fused conv + bias + ReLU, residual as z) */
} mr_backend_params;

/* 1 when backend `name` can be opened here: it is in this build and, for
 * "cuda", a device, the driver and libdetect_cuda.so are there. 0 with
 * `why` (may be NULL) saying what is missing, as a notice can quote it
 * ("this build has no CUDA backend", "no CUDA device (...)"). Cheap to ask: on a machine
 * without the NVIDIA driver it loads nothing. */
int backend_available(const char *name, char *why, size_t why_len);

/* Opens backend `name` ("cpu" or "cuda") with p (NULL: defaults) into *out;
 * release it with out->i->destroy(out->ctx). MR_ERR_UNSUPPORTED for a name
 * this build lacks; MR_ERR_BACKEND when the backend's libraries or device
 * fail to start (no CUDA device, cuDNN missing): the caller may fall back
 * to another backend; other errors reject p (a device index out of range, a
 * precision the device or backend lacks). */
mr_status backend_open(const char *name, const mr_backend_params *p, mr_backend *out, mr_error *err);

/* The backends' entry points, each defined in its own folder: */
/* engine/cpu/backend_cpu.c: oneDNN and OpenMP; precision fp32, or bf16 where the CPU has it
 * (MR_ERR_UNSUPPORTED elsewhere, naming the CPU's instruction set). */
mr_status backend_cpu_open(const mr_backend_params *p, mr_backend *out, mr_error *err);
/* engine/backend/backend_cuda_loader.c: loads libdetect_cuda.so, whose
 * cuda/backend_cuda.c does the work (backend_cuda_loader.h). */
mr_status backend_cuda_open(const mr_backend_params *p, mr_backend *out, mr_error *err);

#ifdef __cplusplus
}
#endif

#endif
