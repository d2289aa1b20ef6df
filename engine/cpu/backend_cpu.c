/* The CPU backend's function table: host memory, oneDNN for convolutions
 * and GEMMs (backend_cpu_layers.c), OpenMP loops for the memory-bound ops
 * here. Its files' shared allocator is below them in backend_cpu_alloc.c. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/affine_fold.h"
#include "backend/backend_registry.h"
#include "cpu/backend_cpu.h"
#include "ops/image_preprocess.h"

static mr_status cpu_buffer_alloc(void *ctx, size_t bytes, void **out, mr_error *err)
{
    (void)ctx;
    void *p = cpu_alloc_zeroed(bytes);
    if (!p) return mr_fail(err, MR_ERR_OOM, "out of memory (%zu bytes)", bytes);
    *out = p;
    return MR_OK;
}

static void cpu_buffer_free(void *ctx, void *ptr)
{
    cpu_layout_freed(ctx, ptr);
    cpu_free_zeroed(ptr);
}

/* Copies to and from the host: the source is read as NHWC
 * (backend_cpu_layout.c); either side may be host memory the backend does
 * not know, which no record overlaps. */
static mr_status cpu_copy(void *ctx, void *dst, const void *src, size_t bytes, mr_error *err)
{
    MR_TRY(cpu_layout_nhwc(ctx, src, bytes, err));
    cpu_layout_written(ctx, dst, bytes);
    if (bytes) memmove(dst, src, bytes);
    return MR_OK;
}

static mr_status cpu_sync(void *ctx, mr_error *err)
{
    (void)ctx;
    (void)err;
    return MR_OK;
}

/* acc = max(acc, src) over 8 channels; NaN propagates, as in PyTorch. A
 * fixed width the compiler turns into vector compares and selects (the
 * per-channel scalar loop with its branch ran 72 ms on res1's 400x608x64
 * at 2 threads). */
static inline void max8(float *restrict acc, const float *restrict src)
{
#pragma omp simd
    for (int c = 0; c < 8; c++) acc[c] = src[c] > acc[c] || src[c] != src[c] ? src[c] : acc[c];
}

/* Max pooling in NHWC; padded taps never win (PyTorch's -inf padding). */
static mr_status cpu_max_pool(void *ctx, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    if (x->c != y->c || x->n != y->n) return mr_fail(err, MR_ERR_SHAPE, "max_pool: channel/batch mismatch");
    if (y->h != (x->h + 2 * p->pad - p->kernel) / p->stride + 1 || y->w != (x->w + 2 * p->pad - p->kernel) / p->stride + 1)
        return mr_fail(err, MR_ERR_SHAPE, "max_pool: a %dx%d input does not give a %dx%d output", x->h, x->w, y->h,
                       y->w);
    mr_tensor xv, yv; /* a blocked x runs as NHWC of one-block images (backend_cpu_layout.c) */
    MR_TRY(cpu_layout_channelwise(ctx, x, y, &xv, &yv, err));
    x = &xv;
    y = &yv;
    const int C = x->c, groups = C % 8 == 0 ? C / 8 : 0;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < y->n; n++) {
        for (int oy = 0; oy < y->h; oy++) {
            /* the taps inside the image: rows [ky0, ky1), per pixel columns [kx0, kx1) */
            const int iy0 = oy * p->stride - p->pad;
            const int ky0 = iy0 < 0 ? -iy0 : 0, ky1 = x->h - iy0 < p->kernel ? x->h - iy0 : p->kernel;
            for (int ox = 0; ox < y->w; ox++) {
                const int ix0 = ox * p->stride - p->pad;
                const int kx0 = ix0 < 0 ? -ix0 : 0, kx1 = x->w - ix0 < p->kernel ? x->w - ix0 : p->kernel;
                float *dst = y->data + (((size_t)n * y->h + oy) * y->w + ox) * C;
                /* the first tap inside the image; taps (ky, kx) from there */
                const int rows = ky1 - ky0, cols = kx1 - kx0;
                const float *at = rows > 0 && cols > 0
                                      ? x->data + (((size_t)n * x->h + iy0 + ky0) * x->w + ix0 + kx0) * C
                                      : x->data; /* no tap inside: never read */
                for (int g = 0; g < groups; g++) {
                    float acc[8] = {-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX};
                    for (int ky = 0; ky < rows; ky++)
                        for (int kx = 0; kx < cols; kx++) max8(acc, at + ((size_t)ky * x->w + kx) * C + 8 * g);
                    memcpy(dst + 8 * g, acc, sizeof acc);
                }
                if (groups) continue;
                for (int c = 0; c < C; c++) dst[c] = -FLT_MAX;
                for (int ky = 0; ky < rows; ky++)
                    for (int kx = 0; kx < cols; kx++) {
                        const float *src = at + ((size_t)ky * x->w + kx) * C;
                        for (int c = 0; c < C; c++) dst[c] = src[c] > dst[c] || src[c] != src[c] ? src[c] : dst[c];
                    }
            }
        }
    }
    return MR_OK;
}

/* PyTorch's nearest index: floor(dst * in/out) in float, clamped. */
static inline int nearest_index(int dst, int in, int out)
{
    if (in == out) return dst;
    if (out == 2 * in) return dst >> 1;
    float scale = (float)in / (float)out;
    int i = (int)floorf((float)dst * scale);
    return i < in - 1 ? i : in - 1;
}

static mr_status cpu_upsample_nearest(void *ctx, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    if (x->c != y->c || x->n != y->n) return mr_fail(err, MR_ERR_SHAPE, "upsample_nearest: channel/batch mismatch");
    mr_tensor xv, yv; /* a blocked x runs as NHWC of one-block images (backend_cpu_layout.c) */
    dnnl_data_type_t held;
    float step;
    size_t elem = sizeof(float);
    if (cpu_layout_held(ctx, x, &held, &step)) {
        /* the FPN's top-down map handed over in a reduced type (the lateral
         * conv that adds onto y reads it so): copied as it is */
        elem = held == dnnl_bf16 ? 2 : 1;
        MR_TRY(cpu_layout_will_be_reduced(ctx, y, held, step, err));
        xv = *x;
        yv = *y;
    } else {
        MR_TRY(cpu_layout_channelwise(ctx, x, y, &xv, &yv, err));
    }
    x = &xv;
    y = &yv;
    const size_t row = (size_t)x->c * elem;
    const char *xd = (const char *)x->data;
    char *yd = (char *)y->data;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < y->n; n++)
        for (int oy = 0; oy < y->h; oy++) {
            int iy = nearest_index(oy, x->h, y->h);
            for (int ox = 0; ox < y->w; ox++) {
                int ix = nearest_index(ox, x->w, y->w);
                memcpy(yd + (((size_t)n * y->h + oy) * y->w + ox) * row,
                       xd + (((size_t)n * x->h + iy) * x->w + ix) * row, row);
            }
        }
    return MR_OK;
}

/* The affine is always folded into the weights on the CPU (oneDNN's conv
 * takes a bias, and one pass is cheaper than two). */
static mr_status cpu_conv_init_affine(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                                      const float *bias, const float *scale, const float *shift, mr_layer **out,
                                      mr_error *err)
{
    if (p->cout < 1 || p->groups < 1 || p->kh < 1 || p->kw < 1 || p->cin % p->groups)
        return cpu_conv_init(ctx, name, p, w_oihw, bias, out, err); /* its shape error */
    size_t per_out = (size_t)(p->cin / p->groups) * (size_t)p->kh * (size_t)p->kw;
    float *w = malloc(sizeof(float) * (per_out * (size_t)p->cout + (size_t)p->cout));
    if (!w) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    float *b = w + per_out * (size_t)p->cout;
    affine_fold_conv(w_oihw, bias, scale, shift, per_out, p->cout, w, b);
    mr_status st = cpu_conv_init(ctx, name, p, w, b, out, err);
    free(w);
    return st;
}

/* A no-op: the CPU backend's scratch (oneDNN scratchpads, blocked copies,
 * the detection ops' scratch) is host memory, sized per primitive when a
 * new input shape first appears (backend_cpu.h), and steady-state passes
 * over a seen shape allocate nothing. */
static mr_status cpu_plan(void *ctx, const mr_backend_plan *p, mr_error *err)
{
    (void)ctx;
    (void)p;
    (void)err;
    return MR_OK;
}

/* Host memory is this backend's memory: image_preprocess writes the input
 * tensor in place, no staging copy. Its scratch is the ops' shared scratch
 * (only one op runs at a time), grown for a new largest image only. */
static mr_status cpu_preprocess(void *vctx, const mr_input_config *cfg, const mr_image *img,
                                const mr_input_geometry *geo, mr_tensor *input, mr_error *err)
{
    cpu_ctx *c = vctx;
    MR_TRY(image_preprocess_check(img, geo, input, err));
    MR_TRY(cpu_scratch_reserve(c, image_preprocess_scratch_bytes(geo), err));
    /* The input's memory is shared with tensors of the previous image's
     * later stages, some of which it left in the blocked layout: those
     * records go, or the first convolution would "unblock" the new input. */
    cpu_wrote(c, input);
    image_preprocess(cfg, img, geo, c->scratch, input);
    return MR_OK;
}

static void cpu_destroy(void *vctx)
{
    cpu_ctx *c = vctx;
    if (!c) return;
    if (c->stream) dnnl_stream_destroy(c->stream);
    if (c->engine) dnnl_engine_destroy(c->engine);
    free(c->scratch);
    free(c->blocked);
    free(c->lowp_src);
    free(c->post_scratch);
    free(c);
}

static void cpu_observe_conv_inputs(void *ctx, mr_conv_observer fn, void *user)
{
    cpu_ctx *c = ctx;
    c->observe = fn;
    c->observe_user = user;
}

static const mr_backend_i cpu_backend_i = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .sync = cpu_sync,
    .plan = cpu_plan,
    .conv_init = cpu_conv_init,
    .conv_init_affine = cpu_conv_init_affine,
    .linear_init = cpu_linear_init,
    .deconv2x2_init = cpu_deconv2x2_init,
    .group_norm_init = cpu_group_norm_init,
    .layer_free = cpu_layer_free,
    .conv = cpu_conv,
    .linear = cpu_linear,
    .deconv2x2 = cpu_deconv2x2,
    .group_norm = cpu_group_norm,
    .max_pool = cpu_max_pool,
    .upsample_nearest = cpu_upsample_nearest,
    .roi_align = cpu_roi_align,
    .rpn_proposals = cpu_rpn_proposals,
    .box_detections = cpu_box_detections,
    .mask_probs = cpu_mask_probs,
    .mask_class_probs = cpu_mask_class_probs,
    .mask_paste = cpu_mask_paste,
    .preprocess = cpu_preprocess,
    .observe_conv_inputs = cpu_observe_conv_inputs,
};

/* Whether oneDNN runs AVX-512 kernels: its effective instruction set, its
 * cap (ONEDNN_MAX_CPU_ISA) included. The channel block and our own
 * AVX-512 kernels follow it, not the processor: capped at AVX2, oneDNN has
 * no kernels for 16-channel blocks and takes its reference code, about
 * 100x slower (bench/NOTES.md section 28); and the cap then stands in for a
 * CPU without AVX-512 throughout. */
static int cpu_onednn_avx512(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core && __builtin_cpu_supports("avx512f");
}

int cpu_block_choose(void)
{
    const char *env = getenv("MR_CPU_BLOCK");
    if (env && (!strcmp(env, "8") || !strcmp(env, "16"))) return atoi(env);
    return cpu_onednn_avx512() ? 16 : 8;
}

/* oneDNN's effective instruction set (its DNNL_MAX_CPU_ISA cap included,
 * which is how tests stand in for a CPU without bf16) by name. */
static const char *cpu_isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "SSE4.1";
    case dnnl_cpu_isa_avx: return "AVX";
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2_VNNI";
    case dnnl_cpu_isa_avx512_core: return "AVX512_CORE";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX512_CORE_VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX512_CORE_BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AVX512_CORE_AMX";
    default: return "unknown";
    }
}

/* bf16 convolutions need AVX512_BF16 (or AMX, which implies it): oneDNN
 * 2.6 has no bf16 convolution below that, and emulating one would be
 * slower than fp32. */
static int cpu_has_bf16(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

/* VNNI (AVX512_VNNI, or AVX-VNNI on AVX2 parts) sums u8 x s8 products
 * straight into s32; without it oneDNN pairs them in int16 first. */
static int cpu_has_vnni(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
           (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

mr_status backend_cpu_open(const mr_backend_params *p, mr_backend *out, mr_error *err)
{
    int threads = p->threads, block = p->cpu_block;
    if (block != 0 && block != 8 && block != 16)
        return mr_fail(err, MR_ERR_RANGE, "cpu backend: channel block %d (8 or 16)", block);
    if (p->precision != MR_PRECISION_DEFAULT && p->precision != MR_PRECISION_FP32 &&
        p->precision != MR_PRECISION_BF16 && p->precision != MR_PRECISION_INT8)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "cpu backend: computes in fp32, bf16 or int8, not precision %d",
                       (int)p->precision);
    if (p->precision == MR_PRECISION_BF16 && !cpu_has_bf16())
        return mr_fail(err, MR_ERR_UNSUPPORTED, "precision bf16 needs a CPU with AVX512_BF16 or AMX, and this "
                       "one has neither (oneDNN's instruction set here: %s); fp32 runs everywhere",
                       cpu_isa_name(dnnl_get_effective_cpu_isa()));
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return mr_fail(err, MR_ERR_OOM, "out of memory");
    c->bf16 = p->precision == MR_PRECISION_BF16;
    c->int8 = p->precision == MR_PRECISION_INT8;
    c->int8_vnni = cpu_has_vnni();
    __builtin_cpu_init();
    /* OpenMP's thread count is per process: oneDNN and our loops share it. */
    if (threads > 0) omp_set_num_threads(threads);
    c->threads = threads > 0 ? threads : omp_get_max_threads();
    c->block = block ? block : cpu_block_choose();
    const char *avx512 = getenv("MR_CPU_AVX512");
    c->avx512 = cpu_onednn_avx512() && !(avx512 && !strcmp(avx512, "0"));
    if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) != dnnl_success) {
        cpu_destroy(c);
        return mr_fail(err, MR_ERR_BACKEND, "cpu backend: oneDNN engine could not be created");
    }
    out->i = &cpu_backend_i;
    out->ctx = c;
    return MR_OK;
}
