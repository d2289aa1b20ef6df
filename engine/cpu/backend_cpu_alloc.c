/* The CPU backend's allocator and its grow-only scratch buffers, which
 * backend_cpu.c (activation buffers), backend_cpu_layers.c (weights,
 * oneDNN scratch) and backend_cpu_layout.c (blocked copies) all call: it
 * sits below them, so none calls back into another. */
#include <stdlib.h>
#include <sys/mman.h>

#include "cpu/backend_cpu.h"

/* Why huge pages: a convolution or RoIAlign over a blocked map touches a
 * new 4 KiB page every few vectors (P2 is 62 MB, 32 planes of 1.9 MB;
 * the Winograd weights of one layer 9-38 MB), more pages than the TLB
 * holds. Debian's default for transparent huge pages is "madvise", so
 * without the call they never happen. Measured end to end at 800x1216,
 * 2 threads: bench/NOTES.md section 10. The call is advice: where the
 * kernel has none to give, the memory works as before. */
void *cpu_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes < CPU_HUGE_PAGE) return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
    if (posix_memalign(&p, CPU_HUGE_PAGE, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    size_t page = 4096;
    (void)madvise(p, (bytes + page - 1) / page * page, MADV_HUGEPAGE);
#endif
    return p;
}

/* Grows *buf (holding *size bytes) to at least `bytes`; the old contents
 * are dropped. `what` names it in the out-of-memory message. */
static mr_status grow(void **buf, size_t *size, size_t bytes, const char *what, mr_error *err)
{
    if (bytes <= *size) return MR_OK;
    void *p = cpu_alloc(bytes);
    if (!p) return mr_fail(err, MR_ERR_OOM, "out of memory (%zu bytes of %s)", bytes, what);
    free(*buf);
    *buf = p;
    *size = bytes;
    return MR_OK;
}

mr_status cpu_scratch_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err)
{
    return grow(&ctx->scratch, &ctx->scratch_size, bytes, "scratch", err);
}

mr_status cpu_blocked_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err)
{
    return grow(&ctx->blocked, &ctx->blocked_size, bytes, "blocked-layout room", err);
}

mr_status cpu_lowp_src_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err)
{
    return grow(&ctx->lowp_src, &ctx->lowp_src_size, bytes, "reduced-precision input", err);
}
