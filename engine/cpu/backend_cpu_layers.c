/* The CPU backend's layers: convolutions through oneDNN (activations in
 * nChw8c where the channels allow, else NHWC: backend_cpu_layout.c; weights
 * reordered once into the layout the primitive prefers; bias, residual sum
 * and ReLU as post-ops of the same pass), or, for 3x3 stride-1 ones, our
 * Winograd F(4x4,3x3) (conv_winograd.c, same fusions); fully connected
 * layers and the 2x2 stride-2 transposed convolution through oneDNN's
 * sgemm. */
#include <stdio.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"
#include "cpu/conv_winograd.h"

#define DNNL_TRY(call, what)                                                                      \
    do {                                                                                          \
        dnnl_status_t s_ = (call);                                                                \
        if (s_ != dnnl_success) {                                                                 \
            st = mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN %s failed (status %d)", layer->name, what, \
                         (int)s_);                                                                \
            goto done;                                                                            \
        }                                                                                         \
    } while (0)

static mr_layer *layer_new(cpu_layer_kind kind, const char *name, size_t wbytes, size_t bcount)
{
    mr_layer *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->kind = kind;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->weights = cpu_alloc(wbytes);
    l->bias = calloc(bcount, sizeof(float));
    if (!l->weights || !l->bias) {
        free(l->weights);
        free(l->bias);
        free(l);
        return NULL;
    }
    return l;
}

/* Whether a convolution runs as Winograd F(4x4,3x3) (conv_winograd.h): a
 * 3x3 stride-1 pad-1 convolution on blocked channels (multiples of the
 * block), on
 * a CPU with AVX2 and FMA, unless MR_CPU_WINOGRAD=0. It was faster than
 * oneDNN's direct convolution at every R-101-FPN shape measured at
 * 800x1216, 2 threads (bench/NOTES.md section 6: 1.4x for the RPN conv on
 * P6's 13x19 to 2.5x on P2, 1.7x on res2's 64 channels, 2.1x on the mask
 * head's 100 RoIs of 14x14), so there is no size rule: such a layer keeps
 * only its Winograd weights (4x the plain ones) and runs every input
 * shape that way (an input under one 4x4 tile is mostly padding, but no
 * model shape is that small). */
static int wino_use(const cpu_ctx *c, const mr_conv_params *p)
{
    if (p->kh != 3 || p->kw != 3 || p->stride != 1 || p->pad != 1 || p->dilation != 1 || p->groups != 1 ||
        p->cin % c->block || p->cout % c->block)
        return 0;
    const char *env = getenv("MR_CPU_WINOGRAD");
    if (env && !strcmp(env, "0")) return 0;
    return wino_cpu_supported();
}

/* The range an int8 layer quantizes its input at: the one its input's
 * readers share (the residual stream) where maps are handed over quantized
 * (VNNI), so that the stream's writer and every reader agree on its step;
 * else its own calibrated one, which is finer. */
static float int8_input_range(const cpu_ctx *c, const mr_conv_params *p)
{
    return c->int8_vnni && p->int8_shared_range > 0.0f && isfinite(p->int8_shared_range) ? p->int8_shared_range
                                                                                          : p->int8_range;
}

/* An int8 layer's weights: s8 OIHW, one symmetric scale per output channel
 * (its largest |w| maps to qmax), rounded to nearest even; the bias in
 * accumulator units and the output scales (backend_cpu.h: mr_layer.int8). */
static void int8_weights(mr_layer *l, const mr_conv_params *p, float in_range, const float *w, int qmax)
{
    const size_t per_out = (size_t)(p->cin / p->groups) * (size_t)p->kh * (size_t)p->kw;
    int8_t *q = (int8_t *)l->weights;
    l->src_scale = in_range / (p->int8_signed ? 127.0f : 255.0f);
    const float hi = (float)qmax;
#pragma omp parallel for schedule(static)
    for (int oc = 0; oc < p->cout; oc++) {
        const float *row = w + (size_t)oc * per_out;
        int8_t *qrow = q + (size_t)oc * per_out;
        float amax = cpu_abs_max(row, per_out);
        float ws = amax > 0.0f ? amax / hi : 1.0f;
#pragma omp simd
        for (size_t i = 0; i < per_out; i++) {
            float v = cpu_round_even(row[i] / ws);
            qrow[i] = (int8_t)(v > hi ? hi : v < -hi ? -hi : v);
        }
        l->out_scales[oc] = l->src_scale * ws;
        l->bias[oc] /= l->out_scales[oc];
    }
}

mr_status cpu_conv_init(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                        const float *bias, mr_layer **out, mr_error *err)
{
    const cpu_ctx *c = ctx;
    if (p->groups < 1 || p->cin % p->groups || p->cout % p->groups)
        return mr_fail(err, MR_ERR_SHAPE, "%s: %d groups do not divide %d->%d channels", name, p->groups, p->cin,
                       p->cout);
    size_t wcount = (size_t)p->cout * (size_t)(p->cin / p->groups) * (size_t)p->kh * (size_t)p->kw;
    /* Without VNNI, oneDNN's int8 direct 3x3 is no faster than our fp32
     * Winograd and the quantizing pass comes on top: such layers stay
     * Winograd (bench/NOTES.md section 22); a table, not a measurement.
     * So do narrow outputs (the RPN's predictors, 3 and 12 channels, read
     * the Winograd conv's blocked map as it is: int8 would turn it back
     * and quantize it per level, and with 63-step weights it moved a demo
     * detection's score from 0.85 to 0.24: section 39). */
    int bf16 = c->bf16 && !p->keep_fp32;
    int int8 = c->int8 && !p->keep_fp32 && (c->int8_vnni || (!wino_use(c, p) && p->cout % c->block == 0));
    if (c->int8 && !p->keep_fp32 && !(p->int8_range > 0.0f && isfinite(p->int8_range)))
        return mr_fail(err, MR_ERR_CONFIG, "%s: precision int8 needs this layer's calibrated input range, and it "
                       "has none", name);
    /* A Winograd layer keeps only its transformed weights: no plain copy
     * (not even one made and freed here, which would raise glibc's mmap
     * threshold and make later large buffers fault in afresh every run). */
    int wino = !bf16 && !int8 && wino_use(c, p);
    size_t wbytes = wino ? sizeof(float) : int8 ? wcount : sizeof(float) * wcount;
    mr_layer *l = layer_new(CPU_LAYER_CONV, name, wbytes, (size_t)p->cout);
    if (!l) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    l->conv = *p;
    l->bf16 = bf16;
    l->int8 = int8;
    l->out_handoff = bf16 && p->out_to_convs ? dnnl_bf16 : dnnl_data_type_undef;
    if (bias) memcpy(l->bias, bias, sizeof(float) * (size_t)p->cout);
    if (int8) {
        l->out_scales = calloc((size_t)p->cout, sizeof(float));
        if (!l->out_scales) {
            cpu_layer_free(ctx, l);
            return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
        }
        int8_weights(l, p, int8_input_range(c, p), w_oihw, c->int8_vnni || p->int8_signed ? 127 : 63);
        /* Its reader runs int8 whatever its shape only with VNNI (else a
         * 3x3 stride-1 reader stays fp32 Winograd, and a quantized map would
         * only be expanded again). */
        if (p->int8_out_range > 0.0f && isfinite(p->int8_out_range) && c->int8_vnni) {
            l->out_scales_q = calloc((size_t)p->cout, sizeof(float));
            if (!l->out_scales_q) {
                cpu_layer_free(ctx, l);
                return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
            }
            l->out_handoff = p->int8_out_signed ? dnnl_s8 : dnnl_u8;
            l->out_step = p->int8_out_range / (p->int8_out_signed ? 127.0f : 255.0f);
            for (int oc = 0; oc < p->cout; oc++) l->out_scales_q[oc] = l->out_scales[oc] / l->out_step;
        }
    } else if (!wino) {
        memcpy(l->weights, w_oihw, sizeof(float) * wcount);
    }
    dnnl_status_t ds;
    dnnl_data_type_t wdt = int8 ? dnnl_s8 : dnnl_f32;
    if (p->groups == 1) {
        dnnl_dims_t wd = {p->cout, p->cin, p->kh, p->kw};
        ds = dnnl_memory_desc_init_by_tag(&l->weights_md, 4, wd, wdt, dnnl_oihw);
    } else {
        dnnl_dims_t wd = {p->groups, p->cout / p->groups, p->cin / p->groups, p->kh, p->kw};
        ds = dnnl_memory_desc_init_by_tag(&l->weights_md, 5, wd, wdt, dnnl_goihw);
    }
    if (ds != dnnl_success) {
        cpu_layer_free(ctx, l);
        return mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN weights descriptor failed", name);
    }
    if (wino) {
        mr_wino_params wp = {p->cin, p->cout, p->relu, c->block, c->avx512, 0};
        l->wino_u = cpu_alloc(sizeof(float) * wino_weights_floats(&wp));
        if (!l->wino_u) {
            cpu_layer_free(ctx, l);
            return mr_fail(err, MR_ERR_OOM, "%s: out of memory (Winograd weights)", name);
        }
        wino_weights_transform(&wp, w_oihw, l->wino_u);
        free(l->weights);
        l->weights = NULL;
    }
    *out = l;
    return MR_OK;
}

/* A GEMM layer's precision (linear, deconv): the context's bf16 or int8
 * unless keep_fp32; int8 needs the input's calibrated range, as a conv
 * does. Without VNNI a fully connected layer stays fp32: oneDNN's AVX2
 * int8 matmul ran the full-size fc6 ([128 x 12544] x [12544 x 1024] chunks,
 * s8 input) at 26 ms a chunk in a pass, the box head 1.22x its fp32 time
 * (bench/NOTES.md section 37); the deconvolution's int8 paid (0.87x), and
 * stays int8. Sets l->bf16 / l->int8. */
static mr_status gemm_layer_precision(const cpu_ctx *c, mr_layer *l, int keep_fp32, float int8_range,
                                      mr_error *err)
{
    l->bf16 = c->bf16 && !keep_fp32;
    l->int8 = c->int8 && !keep_fp32 && (c->int8_vnni || l->kind != CPU_LAYER_LINEAR);
    if (c->int8 && !keep_fp32 && !(int8_range > 0.0f && isfinite(int8_range)))
        return mr_fail(err, MR_ERR_CONFIG, "%s: precision int8 needs this layer's calibrated input range, and it "
                       "has none", l->name);
    return MR_OK;
}

/* The fully connected layers' rows (RoIs) per reduced-precision chunk:
 * oneDNN's AMX matmul ran the box head's fc6 fastest at 128 rows of the
 * shapes tried (64 to 1000; bench/NOTES.md section 35), and a 1000-RoI
 * image wastes 24 padded rows. */
#define LINEAR_LOWP_ROWS 128

mr_status cpu_linear_init(void *ctx, const char *name, const mr_linear_params *p, const float *w,
                          const float *bias, mr_layer **out, mr_error *err)
{
    const cpu_ctx *c = ctx;
    mr_layer *l = calloc(1, sizeof *l);
    if (!l) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    l->kind = CPU_LAYER_LINEAR;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->linear = *p;
    mr_status st = gemm_layer_precision(c, l, p->keep_fp32, p->int8_range, err);
    if (st == MR_OK && cpu_layer_reduced(l)) { /* bias and ReLU fused */
        st = cpu_gemm_lowp_init(c, name, &l->gemm, p->in, p->out, LINEAR_LOWP_ROWS, w, 1, 1, bias, p->relu,
                                p->int8_range, p->int8_signed, err);
    } else if (st == MR_OK) {
        l->weights = cpu_alloc(sizeof(float) * (size_t)p->in * (size_t)p->out);
        l->bias = calloc((size_t)p->out, sizeof(float));
        if (!l->weights || !l->bias) st = mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
        else {
            memcpy(l->weights, w, sizeof(float) * (size_t)p->in * (size_t)p->out);
            if (bias) memcpy(l->bias, bias, sizeof(float) * (size_t)p->out);
        }
    }
    if (st != MR_OK) {
        cpu_layer_free(ctx, l);
        return st;
    }
    *out = l;
    return MR_OK;
}

/* The deconvolution's input pixels per reduced-precision chunk: two 14x14
 * RoIs. oneDNN's AMX matmul [rows x 256] x [256 x 1024] ran 0.77-0.91 T int8
 * multiply-adds/s at 196 to 1960 rows (bench/NOTES.md section 35); two RoIs
 * keep the fp32 result (1.6 MB) in cache for the depth-to-space pass. */
#define DECONV_LOWP_ROWS 392

mr_status cpu_deconv2x2_init(void *ctx, const char *name, const mr_deconv2x2_params *p, const float *w,
                             const float *bias, mr_layer **out, mr_error *err)
{
    const cpu_ctx *c = ctx;
    size_t cin = (size_t)p->cin, cout = (size_t)p->cout;
    mr_layer *l = layer_new(CPU_LAYER_DECONV2X2, name, sizeof(float) * cin * 4 * cout, cout);
    if (!l) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    l->deconv = *p;
    /* [cin, cout, 2, 2] -> [cin, (i*2+j)*cout + co]: one GEMM gives all four taps. */
    for (size_t ci = 0; ci < cin; ci++)
        for (size_t co = 0; co < cout; co++)
            for (size_t k = 0; k < 4; k++) l->weights[ci * 4 * cout + k * cout + co] = w[(ci * cout + co) * 4 + k];
    if (bias) memcpy(l->bias, bias, sizeof(float) * cout);
    mr_status st = gemm_layer_precision(c, l, p->keep_fp32, p->int8_range, err);
    /* bias and ReLU stay in the depth-to-space pass, in fp32 */
    if (st == MR_OK && cpu_layer_reduced(l))
        st = cpu_gemm_lowp_init(c, name, &l->gemm, p->cin, 4 * p->cout, DECONV_LOWP_ROWS, l->weights, 0, 0, NULL,
                                0, p->int8_range, p->int8_signed, err);
    if (st == MR_OK && cpu_layer_reduced(l)) {
        free(l->weights);
        l->weights = NULL;
    }
    if (st != MR_OK) {
        cpu_layer_free(ctx, l);
        return st;
    }
    *out = l;
    return MR_OK;
}

static void cache_clear(mr_layer *l)
{
    for (int i = 0; i < l->cache_count; i++) {
        dnnl_primitive_destroy(l->cache[i].prim);
        if (l->cache[i].src_convert) dnnl_primitive_destroy(l->cache[i].src_convert);
        if (l->cache[i].owns_weights) free(l->cache[i].weights);
    }
    l->cache_count = 0;
}

void cpu_layer_free(void *ctx, mr_layer *l)
{
    (void)ctx;
    if (!l) return;
    cache_clear(l);
    free(l->weights);
    free(l->bias);
    free(l->wino_u);
    free(l->out_scales);
    free(l->out_scales_q);
    cpu_gemm_lowp_free(&l->gemm);
    free(l);
}

/* Reorders the master weights into layout `want` (a new buffer). */
static mr_status reorder_weights(cpu_ctx *c, mr_layer *layer, const dnnl_memory_desc_t *want, float **out,
                                 mr_error *err)
{
    void *buf = cpu_alloc(dnnl_memory_desc_get_size(want));
    if (!buf) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", layer->name);
    mr_status st = cpu_reorder_once(c, layer->name, &layer->weights_md, layer->weights, want, buf, err);
    if (st != MR_OK) free(buf);
    else *out = buf;
    return st;
}

/* A narrow output (channels not a multiple of the block) of a blocked input runs
 * blocked into padded scratch: cheaper than turning x back to NHWC (the RPN
 * hidden map at P2 is 62 MB; its heads write 3 and 12 channels). */
static int conv_narrow_from_blocked(const cpu_ctx *c, const mr_layer *l, const mr_tensor *x, int accumulate)
{
    const mr_conv_params *p = &l->conv;
    return !cpu_layer_reduced(l) && p->groups == 1 && p->cin % c->block == 0 && p->cout % c->block != 0 &&
           !accumulate &&
           cpu_layout_is_blocked(c, x);
}

/* y (NHWC) from its blocked copy with the channels padded to a multiple of B. */
static void unblock_padded(const float *blk, int B, const mr_tensor *y)
{
    const int C = y->c, blocks = (C + B - 1) / B;
    const size_t hw = (size_t)y->h * y->w;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < y->n; n++)
        for (size_t i = 0; i < hw; i++) {
            float *o = y->data + ((size_t)n * hw + i) * C;
            for (int ch = 0; ch < C; ch++) o[ch] = blk[(((size_t)n * blocks + ch / B) * hw + i) * B + ch % B];
        }
}

/* A blocked convolution's operands in the blocked layout (turned in place if need be),
 * y's memory recorded as what it is about to hold. */
static mr_status blocked_output(cpu_ctx *c, mr_tensor *y, const mr_tensor *keep, int accumulate, mr_error *err)
{
    if (accumulate) return cpu_layout_blocked(c, y, keep, err);
    return cpu_layout_will_be_blocked(c, y, keep, err);
}

static mr_status blocked_operands(cpu_ctx *c, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err)
{
    MR_TRY(cpu_layout_blocked(c, x, y, err));
    return blocked_output(c, y, x, accumulate, err);
}

/* Whether an int8 conv's primitive for this output takes its scales at
 * run time (cpu_conv_entry.runtime_scales). Making int8 primitives is most
 * of what small inputs pay for int8 (bench/NOTES.md section 36: a 3x3 conv's
 * takes 1.5-8 ms, and every layer made its own for every input shape), and
 * with scales at run time identical layers share one. It costs run time
 * where the output is large: the multiply as a post-op ran 10-50% slower on
 * the full-size res2-res4 1x1 convs with a residual sum, and as fast or
 * faster at or below about a thousand output pixels (res4 and res5 of a
 * 224x320 input, res5 at 800x1216). */
#define RUNTIME_SCALES_MAX_PIXELS 1024

static int runtime_scales_use(const mr_layer *l, const mr_tensor *y)
{
    return l->int8 && (size_t)y->n * (size_t)y->h * (size_t)y->w <= RUNTIME_SCALES_MAX_PIXELS;
}

/* int8 convolutions with less work than this take oneDNN's first
 * implementation that is not brgemm (on AMX its plain `jit` and `jit_1x1`
 * kernels) instead of brgemm, its first choice. A brgemm primitive holds
 * about 200 KB of kernels and tables, made anew for every input shape: on
 * the demo model's small scenes (5 input shapes) int8 held 180 MB against
 * fp32's 110, with the plain kernels for its convs (0.24 G multiply-adds at
 * most) 91 MB, at 1.05-1.1x the time. Full-size R-101's convs are 0.25 G
 * and up, where brgemm's speed counts, but the RPN conv on P6 and the
 * predictors (+1 ms; bench/NOTES.md section 39). */
#define INT8_PLAIN_KERNEL_MACS 200000000.0

static int int8_plain_kernel(const mr_layer *l, const mr_tensor *y)
{
    const mr_conv_params *p = &l->conv;
    double macs = (double)y->n * y->h * y->w * (double)(p->cin / p->groups) * p->cout * p->kh * p->kw;
    return l->int8 && macs < INT8_PLAIN_KERNEL_MACS;
}

/* The convolution's first implementation that is not brgemm, or its first
 * where it has no other. */
static mr_status plain_impl_desc(const cpu_ctx *c, const mr_layer *layer, const dnnl_convolution_desc_t *cd,
                                 const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *out, mr_error *err)
{
    dnnl_primitive_desc_iterator_t it = NULL;
    if (dnnl_primitive_desc_iterator_create(&it, cd, attr, c->engine, NULL) != dnnl_success)
        return mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN convolution failed (no implementation)", layer->name);
    dnnl_primitive_desc_t first = NULL;
    *out = NULL;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *impl = NULL;
        if (!pd) break;
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        if (impl && !strstr(impl, "brg")) {
            *out = pd;
            break;
        }
        if (!first) first = pd;
        else dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    if (*out) {
        if (first) dnnl_primitive_desc_destroy(first);
        return MR_OK;
    }
    if (!first) return mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN convolution failed (no implementation)", layer->name);
    *out = first;
    return MR_OK;
}

/* Builds (or finds) the primitive for this input shape and input layout.
 * handoff_out: y is written in the layer's handoff type (mr_layer.out_handoff),
 * and summed in it where accumulate, its values times sum_scale (1 but
 * where a quantized y's step is not the layer's output step). */
static mr_status conv_entry_get(cpu_ctx *c, mr_layer *layer, const mr_tensor *x, const mr_tensor *y,
                                int accumulate, int handoff_out, float sum_scale, cpu_conv_entry **out,
                                mr_error *err)
{
    int narrow = conv_narrow_from_blocked(c, layer, x, accumulate);
    for (int i = 0; i < layer->cache_count; i++) {
        cpu_conv_entry *e = &layer->cache[i];
        if (e->n == x->n && e->h == x->h && e->w == x->w && e->accumulate == accumulate &&
            e->narrow_from_blocked == narrow && e->handoff_out == handoff_out && e->sum_scale == sum_scale) {
            *out = e;
            return MR_OK;
        }
    }
    const mr_conv_params *p = &layer->conv;
    mr_status st = MR_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    cpu_conv_entry e;
    memset(&e, 0, sizeof e);
    e.n = x->n;
    e.h = x->h;
    e.w = x->w;
    e.accumulate = accumulate;
    e.blocked = !cpu_layer_reduced(layer) && p->groups == 1 && p->cin % c->block == 0 && p->cout % c->block == 0;
    e.narrow_from_blocked = narrow;
    e.handoff_out = handoff_out;
    e.sum_scale = sum_scale;
    e.runtime_scales = runtime_scales_use(layer, y);

    dnnl_dims_t src_dims = {x->n, p->cin, x->h, x->w}, dst_dims = {y->n, p->cout, y->h, y->w};
    dnnl_dims_t bias_dims = {p->cout}, strides = {p->stride, p->stride};
    dnnl_dims_t dil = {p->dilation - 1, p->dilation - 1}, pad_l = {p->pad, p->pad};
    /* Right padding makes oneDNN's output size equal the one the caller planned. */
    dnnl_dims_t pad_r = {(y->h - 1) * p->stride + (p->kh - 1) * p->dilation + 1 - x->h - p->pad,
                         (y->w - 1) * p->stride + (p->kw - 1) * p->dilation + 1 - x->w - p->pad};
    dnnl_memory_desc_t wei_any;
    int g = p->groups;
    /* A bf16 layer: bf16 input (converted from the fp32 map by src_convert)
     * and weights; bias, sum, post-ops and output stay fp32. NHWC is what
     * oneDNN's AMX and AVX512_BF16 convolutions read fastest (its own
     * choice for format_tag_any); the blocked fp32 layouts would take its
     * plain bf16 kernels, slower than fp32 Winograd. */
    dnnl_data_type_t wdt = layer->bf16 ? dnnl_bf16 : layer->int8 ? dnnl_s8 : dnnl_f32;
    /* An int8 layer's input: u8 where calibration saw no negative value
     * (after a ReLU), else s8; NHWC, which oneDNN's int8 kernels read. */
    dnnl_data_type_t sdt = !layer->int8 ? wdt : p->int8_signed ? dnnl_s8 : dnnl_u8;
    if (g == 1) {
        dnnl_dims_t wd = {p->cout, p->cin, p->kh, p->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_any, 4, wd, wdt, dnnl_format_tag_any), "weights desc");
    } else {
        dnnl_dims_t wd = {g, p->cout / g, p->cin / g, p->kh, p->kw};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_any, 5, wd, wdt, dnnl_format_tag_any), "weights desc");
    }
    dnnl_format_tag_t act = e.blocked || e.narrow_from_blocked ? cpu_block_tag(c->block) : dnnl_nhwc;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&e.src_md, 4, src_dims, sdt, act), "src desc");
    if (cpu_layer_reduced(layer)) {
        dnnl_primitive_desc_t rpd = NULL;
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&e.src_f32_md, 4, src_dims, dnnl_f32, dnnl_nhwc), "src desc");
        DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr");
        if (layer->int8) { /* q = saturate(round(x / src_scale)), the scale given at run time */
            const float runtime = DNNL_RUNTIME_F32_VAL;
            DNNL_TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &runtime), "input quantization scale");
        }
        DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, &e.src_f32_md, c->engine, &e.src_md, c->engine, attr),
                 "input conversion");
        dnnl_primitive_attr_destroy(attr);
        attr = NULL;
        dnnl_status_t rs = dnnl_primitive_create(&e.src_convert, rpd);
        dnnl_primitive_desc_destroy(rpd);
        DNNL_TRY(rs, "input conversion");
        st = cpu_lowp_src_reserve(c, dnnl_memory_desc_get_size(&e.src_md), err);
        if (st != MR_OK) goto done;
    }
    dnnl_data_type_t ddt = e.handoff_out ? layer->out_handoff : dnnl_f32;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&e.dst_md, 4, dst_dims, ddt, act), "dst desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&e.bias_md, 1, bias_dims, dnnl_f32, dnnl_a), "bias desc");
    dnnl_convolution_desc_t cd;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                        &e.src_md, &wei_any, &e.bias_md, &e.dst_md, strides, dil,
                                                        pad_l, pad_r),
             "convolution desc");
    DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr");
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "attr");
    /* int8: the s32 sum (plus the bias, in the same units) times
     * src_scale * weight scale[oc] is the fp32 result; post-ops follow */
    DNNL_TRY(dnnl_post_ops_create(&ops), "post-ops");
    if (layer->int8 && e.runtime_scales) {
        dnnl_dims_t sd = {1, p->cout, 1, 1};
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&e.scales_md, 4, sd, dnnl_f32, dnnl_nchw), "scales desc");
        DNNL_TRY(dnnl_post_ops_append_binary(ops, dnnl_binary_mul, &e.scales_md), "scales post-op");
    } else if (layer->int8) {
        DNNL_TRY(dnnl_primitive_attr_set_output_scales(attr, p->cout, 1 << 1,
                                                       e.handoff_out ? layer->out_scales_q : layer->out_scales),
                 "output scales");
    }
    if (accumulate) DNNL_TRY(dnnl_post_ops_append_sum(ops, sum_scale), "sum post-op");
    if (p->relu) DNNL_TRY(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op");
    DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, ops), "attr");
    if (int8_plain_kernel(layer, y)) {
        st = plain_impl_desc(c, layer, &cd, attr, &pd, err);
        if (st != MR_OK) goto done;
    } else {
        DNNL_TRY(dnnl_primitive_desc_create(&pd, &cd, attr, c->engine, NULL), "convolution");
    }
    e.wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    e.scratch_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    DNNL_TRY(dnnl_primitive_create(&e.prim, pd), "convolution");
    /* A full cache is emptied: a run sees few shapes, so this is rare. */
    if (layer->cache_count == CPU_CONV_CACHE) cache_clear(layer);
    const cpu_conv_entry *same = NULL; /* an int8 entry with these weights already */
    for (int i = 0; layer->int8 && i < layer->cache_count && !same; i++)
        if (dnnl_memory_desc_equal(&layer->cache[i].wei_md, &e.wei_md)) same = &layer->cache[i];
    if (dnnl_memory_desc_equal(&layer->weights_md, &e.wei_md)) {
        e.weights = layer->weights;
    } else if (same) {
        e.weights = same->weights;
    } else if (layer->cache_count == 0 && !layer->int8) {
        /* The first primitive decides the master layout: reorder once and
         * drop the plain copy, so the layer holds one copy of its weights.
         * (An int8 layer keeps its plain s8 master: a reordered one holds
         * oneDNN's compensation terms and is no reorder's source.) */
        float *moved;
        st = reorder_weights(c, layer, &e.wei_md, &moved, err);
        if (st != MR_OK) goto done;
        free(layer->weights);
        layer->weights = moved;
        layer->weights_md = e.wei_md;
        e.weights = moved;
    } else {
        st = reorder_weights(c, layer, &e.wei_md, &e.weights, err);
        if (st != MR_OK) goto done;
        e.owns_weights = 1;
    }
    st = cpu_scratch_reserve(c, e.scratch_bytes, err);
    if (st != MR_OK) goto done;
    cpu_conv_entry *slot = &layer->cache[layer->cache_count++];
    *slot = e;
    e.prim = NULL;
    e.src_convert = NULL;
    e.owns_weights = 0;
    *out = slot;
done:
    if (e.prim) dnnl_primitive_destroy(e.prim);
    if (e.src_convert) dnnl_primitive_destroy(e.src_convert);
    if (e.owns_weights) free(e.weights);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* Entry e's convolution from src (e->src_md's type and layout) to dst,
 * bias, sum and ReLU included, ctx->scratch its scratchpad. */
static mr_status conv_execute(cpu_ctx *c, const mr_layer *layer, const cpu_conv_entry *e, void *src, float *dst,
                              mr_error *err)
{
    mr_status st = MR_OK;
    dnnl_memory_t m[6] = {0}; /* src, weights, bias, dst, scratchpad, run-time scales */
    DNNL_TRY(dnnl_memory_create(&m[0], &e->src_md, c->engine, src), "memory");
    DNNL_TRY(dnnl_memory_create(&m[1], &e->wei_md, c->engine, e->weights), "memory");
    DNNL_TRY(dnnl_memory_create(&m[2], &e->bias_md, c->engine, layer->bias), "memory");
    DNNL_TRY(dnnl_memory_create(&m[3], &e->dst_md, c->engine, dst), "memory");
    dnnl_memory_desc_t sp_md;
    dnnl_dims_t sp_dims = {(dnnl_dim_t)e->scratch_bytes};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&sp_md, 1, sp_dims, dnnl_u8, dnnl_a), "memory");
    DNNL_TRY(dnnl_memory_create(&m[4], &sp_md, c->engine, c->scratch), "memory");
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_BIAS, m[2]},
                               {DNNL_ARG_DST, m[3]}, {DNNL_ARG_SCRATCHPAD, m[4]}};
    if (e->runtime_scales) {
        float *scales = e->handoff_out ? layer->out_scales_q : layer->out_scales;
        DNNL_TRY(dnnl_memory_create(&m[5], &e->scales_md, c->engine, scales), "memory");
        args[5] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, m[5]};
    }
    DNNL_TRY(dnnl_primitive_execute(e->prim, c->stream, e->runtime_scales ? 6 : 5, args), "convolution");
    DNNL_TRY(dnnl_stream_wait(c->stream), "convolution");
done:
    for (int i = 0; i < 6; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    return st;
}

/* The heads' convolutions see a new batch size nearly every image (the
 * mask head's detections, the 4conv1fc box head's RoIs), and a oneDNN
 * primitive has a fixed one: made per size, primitives were made anew on
 * most small images (the demo model's mask head at int8: p90 6.8 ms
 * against a median of 1.1, bench/NOTES.md section 36) and piled up in
 * oneDNN's primitive cache. So a reduced-precision head conv (planned for
 * batches, max_n > 1) runs batches of power-of-two sizes only: as many
 * full chunks of the largest (about HEAD_CHUNK_PIXELS output pixels: 16
 * RoIs of 14x14, 64 of 7x7, 4 of 28x28) as fit, then the rest by its
 * binary digits (11 RoIs: 8 + 2 + 1). At most log2(chunk) + 1 primitives
 * per layer, each made once; no padding, so no wasted work (a padded chunk
 * of 16 took the demo model's 8 or so detections at twice the time). The
 * input is converted once, into ctx->lowp_src. */
#define HEAD_CHUNK_PIXELS 4096

static int head_chunk_images(int h, int w)
{
    int n = 1;
    while ((size_t)2 * n * (size_t)h * (size_t)w <= HEAD_CHUNK_PIXELS) n *= 2;
    return n;
}

static int conv_runs_in_chunks(const mr_layer *l, int accumulate)
{
    return cpu_layer_reduced(l) && l->conv.max_n > 1 && !accumulate;
}

static mr_status conv_heads_lowp(cpu_ctx *c, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    const mr_conv_params *p = &layer->conv;
    const int chunk = head_chunk_images(x->h, x->w);
    const size_t in_img = (size_t)x->h * x->w * p->cin, out_img = (size_t)y->h * y->w * p->cout;
    const size_t elem = layer->int8 ? 1 : 2;
    const dnnl_data_type_t in_type = layer->int8 ? (p->int8_signed ? dnnl_s8 : dnnl_u8) : dnnl_bf16;
    const dnnl_data_type_t handoff = layer->out_handoff;
    const size_t out_elem = handoff == dnnl_data_type_undef ? sizeof(float) : handoff == dnnl_bf16 ? 2 : 1;
    /* the previous head conv's output, handed over in this layer's type, is read as it is */
    const char *src = (const char *)x->data;
    if (!cpu_layout_is_reduced(c, x, in_type, layer->int8 ? layer->src_scale : 0.0f)) {
        MR_TRY(cpu_read(c, x, err));
        MR_TRY(cpu_lowp_src_reserve(c, (size_t)x->n * in_img * elem, err));
        cpu_lowp_convert(x->data, (size_t)x->n, (size_t)x->n, in_img, layer->int8, p->int8_signed,
                         layer->int8 ? 1.0f / layer->src_scale : 0.0f, c->avx512, c->lowp_src);
        src = (const char *)c->lowp_src;
    }
    if (handoff != dnnl_data_type_undef) MR_TRY(cpu_layout_will_be_reduced(c, y, handoff, layer->out_step, err));
    else cpu_wrote(c, y);
    /* full chunks, then the rest (under one chunk) by its binary digits, largest first */
    int n0 = 0;
    for (int size = chunk; size >= 1 && n0 < x->n; size /= 2) {
        const int runs = size == chunk ? (x->n - n0) / chunk : ((x->n - n0) & size) != 0;
        if (!runs) continue;
        mr_tensor xc = *x, yc = *y;
        xc.n = yc.n = size;
        cpu_conv_entry *e;
        /* (an entry reserves lowp_src for `size` images, under the x->n converted: the
         * conversion stays; it may grow scratch, whose pointer conv_execute reads after) */
        MR_TRY(conv_entry_get(c, layer, &xc, &yc, 0, handoff != dnnl_data_type_undef, 1.0f, &e, err));
        for (int r = 0; r < runs; r++, n0 += size)
            MR_TRY(conv_execute(c, layer, e, (void *)(src + (size_t)n0 * in_img * elem),
                                (float *)((char *)y->data + (size_t)n0 * out_img * out_elem), err));
    }
    return MR_OK;
}

mr_status cpu_conv(void *vctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err)
{
    cpu_ctx *c = vctx;
    const mr_conv_params *p = &layer->conv;
    if (x->c != p->cin || y->c != p->cout || x->n != y->n)
        return mr_fail(err, MR_ERR_SHAPE, "%s: input [%d,%d,%d,%d] / output [%d,%d,%d,%d] do not match %d->%d",
                       layer->name, x->n, x->h, x->w, x->c, y->n, y->h, y->w, y->c, p->cin, p->cout);
    int oh = (x->h + 2 * p->pad - p->dilation * (p->kh - 1) - 1) / p->stride + 1;
    int ow = (x->w + 2 * p->pad - p->dilation * (p->kw - 1) - 1) / p->stride + 1;
    if (y->h != oh || y->w != ow)
        return mr_fail(err, MR_ERR_SHAPE, "%s: a %dx%d input gives a %dx%d output, not %dx%d", layer->name, x->h,
                       x->w, oh, ow, y->h, y->w);
    if (x->n == 0) return MR_OK;
    if (c->observe) c->observe(c->observe_user, layer->name, x->data, mr_tensor_numel(x));
    if (layer->wino_u) {
        /* What the model's arena (64-byte offsets, one tensor per op
         * output) always gives; Winograd reads 8-channel groups as
         * aligned vectors and writes y while it still reads x. */
        const char *xb = (const char *)x->data, *yb = (const char *)y->data;
        size_t xbytes = sizeof(float) * mr_tensor_numel(x), ybytes = sizeof(float) * mr_tensor_numel(y);
        if (((uintptr_t)xb | (uintptr_t)yb) % 32 || !(xb + xbytes <= yb || yb + ybytes <= xb))
            return mr_fail(err, MR_ERR_SHAPE, "%s: Winograd needs 32-byte-aligned, non-overlapping input and output",
                           layer->name);
        mr_wino_params wp = {p->cin, p->cout, p->relu, c->block, c->avx512, 0};
        MR_TRY(cpu_scratch_reserve(c, wino_scratch_bytes(&wp, c->threads), err));
        /* An input not blocked is read in NHWC as it is: relayouting it
         * cost as much as an int8 producer saved on AVX2 (the FPN's P2 map
         * 15.6 ms; bench/NOTES.md section 40). */
        wp.x_nhwc = !cpu_layout_is_blocked(c, x);
        if (wp.x_nhwc) {
            MR_TRY(cpu_read(c, x, err));
            MR_TRY(blocked_output(c, y, NULL, accumulate, err));
        } else {
            MR_TRY(blocked_operands(c, x, y, accumulate, err));
        }
        wino_forward(&wp, layer->wino_u, layer->bias, x->data, x->n, x->h, x->w, y->data, accumulate, c->threads,
                     c->scratch);
        return MR_OK;
    }
    if (conv_runs_in_chunks(layer, accumulate)) return conv_heads_lowp(c, layer, x, y, err);
    cpu_conv_entry *e;
    int x_reduced = 0;
    /* An output in the handoff type: written so for its readers; where the
     * conv adds into y (a bottleneck's conv3 into the residual stream, an
     * FPN lateral onto the upsampled coarser level), only onto a y held in
     * that type (u8, s8: at its own step, which the sum scales to the
     * layer's): else (the stage's first block under int8, whose shortcut
     * conv wrote y in fp32) the sum runs in fp32 and y is converted after,
     * once. */
    const dnnl_data_type_t handoff = layer->out_handoff;
    dnnl_data_type_t y_held = dnnl_data_type_undef;
    float y_step = 0.0f;
    const int sum_reduced = accumulate && handoff != dnnl_data_type_undef &&
                            cpu_layout_held(c, y, &y_held, &y_step) && y_held == handoff;
    const int handoff_out = handoff != dnnl_data_type_undef && (!accumulate || sum_reduced);
    const float sum_scale = sum_reduced && handoff != dnnl_bf16 ? y_step / layer->out_step : 1.0f;
    MR_TRY(conv_entry_get(c, layer, x, y, accumulate, handoff_out, sum_scale, &e, err));
    /* The operands in the convolution's layout (in place), y's memory
     * recorded as what it is about to hold. */
    if (e->blocked) {
        MR_TRY(blocked_operands(c, x, y, accumulate, err));
    } else if (e->narrow_from_blocked) {
        MR_TRY(cpu_blocked_reserve(c, dnnl_memory_desc_get_size(&e->dst_md), err));
        cpu_wrote(c, y);
    } else {
        /* a reduced reader takes its writer's output in its own type as it is */
        x_reduced = layer->int8 ? cpu_layout_is_reduced(c, x, p->int8_signed ? dnnl_s8 : dnnl_u8, layer->src_scale)
                    : layer->bf16 && cpu_layout_is_reduced(c, x, dnnl_bf16, 0.0f);
        if (!x_reduced) MR_TRY(cpu_read(c, x, err));
        /* (a y summed in the handoff type is read so, in place, and then
         * holds the layer's step) */
        if (accumulate && !sum_reduced) MR_TRY(cpu_read(c, y, err));
        if (e->handoff_out) MR_TRY(cpu_layout_will_be_reduced(c, y, handoff, layer->out_step, err));
        else cpu_wrote(c, y);
    }
    float *dst = e->narrow_from_blocked ? c->blocked : y->data;
    void *src = x->data;
    if (e->src_convert && !x_reduced) {
        mr_status st = MR_OK;
        dnnl_memory_t from = NULL, to = NULL, scale = NULL;
        const float to_steps = layer->int8 ? 1.0f / layer->src_scale : 1.0f;
        dnnl_memory_desc_t scale_md;
        dnnl_dims_t one = {1};
        DNNL_TRY(dnnl_memory_create(&from, &e->src_f32_md, c->engine, x->data), "memory");
        DNNL_TRY(dnnl_memory_create(&to, &e->src_md, c->engine, c->lowp_src), "memory");
        DNNL_TRY(dnnl_memory_desc_init_by_tag(&scale_md, 1, one, dnnl_f32, dnnl_a), "memory");
        DNNL_TRY(dnnl_memory_create(&scale, &scale_md, c->engine, (void *)&to_steps), "memory");
        dnnl_exec_arg_t conv_args[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_ATTR_OUTPUT_SCALES, scale}};
        DNNL_TRY(dnnl_primitive_execute(e->src_convert, c->stream, layer->int8 ? 3 : 2, conv_args), "input conversion");
        src = c->lowp_src;
    done:
        if (from) dnnl_memory_destroy(from);
        if (to) dnnl_memory_destroy(to);
        if (scale) dnnl_memory_destroy(scale);
        MR_TRY(st);
    }
    MR_TRY(conv_execute(c, layer, e, src, dst, err));
    if (e->narrow_from_blocked) unblock_padded(dst, c->block, y);
    if (handoff != dnnl_data_type_undef && !e->handoff_out) /* summed in fp32: the stream reduced from here on */
        MR_TRY(cpu_layout_reduce(c, y, handoff, layer->out_step, err));
    return MR_OK;
}

/* y[r, :] = act(y[r, :] + bias) over rows; the epilogue of a GEMM. The
 * ReLU as a select against a floor (-inf without it) vectorises; NaN stays
 * NaN, as torch's ReLU keeps it. */
static void bias_act_rows(float *y, int rows, int cols, const float *bias, int relu)
{
    const float floor = relu ? 0.0f : -INFINITY;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float *row = y + (size_t)r * (size_t)cols;
#pragma omp simd
        for (int j = 0; j < cols; j++) {
            float v = row[j] + bias[j];
            row[j] = v < floor ? floor : v;
        }
    }
}

/* The linear layers' GEMM runs as fixed tiles of the output, one
 * single-threaded sgemm each, so that every output's sum over the inputs is
 * added in the same order whatever the thread count. oneDNN's own threading
 * splits that sum between threads for small outputs: on AVX2 the demo
 * model's class scores ([1000 x 256] x [256 x 5]) and box deltas ([256 x 20])
 * differed between 1 and 2 threads in the last bits, so `--threads 1` and
 * `--threads 2` did, and shards run at one thread did not equal the single
 * run. Tile size, measured (bench/NOTES.md section 17, 2 threads, AMD EPYC
 * AVX2): 256 x 256 costs 1.02-1.12x one threaded call on the full-width fc6
 * and fc7, no tile shape tried was clearly cheaper, and it gives fc6 16
 * tiles, work for 16 threads. */
#define LINEAR_TILE_ROWS 256
#define LINEAR_TILE_COLS 256

mr_status cpu_linear(void *vctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    const mr_linear_params *p = &layer->linear;
    int rows = x->n;
    if ((size_t)x->h * x->w * x->c != (size_t)p->in || (size_t)y->h * y->w * y->c != (size_t)p->out || y->n != rows)
        return mr_fail(err, MR_ERR_SHAPE, "%s: input/output sizes do not match %d->%d", layer->name, p->in, p->out);
    if (rows == 0) return MR_OK;
    cpu_ctx *c = vctx;
    if (c->observe) c->observe(c->observe_user, layer->name, x->data, mr_tensor_numel(x));
    MR_TRY(cpu_read(vctx, x, err));
    cpu_wrote(vctx, y);
    if (cpu_layer_reduced(layer)) return cpu_gemm_lowp_run(c, layer->name, &layer->gemm, x->data, rows, y->data, y->cap, err);
    const int row_tiles = (rows + LINEAR_TILE_ROWS - 1) / LINEAR_TILE_ROWS;
    const int col_tiles = (p->out + LINEAR_TILE_COLS - 1) / LINEAR_TILE_COLS;
    dnnl_status_t failed = dnnl_success;
    /* inside the parallel loop oneDNN's sgemm runs on the calling thread alone */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < row_tiles * col_tiles; t++) {
        int r0 = (t / col_tiles) * LINEAR_TILE_ROWS, c0 = (t % col_tiles) * LINEAR_TILE_COLS;
        int nr = rows - r0 < LINEAR_TILE_ROWS ? rows - r0 : LINEAR_TILE_ROWS;
        int nc = p->out - c0 < LINEAR_TILE_COLS ? p->out - c0 : LINEAR_TILE_COLS;
        dnnl_status_t s = dnnl_sgemm('N', 'T', nr, nc, p->in, 1.0f, x->data + (size_t)r0 * p->in, p->in,
                                     layer->weights + (size_t)c0 * p->in, p->in, 0.0f,
                                     y->data + (size_t)r0 * p->out + c0, p->out);
        if (s != dnnl_success) {
#pragma omp atomic write
            failed = s;
        }
    }
    if (failed != dnnl_success)
        return mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN sgemm failed (status %d)", layer->name, (int)failed);
    bias_act_rows(y->data, rows, p->out, layer->bias, p->relu);
    return MR_OK;
}

/* The deconvolution's GEMM runs in chunks of DECONV_CHUNK_ROWS input
 * pixels (one thread each, its own slice of scratch), each chunk's
 * [rows, 4*cout] result turned into output pixels while it is still in
 * cache: one GEMM over every row wrote an 80 MB temporary at 100 RoIs that
 * the depth-to-space pass then read back from memory. Chunk size, measured
 * (sgemm 256 -> 1024 over 19600 rows, 2 threads, one call per chunk):
 * 196 rows 90 GFLOP/s (B is repacked per call), 588 178, 980 183, 1960
 * 185, 3920 154 (the whole GEMM in one call: 166-186). 980 rows (five
 * 14x14 RoIs) make a 4 MB slice per thread, which stays in L3. */
#define DECONV_CHUNK_ROWS 980

/* y's pixels from rows [r0, r0 + count) of the GEMM result tmp (row r0 first). */
static void depth_to_space(const float *tmp, int r0, int count, const mr_tensor *y, int H, int W, const float *bias,
                           int cout, int relu)
{
    const size_t cols = 4 * (size_t)cout;
    for (int r = r0; r < r0 + count; r++) {
        int n = r / (H * W), yy = (r / W) % H, xx = r % W;
        for (int k = 0; k < 4; k++) {
            int oy = 2 * yy + k / 2, ox = 2 * xx + k % 2;
            float *dst = y->data + (((size_t)n * y->h + oy) * y->w + ox) * cout;
            const float *src = tmp + (size_t)(r - r0) * cols + (size_t)k * cout;
            const float floor = relu ? 0.0f : -INFINITY; /* NaN stays NaN, as torch's ReLU keeps it */
#pragma omp simd
            for (int co = 0; co < cout; co++) {
                float v = src[co] + bias[co];
                dst[co] = v < floor ? floor : v;
            }
        }
    }
}

/* The deconvolution in bf16 or int8 (mr_layer.gemm): the input converted
 * once, then per chunk of DECONV_LOWP_ROWS pixels the matmul into scratch
 * and the depth-to-space pass (bias and ReLU in fp32) over both threads. */
static mr_status deconv_lowp(cpu_ctx *c, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    const cpu_gemm_lowp *g = &layer->gemm;
    const mr_deconv2x2_params *p = &layer->deconv;
    const int rows = x->n * x->h * x->w;
    float *tmp;
    MR_TRY(cpu_gemm_lowp_convert(c, g, x->data, rows, err));
    MR_TRY(cpu_gemm_lowp_room(c, g, &tmp, err));
    const int chunks = (rows + g->chunk_rows - 1) / g->chunk_rows;
    for (int ch = 0; ch < chunks; ch++) {
        const int r0 = ch * g->chunk_rows, count = rows - r0 < g->chunk_rows ? rows - r0 : g->chunk_rows;
        MR_TRY(cpu_gemm_lowp_chunk(c, layer->name, g, ch, tmp, err));
#pragma omp parallel for schedule(static)
        for (int r = 0; r < count; r++)
            depth_to_space(tmp + (size_t)r * (size_t)g->cols, r0 + r, 1, y, x->h, x->w, layer->bias, p->cout,
                           p->relu);
    }
    return MR_OK;
}

mr_status cpu_deconv2x2(void *vctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    cpu_ctx *c = vctx;
    const mr_deconv2x2_params *p = &layer->deconv;
    if (x->c != p->cin || y->c != p->cout || y->n != x->n || y->h != 2 * x->h || y->w != 2 * x->w)
        return mr_fail(err, MR_ERR_SHAPE, "%s: output must be [%d,%d,%d,%d]", layer->name, x->n, 2 * x->h, 2 * x->w,
                       p->cout);
    int rows = x->n * x->h * x->w, cols = 4 * p->cout;
    if (rows == 0) return MR_OK;
    if (c->observe) c->observe(c->observe_user, layer->name, x->data, mr_tensor_numel(x));
    MR_TRY(cpu_read(c, x, err));
    cpu_wrote(c, y);
    if (cpu_layer_reduced(layer)) return deconv_lowp(c, layer, x, y, err);
    int threads = c->threads > 0 ? c->threads : omp_get_max_threads();
    size_t slice = (size_t)DECONV_CHUNK_ROWS * (size_t)cols;
    MR_TRY(cpu_scratch_reserve(c, sizeof(float) * slice * (size_t)threads, err));
    int chunks = (rows + DECONV_CHUNK_ROWS - 1) / DECONV_CHUNK_ROWS;
    dnnl_status_t failed = dnnl_success;
    /* inside the parallel loop oneDNN's sgemm runs on the calling thread alone */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int ch = 0; ch < chunks; ch++) {
        int r0 = ch * DECONV_CHUNK_ROWS, count = rows - r0 < DECONV_CHUNK_ROWS ? rows - r0 : DECONV_CHUNK_ROWS;
        float *tmp = (float *)c->scratch + slice * (size_t)omp_get_thread_num();
        dnnl_status_t s = dnnl_sgemm('N', 'N', count, cols, p->cin, 1.0f, x->data + (size_t)r0 * p->cin, p->cin,
                                     layer->weights, cols, 0.0f, tmp, cols);
        if (s != dnnl_success) {
#pragma omp atomic write
            failed = s;
            continue;
        }
        depth_to_space(tmp, r0, count, y, x->h, x->w, layer->bias, p->cout, p->relu);
    }
    if (failed != dnnl_success)
        return mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN sgemm failed (status %d)", layer->name, (int)failed);
    return MR_OK;
}
