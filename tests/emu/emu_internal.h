/* What the CUDA emulator's fakes share (emu_runtime.cc, emu_cudnn.cc,
 * emu_cublas.cc); not seen by the backend's code. */
#ifndef MR_EMU_INTERNAL_H
#define MR_EMU_INTERNAL_H

#include <stdarg.h>

#include <memory>

#include "emu_device.h"

/* One line to stderr, "emu: " first. */
void emu_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether [p, p + bytes) lies inside one cudaMalloc allocation. */
int emu_is_device_memory(const void *p, size_t bytes);
/* The same as an error: a sticky cudaErrorIllegalAddress, reported. */
cudaError_t emu_check_device_range(const void *p, size_t bytes, const char *what);
/* Whether p lies in (or at the end of) a cudaMalloc or cudaMallocHost block. */
int emu_is_allocated(const void *p);
/* A fault: sticky, returned by every later call of this thread. */
cudaError_t emu_fault(cudaError_t e);
/* A launch's error, returned (once) by the next cudaGetLastError. */
void emu_set_launch_error(cudaError_t e);
/* Runs `work` now, or records it while `stream` is captured. */
cudaError_t emu_submit(cudaStream_t stream, const char *name, std::shared_ptr<emu_body> work);

/* Row-major C[M,N] = op(A)[M,K] op(B)[K,N] with dnnl_sgemm's arguments
 * (alpha 1, beta 0), as fixed tiles of 256 x 256 outputs, each copied into
 * one whole single-threaded sgemm, run in parallel (emu_cublas.cc): an
 * output's bytes depend neither on the thread count nor on M and N. oneDNN's threaded
 * sgemm splits the sum over K between threads for some shapes on AVX2
 * (bench/NOTES.md sections 17 and 29), which made two runs that differ only
 * in a GEMM's row count (counts on the host or the device) or in the
 * threads per context (images in flight) differ in the last bits. */
void emu_sgemm(char transa, char transb, long M, long N, long K, const float *A, long lda, const float *B, long ldb,
               float *C, long ldc);

/* The emulated device's compute capability, as 10 * major + minor. */
static inline int emu_device_sm(void)
{
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    return major * 10 + minor;
}

/* The emulated device's limits (an sm_90 part). */
constexpr unsigned EMU_MAX_THREADS = 1024;
constexpr int EMU_DEFAULT_SHARED = 48 * 1024, EMU_OPTIN_SHARED = 227 * 1024;
/* The device memory an instantiated graph holds per node while it lives. A
 * GPU keeps each node's parameters and its scheduling data there; 1 KiB is
 * a round figure, not a measurement: enough that a graph's memory counts,
 * and that a budget can run out at instantiation (tests/emu/README.md). */
constexpr size_t EMU_GRAPH_NODE_BYTES = 1024;

/* TF32 as tensor cores read an fp32 operand: 10 mantissa bits, rounded to
 * nearest (ties away from zero, as cuBLAS/cuDNN's conversion does). */
static inline float emu_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

#endif
