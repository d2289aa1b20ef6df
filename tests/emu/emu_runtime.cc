/* The CUDA emulator's runtime (tests/emu/README.md): the part of the CUDA
 * runtime API the backend calls, on the CPU.
 *
 * Memory: cudaMalloc and cudaMallocHost return malloc'd blocks that are
 * recorded, so every kernel's pointer arguments, every copy and every
 * cuDNN/cuBLAS operand is checked to lie inside one (a host pointer handed
 * to a kernel, or a copy past an allocation's end, is an error here as it
 * is a fault on a GPU). Exact sizes, so AddressSanitizer sees overruns.
 * The device has a budget (MR_EMU_DEVICE_MEMORY, default 80 GiB) that live
 * cudaMalloc bytes and instantiated graphs (EMU_GRAPH_NODE_BYTES a node)
 * share: cudaMalloc or cudaGraphInstantiate beyond it fails with
 * cudaErrorMemoryAllocation, not sticky, and cudaMemGetInfo reports it.
 *
 * Streams: work runs at once, in order (a stream is a queue that is always
 * drained). While a stream is captured (cudaStreamBeginCapture, thread-local
 * mode as the backend uses it) its work is recorded instead, and what CUDA
 * forbids during a capture is refused the same way: synchronising, cudaMalloc
 * or cudaFree, work on the legacy default stream, a copy to or from pageable
 * host memory. Each refusal invalidates the capture, so cudaStreamEndCapture
 * fails as it would on a GPU. A graph replays the recorded work.
 *
 * Events: cudaEventRecord stamps the host clock when the stream reaches it
 * (at once: streams are always drained); cudaEventRecordWithFlags with
 * cudaEventRecordExternal during a capture records a node that stamps it
 * at each replay, as a graph's event record node does, and
 * cudaEventElapsedTime gives the difference. The times mean nothing for
 * speed; that they exist and are ordered is what is checked.
 *
 * Statistics (MR_EMU_STATS=FILE, written at exit): graph launches,
 * captures that ended well and that failed (with each good capture's nodes
 * by name), graphs instantiated (a capture whose fn failed ends well but is
 * not instantiated) and refused for want of memory, synchronisations, the
 * peak of live cudaMalloc bytes, and the work run outside graphs by
 * name. The
 * whole-pass test (run.sh) reads them: what ran in a graph, and that no
 * capture failed.
 *
 * Errors follow CUDA's two kinds: a bad launch configuration is returned by
 * the next cudaGetLastError (and cleared); a fault (bad pointer) is sticky
 * and returned by every later call. Each is also printed once to stderr
 * with "emu:" in front, naming the kernel or the call.
 *
 * Host threads: several may drive the device at once, each on its own
 * streams, as the engine's execution contexts do. Work runs on the thread
 * that submits it (a graph's on the thread that launches it); what belongs
 * to the device (the allocations and the memory budget, the statistics) is
 * locked; the last error, the capture and a fault are the thread's own (a
 * fault is sticky for the thread that made it: on a GPU it would end the
 * whole context, every thread's). A synchronisation waits for nothing: a
 * thread's work has ended when its call returns, and another thread's call
 * in progress is not waited for, as cudaDeviceSynchronize would on a GPU. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emu_device.h"
#include "emu_internal.h"

/* ---------- errors ---------- */

namespace {

struct allocation {
    size_t bytes;
    int pinned; /* cudaMallocHost, else cudaMalloc */
};

struct emu_state {
    std::mutex lock; /* detect's decode threads allocate pinned buffers */
    std::map<uintptr_t, allocation> allocs;
    size_t device_bytes = 0; /* live cudaMalloc bytes */
    size_t device_peak = 0;  /* their most */
    size_t graph_bytes = 0;  /* what live instantiated graphs hold */
};

emu_state &state()
{
    static emu_state s;
    return s;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaError_t sticky_error = cudaSuccess;
thread_local cudaStream_t capturing_stream = nullptr; /* this thread's capture */
thread_local int launching_graph = 0;                 /* inside cudaGraphLaunch: its nodes are not eager work */

/* MR_EMU_STATS: counted by every thread, written once at exit. */
struct emu_stats {
    std::mutex lock;
    long graph_launches = 0, graph_nodes_run = 0, captures_ok = 0, captures_failed = 0, instantiated = 0, syncs = 0;
    long instantiate_failed = 0; /* refused: the device's memory was short */
    std::map<std::string, long> eager;  /* work run outside a graph, by name */
    std::vector<std::string> captures; /* each good capture: its nodes by name */
    ~emu_stats()
    {
        const char *path = getenv("MR_EMU_STATS");
        if (!path || !*path) return;
        FILE *f = fopen(path, "w");
        if (!f) return;
        fprintf(f, "graph_launches %ld\ngraph_nodes_run %ld\ncaptures_ok %ld\ncaptures_failed %ld\ninstantiated %ld\n"
                "instantiate_failed %ld\nsyncs %ld\ndevice_bytes_peak %zu\n", graph_launches, graph_nodes_run,
                captures_ok, captures_failed, instantiated, instantiate_failed, syncs, state().device_peak);
        for (const auto &c : captures) fprintf(f, "capture %s\n", c.c_str());
        for (const auto &e : eager) fprintf(f, "eager %ld %s\n", e.second, e.first.c_str());
        fclose(f);
    }
};

emu_stats &stats()
{
    state(); /* made first, so gone last: the statistics read its peak at exit */
    static emu_stats s;
    return s;
}

void count_sync()
{
    emu_stats &st = stats();
    std::lock_guard<std::mutex> g(st.lock);
    st.syncs++;
}

double host_seconds()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

} // namespace

struct CUstream_st {
    int capturing;
    int invalidated;
    std::vector<std::shared_ptr<emu_body>> recorded;
    std::vector<std::string> recorded_names;
};

struct CUgraph_st {
    std::vector<std::shared_ptr<emu_body>> nodes;
};

struct CUgraphExec_st {
    std::vector<std::shared_ptr<emu_body>> nodes;
    size_t device_bytes; /* taken from the device's memory while it lives */
};

struct CUevent_st {
    int recorded;
    double stamp; /* host seconds when the stream reached it */
};

void emu_report(const char *fmt, ...)
{
    /* one write, so that host threads reporting at once do not mix lines */
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "emu: %s\n", line);
}

cudaError_t emu_fault(cudaError_t e)
{
    if (sticky_error == cudaSuccess) sticky_error = e;
    return e;
}

void emu_set_launch_error(cudaError_t e)
{
    if (e != sticky_error) last_error = e;
}

/* A call CUDA forbids while this thread captures: it fails, and the
 * capture can no longer end well. */
static cudaError_t refuse_in_capture(const char *call)
{
    emu_report("%s during a stream capture (CUDA refuses it and invalidates the capture)", call);
    if (capturing_stream) capturing_stream->invalidated = 1;
    return cudaErrorStreamCaptureUnsupported;
}

/* ---------- memory ---------- */

/* Whether [p, p + bytes) lies in one allocation; a copy of its record in
 * *out (a copy: another host thread may free it once the lock is let go). */
static int find_allocation(const void *p, size_t bytes, allocation *out)
{
    emu_state &s = state();
    std::lock_guard<std::mutex> g(s.lock);
    uintptr_t a = (uintptr_t)p;
    auto it = s.allocs.upper_bound(a);
    if (it == s.allocs.begin()) return 0;
    --it;
    if (a + bytes > it->first + it->second.bytes || a < it->first) return 0;
    if (out) *out = it->second;
    return 1;
}

int emu_is_allocated(const void *p) { return find_allocation(p, 0, nullptr); }

int emu_is_device_memory(const void *p, size_t bytes)
{
    allocation a;
    return find_allocation(p, bytes, &a) && !a.pinned;
}

cudaError_t emu_check_device_range(const void *p, size_t bytes, const char *what)
{
    if (emu_is_device_memory(p, bytes)) return cudaSuccess;
    emu_report("%s: %zu bytes at %p are not inside one cudaMalloc allocation", what, bytes, p);
    return emu_fault(cudaErrorIllegalAddress);
}

/* A size in bytes: digits, then K, M, G or T for KiB .. TiB ("512M", "2G");
 * 0 when it is not one. */
static size_t parse_bytes(const char *text)
{
    if (!isdigit((unsigned char)text[0])) return 0;
    char *end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) end++;
    if (errno || *end || v > (SIZE_MAX >> shift)) return 0;
    return (size_t)v << shift;
}

/* MR_EMU_DEVICE_MEMORY: the device's memory, default 80 GiB (an H100's).
 * MR_EMU_MEMORY_LIMIT is its old name, still read when it is not set. */
static size_t device_memory_total()
{
    static const size_t total = [] {
        const size_t def = (size_t)80 << 30;
        const char *name = "MR_EMU_DEVICE_MEMORY", *e = getenv(name);
        if (!e || !*e) name = "MR_EMU_MEMORY_LIMIT", e = getenv(name);
        if (!e || !*e) return def;
        size_t v = parse_bytes(e);
        if (v) return v;
        emu_report("%s=%s: not a size in bytes (digits, then K, M, G or T); the device has 80 GiB", name, e);
        return def;
    }();
    return total;
}

/* Takes `bytes` of the device's memory for a cudaMalloc or (graph) an
 * instantiated graph; 0 when they do not fit. */
static int take_device_memory(size_t bytes, int graph)
{
    emu_state &s = state();
    std::lock_guard<std::mutex> g(s.lock);
    const size_t used = s.device_bytes + s.graph_bytes, total = device_memory_total();
    if (used > total || bytes > total - used) return 0;
    if (graph) {
        s.graph_bytes += bytes;
    } else {
        s.device_bytes += bytes;
        s.device_peak = std::max(s.device_peak, s.device_bytes);
    }
    return 1;
}

static void give_device_memory(size_t bytes, int graph)
{
    emu_state &s = state();
    std::lock_guard<std::mutex> g(s.lock);
    (graph ? s.graph_bytes : s.device_bytes) -= bytes;
}

static void record_allocation(void *p, size_t bytes, int pinned)
{
    emu_state &s = state();
    std::lock_guard<std::mutex> g(s.lock);
    s.allocs[(uintptr_t)p] = allocation{bytes, pinned};
}

static cudaError_t free_allocation(void *p, int pinned, const char *call)
{
    if (!p) return cudaSuccess;
    emu_state &s = state();
    {
        std::lock_guard<std::mutex> g(s.lock);
        auto it = s.allocs.find((uintptr_t)p);
        if (it == s.allocs.end() || it->second.pinned != pinned) {
            emu_report("%s(%p): not a pointer from %s", call, p, pinned ? "cudaMallocHost" : "cudaMalloc");
            return cudaErrorInvalidValue;
        }
        if (!pinned) s.device_bytes -= it->second.bytes;
        s.allocs.erase(it);
    }
    free(p);
    return cudaSuccess;
}

/* ---------- streams: run now, or record ---------- */

cudaError_t emu_submit(cudaStream_t stream, const char *name, std::shared_ptr<emu_body> work)
{
    if (sticky_error != cudaSuccess) return sticky_error;
    if (capturing_stream && stream != capturing_stream) {
        emu_report("%s on %s while another stream is captured", name, stream ? "another stream" : "the legacy stream");
        capturing_stream->invalidated = 1;
        return cudaErrorStreamCaptureImplicit;
    }
    if (stream && stream->capturing) {
        stream->recorded.push_back(std::move(work));
        stream->recorded_names.push_back(name);
        return cudaSuccess;
    }
    {
        emu_stats &st = stats();
        std::lock_guard<std::mutex> g(st.lock);
        if (launching_graph) st.graph_nodes_run++;
        else st.eager[name]++;
    }
    work->run();
    return sticky_error;
}

cudaError_t emu_submit_host_work(cudaStream_t s, const char *name, emu_body *work)
{
    return emu_submit(s, name, std::shared_ptr<emu_body>(work));
}

/* ---------- the runtime API ---------- */

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = sticky_error != cudaSuccess ? sticky_error : last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return sticky_error != cudaSuccess ? sticky_error : last_error; }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return "emulated CUDA error";
    }
}

cudaError_t cudaGetDeviceCount(int *count)
{
    const char *env = getenv("MR_EMU_DEVICES");
    *count = env ? atoi(env) : 1;
    return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device)
{
    int n = 0;
    cudaGetDeviceCount(&n);
    return device >= 0 && device < n ? cudaSuccess : cudaErrorInvalidDevice;
}

/* An sm_90 device (the H200 of tests/gpu); MR_EMU_SM=75 makes it a Turing
 * one (no TF32). */
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (cudaSetDevice(device) != cudaSuccess) return cudaErrorInvalidDevice;
    const char *env = getenv("MR_EMU_SM");
    int sm = env ? atoi(env) : 90;
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = sm / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *value = sm % 10; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = EMU_OPTIN_SHARED; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = EMU_DEFAULT_SHARED; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = (int)EMU_MAX_THREADS; break;
    default: *value = 0; break;
    }
    return cudaSuccess;
}

/* Beyond the device's memory: cudaErrorMemoryAllocation, also the thread's
 * last error (cudaGetLastError returns it once), as the runtime records
 * every call's error; not sticky. */
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = nullptr;
    if (capturing_stream) return refuse_in_capture("cudaMalloc");
    if (sticky_error != cudaSuccess) return sticky_error;
    if (!take_device_memory(bytes, 0)) {
        emu_set_launch_error(cudaErrorMemoryAllocation);
        return cudaErrorMemoryAllocation;
    }
    *p = malloc(bytes ? bytes : 1);
    if (!*p) {
        give_device_memory(bytes, 0);
        emu_set_launch_error(cudaErrorMemoryAllocation);
        return cudaErrorMemoryAllocation;
    }
    /* not zeros: a GPU's fresh memory holds whatever was there; all ones
     * bytes read as NaN (floats, halves) and -1 (ints), which the tests see */
    memset(*p, 0xFF, bytes);
    record_allocation(*p, bytes, 0);
    return cudaSuccess;
}

/* free: what cudaMalloc and instantiated graphs leave of the budget. */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes) return cudaErrorInvalidValue;
    if (sticky_error != cudaSuccess) return sticky_error;
    emu_state &s = state();
    std::lock_guard<std::mutex> g(s.lock);
    const size_t used = s.device_bytes + s.graph_bytes;
    *total_bytes = device_memory_total();
    *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (capturing_stream) return refuse_in_capture("cudaFree");
    return free_allocation(p, 0, "cudaFree");
}

/* Pinned host memory: not the device's, so outside its budget. */
cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    record_allocation(*p, bytes, 1);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) { return free_allocation(p, 1, "cudaFreeHost"); }

} // extern "C"

namespace {

struct copy_work : emu_body {
    void *dst;
    const void *src;
    size_t bytes;
    void run() override { memmove(dst, src, bytes); }
};

struct set_work : emu_body {
    void *dst;
    int value;
    size_t bytes;
    void run() override { memset(dst, value, bytes); }
};

} // namespace

extern "C" {

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    if (sticky_error != cudaSuccess) return sticky_error;
    if (bytes == 0) return cudaSuccess;
    allocation da, ra;
    const int d = find_allocation(dst, bytes, &da), r = find_allocation(src, bytes, &ra);
    const int dst_dev = d && !da.pinned, src_dev = r && !ra.pinned;
    int ok = kind == cudaMemcpyHostToDevice ? dst_dev && !src_dev
           : kind == cudaMemcpyDeviceToHost ? src_dev && !dst_dev
           : kind == cudaMemcpyDeviceToDevice ? src_dev && dst_dev
           : kind == cudaMemcpyDefault;
    if (!ok) {
        emu_report("cudaMemcpyAsync of %zu bytes, kind %d: %p -> %p are not the memory that kind names "
                   "(or run past its allocation)", bytes, (int)kind, src, dst);
        return emu_fault(cudaErrorInvalidValue);
    }
    if (capturing_stream && ((!dst_dev && !d) || (!src_dev && !r)))
        return refuse_in_capture("cudaMemcpyAsync to or from pageable host memory");
    auto w = std::make_shared<copy_work>();
    w->dst = dst, w->src = src, w->bytes = bytes;
    return emu_submit(s, "cudaMemcpyAsync", w);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    if (sticky_error != cudaSuccess) return sticky_error;
    if (bytes == 0) return cudaSuccess;
    cudaError_t e = emu_check_device_range(dst, bytes, "cudaMemsetAsync");
    if (e != cudaSuccess) return e;
    auto w = std::make_shared<set_work>();
    w->dst = dst, w->value = value, w->bytes = bytes;
    return emu_submit(s, "cudaMemsetAsync", w);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    *s = new CUstream_st();
    (*s)->capturing = 0;
    (*s)->invalidated = 0;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (s && s->capturing) return cudaErrorIllegalState;
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    if (capturing_stream) return refuse_in_capture("cudaStreamSynchronize");
    count_sync();
    return sticky_error;
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (capturing_stream) return refuse_in_capture("cudaDeviceSynchronize");
    count_sync();
    return sticky_error;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    if (!s) return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot be captured */
    if (mode != cudaStreamCaptureModeThreadLocal) {
        emu_report("cudaStreamBeginCapture: only the thread-local mode is emulated");
        return cudaErrorInvalidValue;
    }
    if (capturing_stream || s->capturing) return cudaErrorIllegalState;
    s->capturing = 1;
    s->invalidated = 0;
    s->recorded.clear();
    s->recorded_names.clear();
    capturing_stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    *graph = nullptr;
    if (!s || !s->capturing || capturing_stream != s) return cudaErrorIllegalState;
    s->capturing = 0;
    capturing_stream = nullptr;
    emu_stats &st = stats();
    std::lock_guard<std::mutex> g(st.lock);
    if (s->invalidated) {
        s->recorded.clear();
        st.captures_failed++;
        return cudaErrorStreamCaptureInvalidated;
    }
    std::map<std::string, long> by_name;
    for (const auto &n : s->recorded_names) by_name[n]++;
    std::string summary = std::to_string(s->recorded.size()) + " nodes:";
    for (const auto &n : by_name) summary += " " + n.first + " x" + std::to_string(n.second) + ";";
    st.captures.push_back(summary);
    st.captures_ok++;
    *graph = new CUgraph_st();
    (*graph)->nodes.swap(s->recorded);
    return cudaSuccess;
}

/* An executable graph takes device memory while it lives, as on a GPU:
 * EMU_GRAPH_NODE_BYTES a node. When that is not free it is refused with
 * cudaErrorMemoryAllocation (also the thread's last error; not sticky) and
 * *exec is left as it was. */
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    (void)flags;
    if (!graph || !exec) return cudaErrorInvalidValue;
    if (sticky_error != cudaSuccess) return sticky_error;
    const size_t bytes = graph->nodes.size() * EMU_GRAPH_NODE_BYTES;
    const int fits = take_device_memory(bytes, 1);
    {
        emu_stats &st = stats();
        std::lock_guard<std::mutex> g(st.lock);
        (fits ? st.instantiated : st.instantiate_failed)++;
    }
    if (!fits) {
        emu_set_launch_error(cudaErrorMemoryAllocation);
        return cudaErrorMemoryAllocation;
    }
    *exec = new CUgraphExec_st();
    (*exec)->nodes = graph->nodes;
    (*exec)->device_bytes = bytes;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    return cudaGraphInstantiateWithFlags(exec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    if (!exec) return cudaErrorInvalidValue;
    {
        emu_stats &st = stats();
        std::lock_guard<std::mutex> g(st.lock);
        st.graph_launches++;
    }
    launching_graph = 1;
    cudaError_t e = cudaSuccess;
    for (auto &node : exec->nodes) {
        e = emu_submit(s, "cudaGraphLaunch", node);
        if (e != cudaSuccess) break;
    }
    launching_graph = 0;
    return e;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    if (exec) give_device_memory(exec->device_bytes, 1);
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = new CUevent_st();
    (*e)->recorded = 0;
    (*e)->stamp = 0.0;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!e) return cudaErrorInvalidResourceHandle;
    if (s && s->capturing) return sticky_error; /* a dependency inside the graph; not a timed record */
    e->recorded = 1;
    e->stamp = host_seconds();
    return sticky_error;
}

namespace {

struct event_work : emu_body {
    cudaEvent_t event;
    void run() override
    {
        event->recorded = 1;
        event->stamp = host_seconds();
    }
};

} // namespace

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags)
{
    if (!e) return cudaErrorInvalidResourceHandle;
    if (flags & ~(unsigned)cudaEventRecordExternal) return cudaErrorInvalidValue;
    if (!(flags & cudaEventRecordExternal) || !s || !s->capturing) return cudaEventRecord(e, s);
    auto w = std::make_shared<event_work>();
    w->event = e;
    return emu_submit(s, "event record", w);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!start || !end || !ms) return cudaErrorInvalidResourceHandle;
    if (!start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
    *ms = (float)(1e3 * (end->stamp - start->stamp));
    return sticky_error;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!e) return cudaErrorInvalidResourceHandle;
    if (capturing_stream) return refuse_in_capture("cudaEventSynchronize");
    count_sync();
    return sticky_error;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

} // extern "C"
