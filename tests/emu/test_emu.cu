/* The emulator's own checks (tests/emu/README.md), as CUDA code: that it
 * runs every thread of a grid once, that its barriers hold, that host
 * threads driving their own streams and graphs at once get what each gets
 * alone, and that it refuses what a GPU refuses, each against an outcome
 * written down from the CUDA documentation, not from the emulator. Built and run by make cuda-emu
 * (build-emu/test_emu); it is a .cu file so nvcc could build it too.
 *
 * A fault is sticky for the thread that made it, as for a CUDA context, so
 * each fault case runs on a thread of its own. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <thread>
#include <vector>

#include <cub/device/device_radix_sort.cuh>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include <cmocka.h>
}

static __global__ void mark_kernel(int *hits, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) hits[i] += 1;
}

static __global__ void mark2d_kernel(int *hits, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) hits[y * w + x] += 1 + threadIdx.z;
}

/* Reverses each block's 64 values through shared memory: right only if
 * every thread has written before any reads. */
static __global__ void reverse_kernel(const int *in, int *out)
{
    __shared__ int s[64];
    int t = threadIdx.x, base = blockIdx.x * 64;
    s[t] = in[base + t];
    __syncthreads();
    out[base + t] = s[63 - t];
}

static __global__ void dynamic_shared_kernel(int *out)
{
    extern __shared__ int dyn[];
    dyn[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x];
}

/* Sums each block's 128 values by halving through shared memory, a barrier
 * between the steps: its __shared__ array is the block's own, so two host
 * threads running it at once must not see each other's. */
static __global__ void block_sum_kernel(const int *in, int *out)
{
    __shared__ int s[128];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 128 + t];
    __syncthreads();
    for (int half = 64; half > 0; half /= 2) {
        if (t < half) s[t] += s[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

/* Every thread adds CONC_ADDS ones over 8 counters: an atomic is atomic
 * across the device, also against kernels of other streams and host
 * threads. */
enum { CONC_ADDS = 1024 };
static __global__ void count_kernel(int *counters)
{
    for (int i = 0; i < CONC_ADDS; i++) atomicAdd(&counters[(threadIdx.x + i) % 8], 1);
}

static int *dev_ints(size_t n)
{
    int *d = NULL;
    assert_int_equal(cudaMalloc((void **)&d, sizeof(int) * n), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 0, sizeof(int) * n, 0), cudaSuccess);
    return d;
}

static void test_every_thread_once(void **state)
{
    (void)state;
    const int n = 100003, w = 37, h = 29;
    int *d = dev_ints(n), *h_hits = (int *)malloc(sizeof(int) * n);
    mark_kernel<<<7, 96>>>(d, n); /* a grid-stride loop over more items than threads */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(h_hits, d, sizeof(int) * n, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    for (int i = 0; i < n; i++) assert_int_equal(h_hits[i], 1);
    int *d2 = dev_ints((size_t)w * h);
    mark2d_kernel<<<dim3(5, 4), dim3(8, 8, 2)>>>(d2, w, h); /* z threads add 1 and 2 */
    assert_int_equal(cudaMemcpyAsync(h_hits, d2, sizeof(int) * w * h, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    for (int i = 0; i < w * h; i++) assert_int_equal(h_hits[i], 3);
    cudaFree(d);
    cudaFree(d2);
    free(h_hits);
}

static void test_barrier(void **state)
{
    (void)state;
    int h_in[256], h_out[256];
    for (int i = 0; i < 256; i++) h_in[i] = i * 7;
    int *in = dev_ints(256), *out = dev_ints(256);
    cudaMemcpyAsync(in, h_in, sizeof h_in, cudaMemcpyHostToDevice, 0);
    reverse_kernel<<<4, 64>>>(in, out);
    cudaMemcpyAsync(h_out, out, sizeof h_out, cudaMemcpyDeviceToHost, 0);
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < 64; t++) assert_int_equal(h_out[b * 64 + t], h_in[b * 64 + 63 - t]);
    dynamic_shared_kernel<<<1, 128, 128 * sizeof(int)>>>(out);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    cudaMemcpyAsync(h_out, out, 128 * sizeof(int), cudaMemcpyDeviceToHost, 0);
    for (int t = 0; t < 128; t++) assert_int_equal(h_out[t], 127 - t);
    cudaFree(in);
    cudaFree(out);
}

/* Runs fn on a new thread (a context of its own) and returns its result. */
static cudaError_t on_own_thread(cudaError_t (*fn)(void))
{
    cudaError_t e = cudaSuccess;
    std::thread t([&] { e = fn(); });
    t.join();
    return e;
}

static cudaError_t host_pointer_to_kernel(void)
{
    static int host[16];
    mark_kernel<<<1, 16>>>(host, 16);
    return cudaStreamSynchronize(0);
}

static cudaError_t copy_past_allocation(void)
{
    int *d = NULL, h[32];
    cudaMalloc((void **)&d, 16 * sizeof(int));
    return cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, 0);
}

static cudaError_t copy_wrong_direction(void)
{
    int *d = NULL, h[16];
    cudaMalloc((void **)&d, sizeof h);
    return cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyDeviceToHost, 0); /* device "source" is the host array */
}

static void test_faults(void **state)
{
    (void)state;
    assert_int_equal(on_own_thread(host_pointer_to_kernel), cudaErrorIllegalAddress);
    assert_int_not_equal(on_own_thread(copy_past_allocation), cudaSuccess);
    assert_int_not_equal(on_own_thread(copy_wrong_direction), cudaSuccess);
}

static void test_launch_configuration(void **state)
{
    (void)state;
    int *d = dev_ints(2048);
    mark_kernel<<<1, 2048>>>(d, 2048); /* more than 1024 threads a block */
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* not sticky */
    dynamic_shared_kernel<<<1, 32, 64 * 1024>>>(d); /* over 48 KiB without opting in */
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
                     cudaSuccess);
    dynamic_shared_kernel<<<1, 32, 64 * 1024>>>(d);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    cudaFree(d);
}

static void test_capture(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    int *d = dev_ints(64), h[64];
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    /* a capture records work without running it; the graph runs it per launch */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    mark_kernel<<<1, 64, 0, s>>>(d, 64);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    assert_int_equal(h[0], 0);
    assert_int_equal(cudaGraphInstantiateWithFlags(&x, g, 0), cudaSuccess);
    cudaGraphLaunch(x, s);
    cudaGraphLaunch(x, s);
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    for (int i = 0; i < 64; i++) assert_int_equal(h[i], 2);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    /* what a thread-local capture forbids fails and invalidates the capture */
    void *p = NULL;
    const char *what[] = {"synchronise", "cudaMalloc", "the legacy stream"};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        cudaError_t e = k == 0 ? cudaStreamSynchronize(s) : k == 1 ? cudaMalloc(&p, 64) : cudaMemsetAsync(d, 0, 4, 0);
        print_message("  %s during a capture: %s\n", what[k], cudaGetErrorName(e));
        assert_int_not_equal(e, cudaSuccess);
        assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    }
    cudaStreamDestroy(s);
    cudaFree(d);
}

/* The device's memory (main sets MR_EMU_DEVICE_MEMORY=64M): cudaMemGetInfo
 * counts live cudaMalloc bytes; cudaMalloc beyond what is free fails with
 * cudaErrorMemoryAllocation, returned once more by cudaGetLastError and not
 * sticky, as on a GPU. */
static void test_device_memory(void **state)
{
    (void)state;
    const size_t mib = 1 << 20;
    size_t free0 = 0, free1 = 0, total = 0;
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_true(total == 64 * mib);
    assert_true(free0 <= total); /* the earlier tests' leftovers are in use */
    void *a = NULL, *big = NULL;
    assert_int_equal(cudaMalloc(&a, mib), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_true(free1 == free0 - mib);
    assert_int_equal(cudaMalloc(&big, free1 + 1), cudaErrorMemoryAllocation);
    assert_null(big);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* not sticky */
    size_t now = 0;
    assert_int_equal(cudaMemGetInfo(&now, &total), cudaSuccess);
    assert_true(now == free1);
    assert_int_equal(cudaMalloc(&big, free1), cudaSuccess); /* all that is free */
    assert_int_equal(cudaMemGetInfo(&now, &total), cudaSuccess);
    assert_true(now == 0);
    assert_int_equal(cudaFree(big), cudaSuccess);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&now, &total), cudaSuccess);
    assert_true(now == free0);
}

/* An instantiated graph holds 1 KiB of device memory a node while it lives
 * (README.md); without it, cudaGraphInstantiate fails with
 * cudaErrorMemoryAllocation, not sticky: the stream runs on, and the same
 * graph instantiates once memory is freed. */
static void test_graph_memory(void **state)
{
    (void)state;
    const size_t node = 1024;
    cudaStream_t s;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    int *d = dev_ints(64), h[64];
    void *fill = NULL;
    size_t free0 = 0, now = 0, total = 0;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    for (int k = 0; k < 3; k++) mark_kernel<<<1, 64, 0, s>>>(d, 64);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_int_equal(cudaGraphInstantiateWithFlags(&x, g, 0), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&now, &total), cudaSuccess);
    assert_true(now == free0 - 3 * node);
    assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&now, &total), cudaSuccess);
    assert_true(now == free0);
    /* leave one byte less than the graph needs */
    assert_int_equal(cudaMalloc(&fill, free0 - 3 * node + 1), cudaSuccess);
    x = NULL;
    assert_int_equal(cudaGraphInstantiateWithFlags(&x, g, 0), cudaErrorMemoryAllocation);
    assert_null(x);
    assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&now, &total), cudaSuccess);
    assert_true(now == 3 * node - 1);
    mark_kernel<<<1, 64, 0, s>>>(d, 64); /* not sticky: work still runs */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaFree(fill), cudaSuccess);
    assert_int_equal(cudaGraphInstantiateWithFlags(&x, g, 0), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(x, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s), cudaSuccess);
    for (int i = 0; i < 64; i++) assert_int_equal(h[i], 4);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    cudaFree(d);
}

/* Several host threads, each with its own stream, cuBLAS handle and graph,
 * as the engine's execution contexts drive one device: what each computes
 * must be what it computes alone. */
enum { CONC_HOSTS = 4, CONC_BLOCKS = 16, CONC_ROUNDS = 6, CONC_N = CONC_BLOCKS * 128, CONC_GEMM = 16 };

struct conc_run {
    int id;       /* the host thread's number: its inputs differ from the others' */
    int *counter; /* 8 device ints that every host thread's count_kernel adds to */
    std::vector<int> sums, reversed, graph_sums, graph_reversed;
    std::vector<float> product; /* the captured GEMM's result */
    int errors;                 /* calls that failed (cmocka's asserts are for the main thread) */
};

/* CONC_ROUNDS launches of each kernel on the stream, then the same work and
 * a GEMM captured as a graph and replayed CONC_ROUNDS times. */
static void conc_work(conc_run *r)
{
    const int n = CONC_N, g = CONC_GEMM;
    std::vector<int> h_in(n);
    std::vector<float> h_a(g * g);
    for (int i = 0; i < n; i++) h_in[i] = (i * 7 + r->id * 1000003) % 9973 - 4000;
    for (int i = 0; i < g * g; i++) h_a[i] = (float)((i % 5 - 2) * (r->id + 1));
    r->sums.assign(CONC_BLOCKS, 0), r->graph_sums.assign(CONC_BLOCKS, 0);
    r->reversed.assign(n, 0), r->graph_reversed.assign(n, 0), r->product.assign(g * g, 0.0f);
    r->errors = 0;
    cudaStream_t s = NULL;
    cublasHandle_t blas = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int *in = NULL, *sum = NULL, *rev = NULL, *sum2 = NULL, *rev2 = NULL;
    float *a = NULL, *c = NULL;
    const float one = 1.0f, zero = 0.0f;
    int bad = 0;
    bad |= cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
    bad |= cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, s) != CUBLAS_STATUS_SUCCESS;
    bad |= cudaMalloc((void **)&in, sizeof(int) * n) != cudaSuccess;
    bad |= cudaMalloc((void **)&sum, sizeof(int) * CONC_BLOCKS) != cudaSuccess;
    bad |= cudaMalloc((void **)&sum2, sizeof(int) * CONC_BLOCKS) != cudaSuccess;
    bad |= cudaMalloc((void **)&rev, sizeof(int) * n) != cudaSuccess;
    bad |= cudaMalloc((void **)&rev2, sizeof(int) * n) != cudaSuccess;
    bad |= cudaMalloc((void **)&a, sizeof(float) * g * g) != cudaSuccess;
    bad |= cudaMalloc((void **)&c, sizeof(float) * g * g) != cudaSuccess;
    if (bad) {
        r->errors++;
        return;
    }
    cudaMemcpyAsync(in, h_in.data(), sizeof(int) * n, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(a, h_a.data(), sizeof(float) * g * g, cudaMemcpyHostToDevice, s);
    for (int k = 0; k < CONC_ROUNDS; k++) {
        block_sum_kernel<<<CONC_BLOCKS, 128, 0, s>>>(in, sum);
        reverse_kernel<<<n / 64, 64, 0, s>>>(in, rev);
        count_kernel<<<CONC_BLOCKS, 128, 0, s>>>(r->counter);
        r->errors += cudaGetLastError() != cudaSuccess;
    }
    r->errors += cudaMemcpyAsync(r->sums.data(), sum, sizeof(int) * CONC_BLOCKS, cudaMemcpyDeviceToHost, s) !=
                 cudaSuccess;
    r->errors += cudaMemcpyAsync(r->reversed.data(), rev, sizeof(int) * n, cudaMemcpyDeviceToHost, s) != cudaSuccess;
    r->errors += cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess;
    block_sum_kernel<<<CONC_BLOCKS, 128, 0, s>>>(in, sum2);
    reverse_kernel<<<n / 64, 64, 0, s>>>(in, rev2);
    r->errors += cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, g, g, g, &one, a, g, a, g, &zero, c, g) !=
                 CUBLAS_STATUS_SUCCESS;
    count_kernel<<<CONC_BLOCKS, 128, 0, s>>>(r->counter);
    r->errors += cudaStreamEndCapture(s, &graph) != cudaSuccess;
    r->errors += cudaGraphInstantiateWithFlags(&exec, graph, 0) != cudaSuccess;
    for (int k = 0; k < CONC_ROUNDS && exec; k++) r->errors += cudaGraphLaunch(exec, s) != cudaSuccess;
    r->errors += cudaMemcpyAsync(r->graph_sums.data(), sum2, sizeof(int) * CONC_BLOCKS, cudaMemcpyDeviceToHost,
                                 s) != cudaSuccess;
    r->errors += cudaMemcpyAsync(r->graph_reversed.data(), rev2, sizeof(int) * n, cudaMemcpyDeviceToHost, s) !=
                 cudaSuccess;
    r->errors += cudaMemcpyAsync(r->product.data(), c, sizeof(float) * g * g, cudaMemcpyDeviceToHost, s) !=
                 cudaSuccess;
    r->errors += cudaStreamSynchronize(s) != cudaSuccess;
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cublasDestroy(blas);
    cudaStreamDestroy(s);
    cudaFree(in), cudaFree(sum), cudaFree(sum2), cudaFree(rev), cudaFree(rev2), cudaFree(a), cudaFree(c);
}

static void test_concurrent_hosts(void **state)
{
    (void)state;
    int *counter = dev_ints(8);
    conc_run serial[CONC_HOSTS], together[CONC_HOSTS];
    for (int k = 0; k < CONC_HOSTS; k++) {
        serial[k].id = together[k].id = k;
        serial[k].counter = together[k].counter = counter;
        conc_work(&serial[k]); /* one host thread at a time: the results to match */
    }
    /* the serial results are right: against the host's arithmetic, and the
     * graph's against the stream's */
    for (int k = 0; k < CONC_HOSTS; k++) {
        const conc_run &r = serial[k];
        assert_int_equal(r.errors, 0);
        for (int b = 0; b < CONC_BLOCKS; b++) {
            int want = 0;
            for (int i = 0; i < 128; i++) want += (((b * 128 + i) * 7 + k * 1000003) % 9973) - 4000;
            assert_int_equal(r.sums[b], want);
        }
        for (int i = 0; i < CONC_N; i++)
            assert_int_equal(r.reversed[i], (((i ^ 63) * 7 + k * 1000003) % 9973) - 4000);
        assert_true(r.graph_sums == r.sums && r.graph_reversed == r.reversed);
        for (int i = 0; i < CONC_GEMM; i++)
            for (int j = 0; j < CONC_GEMM; j++) {
                float want = 0.0f; /* column-major: C[i][j] = sum over p of A[i][p] * A[p][j] */
                for (int p = 0; p < CONC_GEMM; p++) {
                    const int aip = (p * CONC_GEMM + i) % 5 - 2, apj = (j * CONC_GEMM + p) % 5 - 2;
                    want += (float)(aip * (k + 1)) * (float)(apj * (k + 1));
                }
                assert_true(r.product[j * CONC_GEMM + i] == want);
            }
    }
    std::atomic<int> ready(0);
    std::vector<std::thread> hosts;
    for (int k = 0; k < CONC_HOSTS; k++)
        hosts.emplace_back([&, k] {
            ready++;
            while (ready.load() < CONC_HOSTS) std::this_thread::yield(); /* start together */
            conc_work(&together[k]);
        });
    for (auto &t : hosts) t.join();
    int mismatched = 0;
    for (int k = 0; k < CONC_HOSTS; k++) {
        const conc_run &a = serial[k], &b = together[k];
        int m = a.sums != b.sums || a.reversed != b.reversed || a.graph_sums != b.graph_sums ||
                a.graph_reversed != b.graph_reversed || a.product != b.product;
        if (m) print_message("  host thread %d: results differ from its serial run\n", k);
        mismatched += m;
        assert_int_equal(b.errors, 0);
    }
    int counts[8], count = 0;
    cudaMemcpyAsync(counts, counter, sizeof counts, cudaMemcpyDeviceToHost, 0);
    for (int i = 0; i < 8; i++) count += counts[i];
    print_message("  %d host threads at once: %d of them differ from their serial run; %d of %d atomic adds\n",
                  CONC_HOSTS, mismatched, count, 2 * CONC_HOSTS * 2 * CONC_ROUNDS * CONC_BLOCKS * 128 * CONC_ADDS);
    assert_int_equal(mismatched, 0);
    assert_int_equal(count, 2 * CONC_HOSTS * 2 * CONC_ROUNDS * CONC_BLOCKS * 128 * CONC_ADDS);
    cudaFree(counter);
}

/* CUB's order: keys by their bits after the float twiddle, so
 * -1 < -0.0 < +0.0 < 1 < +NaN; equal keys keep their input order. */
static void test_cub_sort(void **state)
{
    (void)state;
    const float keys[7] = {1.0f, -0.0f, 0.0f, -1.0f, 1.0f, NAN, -0.0f};
    const int values[7] = {0, 1, 2, 3, 4, 5, 6};
    const int descending[7] = {5, 0, 4, 2, 1, 6, 3}, ascending[7] = {3, 1, 6, 2, 0, 4, 5};
    float *dk = NULL, *dk2 = NULL;
    int *dv = NULL, *dv2 = NULL, got[7];
    void *temp = NULL;
    size_t bytes = 0;
    cudaMalloc((void **)&dk, sizeof keys);
    cudaMalloc((void **)&dk2, sizeof keys);
    cudaMalloc((void **)&dv, sizeof values);
    cudaMalloc((void **)&dv2, sizeof values);
    cudaMemcpyAsync(dk, keys, sizeof keys, cudaMemcpyHostToDevice, 0);
    cudaMemcpyAsync(dv, values, sizeof values, cudaMemcpyHostToDevice, 0);
    assert_int_equal(cub::DeviceRadixSort::SortPairsDescending(NULL, bytes, dk, dk2, dv, dv2, 7), cudaSuccess);
    cudaMalloc(&temp, bytes);
    size_t small = bytes - 1;
    assert_int_not_equal(cub::DeviceRadixSort::SortPairsDescending(temp, small, dk, dk2, dv, dv2, 7), cudaSuccess);
    assert_int_equal(cub::DeviceRadixSort::SortPairsDescending(temp, bytes, dk, dk2, dv, dv2, 7), cudaSuccess);
    cudaMemcpyAsync(got, dv2, sizeof got, cudaMemcpyDeviceToHost, 0);
    for (int i = 0; i < 7; i++) assert_int_equal(got[i], descending[i]);
    assert_int_equal(cub::DeviceRadixSort::SortPairs(temp, bytes, dk, dk2, dv, dv2, 7), cudaSuccess);
    cudaMemcpyAsync(got, dv2, sizeof got, cudaMemcpyDeviceToHost, 0);
    for (int i = 0; i < 7; i++) assert_int_equal(got[i], ascending[i]);
    cudaFree(dk), cudaFree(dk2), cudaFree(dv), cudaFree(dv2), cudaFree(temp);
}

int main(void)
{
    /* a small device, so the budget tests can fill it; read at the first call */
    setenv("MR_EMU_DEVICE_MEMORY", "64M", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_thread_once), cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_faults),            cmocka_unit_test(test_launch_configuration),
        cmocka_unit_test(test_capture),           cmocka_unit_test(test_cub_sort),
        cmocka_unit_test(test_device_memory),     cmocka_unit_test(test_graph_memory),
        cmocka_unit_test(test_concurrent_hosts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
