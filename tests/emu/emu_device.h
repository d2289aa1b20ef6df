/* The CUDA emulator's device side: force-included (g++ -include) into every
 * .cu file of cuda/ after tests/emu/rewrite_launches.py has turned its launches
 * `k<<<grid, block, shared, stream>>>(args)` into emu_launch(...) calls.
 *
 * What it is for: running the CUDA backend's own code (kernels, launchers,
 * its cuDNN and cuBLAS calls, graph capture) on a machine without a GPU, so
 * an indexing bug, a wrong argument or a broken fallback shows up here and
 * not in the few minutes a GPU machine is lent. What it is not: a GPU. The
 * threads of a block run one after another (as fibers where the kernel
 * calls __syncthreads), so races within a kernel, warp timing and speed are
 * not modelled (kernels of different host threads do run at once);
 * the real cuDNN/cuBLAS are replaced by plain loops (emu_cudnn.cc,
 * emu_cublas.cc). See tests/emu/README.md.
 *
 * The real CUDA headers are included first for their types (dim3, float4,
 * __half and its host conversions); the execution-space keywords are then
 * redefined for plain C++. */
#ifndef MR_EMU_DEVICE_H
#define MR_EMU_DEVICE_H

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __forceinline__
#define __forceinline__ inline
/* A host thread runs one block at a time, so one copy per kernel and host
 * thread is per block. thread_local, not plain static: host threads driving
 * their own streams run the same kernel at once, and a shared copy would be
 * two blocks' shared memory (the fibers of a block share their host
 * thread's copy). */
#undef __shared__
#define __shared__ static thread_local
#undef __grid_constant__
#define __grid_constant__

/* The built-in indices of the thread that is running now. */
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

/* A barrier of the running block (only in kernels launched as fibers:
 * rewrite_launches.py marks those whose body calls __syncthreads). */
void emu_syncthreads(void);
#define __syncthreads() emu_syncthreads()
/* The block's dynamic shared memory (the launch's third argument). */
void *emu_dynamic_shared(void);

/* Atomic across the device, as on a GPU: a block's threads run one at a
 * time, but host threads driving their own streams run kernels at once.
 * Relaxed, as CUDA's atomics are; floats by compare-and-swap. */
template <typename T> static inline T atomicAdd(T *p, T v)
{
    if constexpr (std::is_integral<T>::value) {
        return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    } else {
        T old, sum;
        __atomic_load(p, &old, __ATOMIC_RELAXED);
        do sum = old + v;
        while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        return old;
    }
}
template <typename T> static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
template <typename A, typename B> static inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B> static inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

/* cuda_runtime.h's typed overload, which it declares only for nvcc. */
template <typename T> static inline cudaError_t cudaFuncSetAttribute(T *kernel, enum cudaFuncAttribute a, int v)
{
    return cudaFuncSetAttribute((const void *)kernel, a, v);
}

/* A launch's configuration, as the <<< >>> arguments give it. */
struct emu_config {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    emu_config(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0) : grid(g), block(b), shared(s), stream(st) {}
};

/* The runtime's half (emu_runtime.cc): checks the configuration and every
 * pointer argument (it must point into memory from cudaMalloc or
 * cudaMallocHost, as on a GPU), then runs `body` once per thread now, or
 * records it while the stream is being captured. `param_ptrs` are the
 * kernel's `count` pointer arguments; the runtime takes `body` over. */
struct emu_body {
    virtual ~emu_body() {}
    virtual void run() = 0;
};
void emu_submit_kernel(const void *kernel, const char *name, const emu_config &cfg, int fibers,
                       const void *const *param_ptrs, int count, emu_body *body);

template <typename T> static inline void emu_collect_ptr(const T &, const void **, int *) {}
template <typename T> static inline void emu_collect_ptr(T *const &p, const void **out, int *n) { out[(*n)++] = p; }

template <typename... P> struct emu_kernel_body : emu_body {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> params; /* by value, as a launch copies them */
    template <typename... A>
    emu_kernel_body(void (*k)(P...), A &&...a) : kernel(k), params(std::forward<A>(a)...) {}
    void run() override { std::apply(kernel, params); }
};

template <typename... P, typename... A>
static inline void emu_launch(int fibers, const char *name, const emu_config &cfg, void (*kernel)(P...), A &&...args)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    auto *body = new emu_kernel_body<P...>(kernel, std::forward<A>(args)...);
    const void *ptrs[sizeof...(P) + 1];
    int n = 0;
    std::apply([&](const auto &...p) { (emu_collect_ptr(p, ptrs, &n), ...); }, body->params);
    emu_submit_kernel((const void *)kernel, name, cfg, fibers, ptrs, n, body);
}

#endif
