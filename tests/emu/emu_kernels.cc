/* The CUDA emulator's kernels (tests/emu/README.md): a launch's grid run on
 * the CPU, one thread at a time. A kernel without barriers runs each
 * thread to its end in turn; one whose body calls __syncthreads
 * (rewrite_launches.py marks it) runs its block's threads as ucontext
 * fibers: each runs until it reaches the barrier or ends, then the next,
 * and the barrier opens once every thread still running has reached it.
 * Blocks run one after another on the launching host thread, so a kernel's
 * __shared__ variables (thread_local statics, emu_device.h) are its block's
 * shared memory; all the state of a run is the launching thread's, so host
 * threads driving their own streams run kernels at once. Before a launch is accepted: its
 * configuration (threads a block, grid extents, dynamic shared memory
 * against the kernel's limit) and every pointer argument (it must point
 * into memory from cudaMalloc or cudaMallocHost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "emu_device.h"
#include "emu_internal.h"

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace {

constexpr size_t FIBER_STACK = 256 * 1024;

std::mutex shared_lock;
std::map<const void *, int> max_dynamic_shared; /* cudaFuncSetAttribute, per kernel */

enum fiber_state { FIBER_READY, FIBER_AT_BARRIER, FIBER_DONE };

struct fiber {
    ucontext_t ctx;
    fiber_state state;
    uint3 idx;
};

/* One block's fibers and its scheduler (the kernel body runs in them). */
struct block_runner {
    ucontext_t scheduler;
    std::vector<fiber> fibers;
    std::vector<char> stacks;
    fiber *current = nullptr;
    emu_body *body = nullptr;
};

thread_local block_runner *running_block = nullptr;
thread_local std::vector<unsigned char> dynamic_shared;

void fiber_main()
{
    block_runner *b = running_block;
    b->body->run();
    b->current->state = FIBER_DONE; /* uc_link returns to the scheduler */
}

/* Runs the threads of one block as fibers: each runs until it reaches a
 * barrier or ends; then the next; a barrier opens once every thread still
 * running has reached it (threads that ended do not hold it, as on sm_70+). */
void run_block_fibers(block_runner &b, unsigned nthreads, const std::vector<unsigned> &order)
{
    if (b.fibers.size() < nthreads) {
        b.fibers.resize(nthreads);
        b.stacks.resize((size_t)nthreads * FIBER_STACK);
    }
    for (unsigned t = 0; t < nthreads; t++) {
        fiber &f = b.fibers[t];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = b.stacks.data() + (size_t)t * FIBER_STACK;
        f.ctx.uc_stack.ss_size = FIBER_STACK;
        f.ctx.uc_link = &b.scheduler;
        makecontext(&f.ctx, fiber_main, 0);
        f.state = FIBER_READY;
        f.idx = make_uint3(t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y));
    }
    for (;;) {
        unsigned live = 0;
        for (unsigned t : order) {
            fiber &f = b.fibers[t];
            if (f.state == FIBER_DONE) continue;
            f.state = FIBER_READY;
            threadIdx = f.idx;
            b.current = &f;
            swapcontext(&b.scheduler, &f.ctx);
            if (f.state != FIBER_DONE) live++;
        }
        if (!live) return;
    }
}

/* MR_EMU_ORDER: the order blocks, and threads within a block, run in:
 * "forward" (default), "reverse", or "shuffle" (a fixed permutation that
 * differs per position). A kernel whose result changes with the order has
 * threads that depend on each other without a barrier: a race on a GPU. */
int order_mode()
{
    static int mode = [] {
        const char *e = getenv("MR_EMU_ORDER");
        if (!e || !strcmp(e, "forward")) return 0;
        if (!strcmp(e, "reverse")) return 1;
        if (!strcmp(e, "shuffle")) return 2;
        emu_report("MR_EMU_ORDER=%s: not forward, reverse or shuffle; running forward", e);
        return 0;
    }();
    return mode;
}

/* The run order of n items: the i-th to run is at(i), a bijection of
 * [0, n). The shuffle is i*p + n/2 mod n for a p coprime with n. */
struct run_order {
    unsigned long long n, p;
    explicit run_order(unsigned long long count) : n(count), p(1)
    {
        if (order_mode() != 2 || n < 2) return;
        p = 0x9E3779B1ull % n;
        while (p == 0 || std::__gcd(p, n) != 1) p = (p + 1) % n;
    }
    unsigned long long at(unsigned long long i) const
    {
        switch (order_mode()) {
        case 1: return n - 1 - i;
        case 2: return (i * p + n / 2) % n;
        default: return i;
        }
    }
};

struct grid_work : emu_body {
    std::shared_ptr<emu_body> body;
    const char *name;
    dim3 grid, block;
    size_t shared;
    int fibers;
    void run() override
    {
        gridDim = grid;
        blockDim = block;
        const unsigned nthreads = block.x * block.y * block.z;
        dynamic_shared.assign(shared ? shared : 1, 0xA5); /* not zero: shared memory starts undefined */
        block_runner runner;
        runner.body = body.get();
        running_block = fibers ? &runner : nullptr;
        const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
        const run_order block_order(blocks), thread_order(nthreads);
        std::vector<unsigned> order(nthreads);
        for (unsigned t = 0; t < nthreads; t++) order[t] = (unsigned)thread_order.at(t);
        for (unsigned long long bi = 0; bi < blocks; bi++) {
            unsigned long long b = block_order.at(bi);
            blockIdx = make_uint3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                                  (unsigned)(b / ((unsigned long long)grid.x * grid.y)));
            if (fibers) {
                run_block_fibers(runner, nthreads, order);
                continue;
            }
            for (unsigned t : order) {
                threadIdx = make_uint3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                body->run();
            }
        }
        running_block = nullptr;
    }
};

} // namespace

void emu_syncthreads(void)
{
    block_runner *b = running_block;
    if (!b) {
        emu_report("__syncthreads in a kernel launched without fibers (rewrite_launches.py missed it)");
        abort();
    }
    fiber *f = b->current;
    f->state = FIBER_AT_BARRIER;
    swapcontext(&f->ctx, &b->scheduler);
}

void *emu_dynamic_shared(void) { return dynamic_shared.data(); }

static int dynamic_shared_limit(const void *kernel)
{
    std::lock_guard<std::mutex> g(shared_lock);
    auto it = max_dynamic_shared.find(kernel);
    return it == max_dynamic_shared.end() ? EMU_DEFAULT_SHARED : it->second;
}

void emu_submit_kernel(const void *kernel, const char *name, const emu_config &cfg, int fibers,
                       const void *const *param_ptrs, int count, emu_body *body)
{
    std::shared_ptr<emu_body> owned(body);
    const dim3 g = cfg.grid, b = cfg.block;
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (threads == 0 || threads > EMU_MAX_THREADS || b.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 ||
        g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
        emu_report("kernel %s: bad launch configuration (grid %u,%u,%u, block %u,%u,%u)", name, g.x, g.y, g.z, b.x,
                   b.y, b.z);
        emu_set_launch_error(cudaErrorInvalidConfiguration);
        return;
    }
    if (cfg.shared > (size_t)dynamic_shared_limit(kernel)) {
        emu_report("kernel %s: %zu bytes of dynamic shared memory, more than its limit %d", name, cfg.shared,
                   dynamic_shared_limit(kernel));
        emu_set_launch_error(cudaErrorInvalidValue);
        return;
    }
    for (int i = 0; i < count; i++) {
        if (!param_ptrs[i] || emu_is_allocated(param_ptrs[i])) continue;
        emu_report("kernel %s: pointer argument %d (%p) is not device memory", name, i + 1, param_ptrs[i]);
        emu_fault(cudaErrorIllegalAddress);
        return;
    }
    auto w = std::make_shared<grid_work>();
    w->body = owned;
    w->name = name;
    w->grid = g;
    w->block = b;
    w->shared = cfg.shared;
    w->fibers = fibers;
    cudaError_t e = emu_submit(cfg.stream, name, w);
    if (e != cudaSuccess) emu_set_launch_error(e);
}

extern "C" cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || value > EMU_OPTIN_SHARED) return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> g(shared_lock);
    max_dynamic_shared[func] = value;
    return cudaSuccess;
}
