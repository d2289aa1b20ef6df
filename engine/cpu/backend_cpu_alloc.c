/* The CPU backend's allocator, its grow-only scratch buffers and its
 * one-off reorder, which backend_cpu.c (activation buffers),
 * backend_cpu_layers.c (weights, oneDNN scratch), backend_cpu_gemm.c and
 * backend_cpu_layout.c (blocked copies) all call: it sits below them, so
 * none calls back into another. */
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

mr_status cpu_reorder_once(const cpu_ctx *c, const char *name, const dnnl_memory_desc_t *from_md, const void *from,
                           const dnnl_memory_desc_t *to_md, void *to, mr_error *err)
{
    mr_status st = MR_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, dst = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from_md, c->engine, to_md, c->engine, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&prim, pd);
    if (s == dnnl_success) s = dnnl_memory_create(&src, from_md, c->engine, (void *)from);
    if (s == dnnl_success) s = dnnl_memory_create(&dst, to_md, c->engine, to);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
        s = dnnl_primitive_execute(prim, c->stream, 2, args);
    }
    if (s == dnnl_success) s = dnnl_stream_wait(c->stream);
    if (s != dnnl_success) st = mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN weight reorder failed (status %d)", name, (int)s);
    if (src) dnnl_memory_destroy(src);
    if (dst) dnnl_memory_destroy(dst);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st;
}
