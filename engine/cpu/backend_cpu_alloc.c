/* The CPU backend's allocator, its grow-only scratch buffers and its
 * one-off reorder, which backend_cpu.c (activation buffers),
 * backend_cpu_layers.c (weights, oneDNN scratch), backend_cpu_gemm.c and
 * backend_cpu_layout.c (blocked copies) all call: it sits below them, so
 * none calls back into another. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

/* What cpu_free_zeroed needs, in the 64 bytes before the array: the
 * mapping (or malloc block) it lies in and the mapping's length (0: a
 * malloc block); and the array's size. */
typedef struct {
    void *base;
    size_t mapped;
    size_t bytes;
} zeroed_header;

#define ZEROED_HEADER 64

/* Zeroing the arena with memset cost a full-size fp32 load 0.29 s of the
 * kernel clearing pages (bench/NOTES.md section 40), every page of it,
 * whether any input would reach it or not. A mapping of our own is zero
 * already: its header sits on the small page just below the huge-page
 * aligned array, which alone is marked for huge pages. */
void *cpu_alloc_zeroed(size_t bytes)
{
    if (bytes < CPU_HUGE_PAGE) {
        void *base = NULL;
        if (posix_memalign(&base, 64, bytes + ZEROED_HEADER) != 0) return NULL;
        memset(base, 0, bytes + ZEROED_HEADER);
        zeroed_header *h = base;
        h->base = base;
        h->mapped = 0;
        h->bytes = bytes;
        return (char *)base + ZEROED_HEADER;
    }
    size_t mapped = bytes + 2 * CPU_HUGE_PAGE;
    void *base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    uintptr_t at = ((uintptr_t)base + ZEROED_HEADER + CPU_HUGE_PAGE - 1) & ~(uintptr_t)(CPU_HUGE_PAGE - 1);
    zeroed_header *h = (zeroed_header *)(at - ZEROED_HEADER);
    h->base = base;
    h->mapped = mapped;
    h->bytes = bytes;
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)at, (uintptr_t)base + mapped - at, MADV_HUGEPAGE);
#endif
    return (void *)at;
}

size_t cpu_zeroed_bytes(const void *p)
{
    return ((const zeroed_header *)((const char *)p - ZEROED_HEADER))->bytes;
}

void cpu_free_zeroed(void *p)
{
    if (!p) return;
    const zeroed_header *h = (const zeroed_header *)((char *)p - ZEROED_HEADER);
    if (h->mapped) munmap(h->base, h->mapped);
    else free(h->base);
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
