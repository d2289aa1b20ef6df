/* Internals shared by the CPU backend's files (not part of the API). */
#ifndef MR_BACKEND_CPU_H
#define MR_BACKEND_CPU_H

#include <dnnl.h>
#include <math.h>
#include <stddef.h>

#include "backend/backend.h"

/* Primitives are created per input shape and cached in the layer; a handful
 * of shapes (image orientations, RoI counts) is all one run sees. */
#define CPU_CONV_CACHE 8

/* Tensor memory that holds the blocked layout nChw<block>c, not NHWC
 * (backend_cpu_layout.c): `held` dnnl_data_type_undef; or NHWC values in a
 * reduced type, handed from a reduced-precision conv to the convs that
 * read it (mr_conv_params.int8_out_range, out_to_convs): `held` u8 or s8
 * (one byte a value, real = q * step) or bf16. */
typedef struct {
    float *data;
    int n, h, w, c;
    dnnl_data_type_t held;
    float step;
} cpu_blocked_rec;
#define CPU_BLOCKED_RECS 64

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;
    /* Channels per block of the layout between convolutions: 16 (nChw16c)
     * where oneDNN runs AVX-512 kernels (the CPU has it and oneDNN is not
     * capped below it), which read 16-channel blocks and fall back to their
     * AVX2 ones on nChw8c; else 8. Set once
     * at creation (cpu_block_choose); MR_CPU_BLOCK=8 or 16 overrides. */
    int block;
    /* Whether our own Winograd code (its GEMM kernel, and its transforms in
     * the 16-channel block) uses AVX-512: where oneDNN runs AVX-512 (as
     * for the block), unless MR_CPU_AVX512=0 (tests and A/B runs of the
     * AVX2 path). */
    int avx512;
    /* --precision bf16 (where oneDNN's ISA has AVX512_BF16 or AMX): every
     * conv whose layer does not ask for fp32 (mr_conv_params.keep_fp32)
     * runs as oneDNN's bf16 convolution on NHWC: the fp32 input converted
     * to bf16 (lowp_src), bf16 weights, fp32 bias, sum, post-ops and
     * output. Such a layer never runs Winograd nor the blocked layout. */
    int bf16;
    /* --precision int8: the same layers (conv.keep_fp32 unset) as oneDNN's
     * u8s8 or s8s8 convolutions on NHWC: the fp32 input quantized by its
     * calibrated range (mr_conv_params.int8_range) into lowp_src, s8
     * weights with one scale per output channel, s32 sums, fp32 output
     * with bias, sum and ReLU as post-ops. Weights are quantized to at most
     * 127 steps, except for a u8 input where oneDNN's ISA lacks VNNI
     * (int8_vnni 0): there its u8 x s8 pairs are summed in int16
     * (vpmaddubsw), 255 * 127 * 2 would saturate, and the weights take 63.
     * (For an s8 input without VNNI oneDNN halves the weights itself, in
     * its reorder, and doubles the output scale.) */
    int int8;
    int int8_vnni;
    void *lowp_src; /* a bf16 or int8 layer's input, converted; grown per new shape */
    size_t lowp_src_size;
    mr_conv_observer observe; /* calibration (observe_conv_inputs); NULL: none */
    void *observe_user;
    void *scratch; /* oneDNN scratchpad and GEMM temporaries, grown per new shape */
    size_t scratch_size;
    void *blocked; /* a tensor's worth of room for in-place layout changes */
    size_t blocked_size;
    cpu_blocked_rec recs[CPU_BLOCKED_RECS];
    int rec_count;
    void *post_scratch; /* the detection ops' (top-k, NMS, paste) */
    size_t post_scratch_size;
} cpu_ctx;

typedef enum { CPU_LAYER_CONV, CPU_LAYER_LINEAR, CPU_LAYER_DECONV2X2, CPU_LAYER_GROUP_NORM } cpu_layer_kind;

typedef struct {
    int n, h, w, accumulate;
    dnnl_primitive_t prim;
    /* src/dst are blocked (nChw<block>c) where `blocked` (channels a
     * multiple of the block: the tensors stay in that layout between
     * convolutions), else NHWC. A narrow output (the RPN's 3- and
     * 12-channel heads) of an input that is blocked already is
     * `narrow_from_blocked`: src blocked, dst blocked with its channels
     * padded to a block, in ctx->blocked, then copied out to NHWC (oneDNN
     * has no fast kernel for blocked in, NHWC out). (A 3-channel
     * NHWC input with a blocked output, the stem, has only oneDNN's
     * reference kernel: 12.8 s.) */
    dnnl_memory_desc_t src_md, wei_md, bias_md, dst_md;
    int blocked, narrow_from_blocked;
    /* dst is in the layer's handoff type (mr_layer.out_handoff); with
     * accumulate, the sum post-op reads it so too (the residual stream) */
    int handoff_out;
    float sum_scale; /* the sum post-op's: a quantized y's step over the output's; else 1 */
    /* int8: the output scales as a per-channel multiply post-op whose values
     * come with each run (DNNL_ARG_SRC_1), not as the attribute's constants:
     * the primitive then carries nothing of the layer's own, and oneDNN's
     * primitive cache gives identical layers of a shape (res4's 22 blocks)
     * one primitive, made once (backend_cpu_layers.c, shared_scales_use). */
    int runtime_scales;
    dnnl_memory_desc_t scales_md;
    /* A bf16 or int8 layer's: the fp32 NHWC input to bf16, u8 or s8 NHWC
     * (ctx->lowp_src), src_md then being that one; NULL for fp32 layers.
     * Its scale (int8: 1 / the input's step) comes with each run, so that
     * every layer of a shape shares one reorder through oneDNN's primitive
     * cache instead of each making its own. */
    dnnl_primitive_t src_convert;
    dnnl_memory_desc_t src_f32_md;
    float *weights; /* in the layout the primitive chose (bf16 or s8 for such a layer) */
    int owns_weights; /* 0: the layer's master copy, or another entry's */
    size_t scratch_bytes;
} cpu_conv_entry;

/* A fully connected layer or the mask head's deconvolution computing in bf16
 * or int8 (backend_cpu_gemm.c): y[rows, cols] = x[rows, k] * W[k, cols] as
 * one oneDNN matmul primitive of chunk_rows rows, made at load, run over
 * the rows chunk by chunk. */
typedef struct {
    int k, cols, chunk_rows;
    int int8;          /* else bf16 */
    int is_signed;     /* int8: s8 input (else u8) */
    float to_steps;    /* int8: 1 / the input's step (its calibrated range / 255 or 127) */
    float *scales;     /* int8: [cols], the input step x the column's weight scale */
    float *bias;       /* [cols] (int8: in accumulator units, bias / scales) */
    int with_bias;     /* the epilogue: bias (and ReLU) in the primitive; else the caller adds them */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src_md, wei_md, bias_md, dst_md;
    void *weights; /* s8 or bf16, in the layout the primitive chose */
    size_t scratch_bytes;
} cpu_gemm_lowp;

/* x [rows, k] fp32 -> dst [padded_rows, k] as int8 (u8, or s8 where
 * is_signed: saturate(round_half_even(x * to_steps)), as oneDNN's quantizing
 * reorder) or bf16 (round to nearest even); the rows past `rows` zero. Over
 * the OpenMP threads; avx512: with AVX-512 (ctx->avx512). */
void cpu_lowp_convert(const float *x, size_t rows, size_t padded_rows, size_t k, int int8, int is_signed,
                      float to_steps, int avx512, void *dst);

/* w: [k, cols], or [cols, k] where transposed (a linear layer's [out, in]).
 * epilogue: bias (NULL: none) and ReLU fused into the primitive; 0: the
 * caller adds them after (the deconvolution's depth-to-space pass does).
 * int8 (ctx->int8) takes the input's calibrated range and sign. */
mr_status cpu_gemm_lowp_init(const cpu_ctx *c, const char *name, cpu_gemm_lowp *g, int k, int cols, int chunk_rows,
                             const float *w, int transposed, int epilogue, const float *bias, int relu,
                             float int8_range, int int8_signed, mr_error *err);
void cpu_gemm_lowp_free(cpu_gemm_lowp *g);
/* x [rows, k] into ctx->lowp_src in the GEMM's input type, zero rows up to
 * whole chunks; room for one chunk's fp32 result in ctx->scratch, past the
 * primitive's scratchpad; then chunk `chunk`'s [chunk_rows, cols] result to
 * dst (ctx->scratch serves as the primitive's scratchpad). */
mr_status cpu_gemm_lowp_convert(cpu_ctx *c, const cpu_gemm_lowp *g, const float *x, int rows, mr_error *err);
mr_status cpu_gemm_lowp_room(cpu_ctx *c, const cpu_gemm_lowp *g, float **room, mr_error *err);
mr_status cpu_gemm_lowp_chunk(cpu_ctx *c, const char *name, const cpu_gemm_lowp *g, int chunk, float *dst,
                              mr_error *err);
/* y [rows, cols] (room for y_cap floats) from x [rows, k]: convert, then
 * every chunk, the last through scratch where it would pass y_cap. */
mr_status cpu_gemm_lowp_run(cpu_ctx *c, const char *name, const cpu_gemm_lowp *g, const float *x, int rows,
                            float *y, size_t y_cap, mr_error *err);

struct mr_layer {
    cpu_layer_kind kind;
    char name[128];
    mr_conv_params conv;
    mr_linear_params linear;
    mr_deconv2x2_params deconv;
    mr_group_norm_params gn;
    /* conv: one master copy, OIHW until the first primitive reorders it into
     * the layout it prefers (weights_md says which); linear: [out,in];
     * deconv: [cin, 2*2*cout]; group norm: gamma [C] (and `bias` its beta). */
    float *weights;
    dnnl_memory_desc_t weights_md;
    float *bias;
    /* Winograd F(4x4,3x3) weights (conv_winograd.h, U[36][cout/16][cin][16])
     * of a layer that runs that way (backend_cpu_layers.c: wino_use); it
     * then has no `weights`. NULL otherwise. */
    float *wino_u;
    int bf16; /* conv: computes in bf16 (cpu_ctx.bf16 and not conv.keep_fp32) */
    /* conv: computes in int8 (cpu_ctx.int8 and not conv.keep_fp32). Its
     * `weights` are then s8 OIHW (weights_md), kept as the source of every
     * primitive's reorder; `bias` is in accumulator units (bias /
     * out_scales[oc]), as oneDNN 2.x adds it before the output scale. */
    int int8;
    float src_scale;   /* real value of one input step: int8_range / (255 or 127) */
    float *out_scales; /* [cout]: src_scale * the output channel's weight scale */
    /* The type the layer hands its output over in (dnnl_data_type_undef:
     * fp32), where its readers are all convs computing in its precision
     * (backend.h: int8_out_range, out_to_convs):
     * - bf16: bf16 (a bf16 layer, out_to_convs);
     * - int8: u8 (s8 if int8_out_signed) at out_step, the readers' one
     *   step, with out_scales_q[oc] = out_scales[oc] / out_step; on a CPU
     *   with VNNI only, where they run int8 whatever their shape.
     * The output is recorded so (cpu_blocked_rec.held). Where the layer
     * adds into its output (a bottleneck's conv3 into the residual stream),
     * the sum reads it in that type too, if it is held so; else the sum
     * runs in fp32 and the output is converted after (cpu_layout_reduce). */
    dnnl_data_type_t out_handoff;
    float *out_scales_q;
    float out_step;
    cpu_conv_entry cache[CPU_CONV_CACHE];
    int cache_count;
    /* linear, deconv: computes in bf16 or int8 (bf16 or int8 set), through
     * this; `weights` is then NULL. */
    cpu_gemm_lowp gemm;
};

/* The block for this CPU: MR_CPU_BLOCK (8 or 16) if set, else 16 where
 * oneDNN runs AVX-512 kernels, else 8. */
int cpu_block_choose(void);

/* oneDNN's tag for the blocked layout of `block` channels. */
static inline dnnl_format_tag_t cpu_block_tag(int block)
{
    return block == 16 ? dnnl_nChw16c : dnnl_nChw8c;
}

mr_status cpu_scratch_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err);
mr_status cpu_blocked_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err);
mr_status cpu_lowp_src_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err);
/* `from` (from_md) rewritten into `to` (to_md) by a oneDNN reorder made for
 * the one call (weights at load); `name` in errors. */
mr_status cpu_reorder_once(const cpu_ctx *c, const char *name, const dnnl_memory_desc_t *from_md, const void *from,
                           const dnnl_memory_desc_t *to_md, void *to, mr_error *err);

/* The largest |x| of n weights, 0 for none. Comparisons, not fmaxf: at -O2
 * fmaxf is a library call through the PLT and kept the weights' quantizing
 * loops scalar, a quarter of a full-size int8 load (bench/NOTES.md section
 * 40). Weights are checked finite before they come here; a NaN would lose
 * every comparison, as fmaxf ignores it. */
static inline float cpu_abs_max(const float *x, size_t n)
{
    float m = 0.0f;
#pragma omp simd reduction(max : m)
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        m = a > m ? a : m;
    }
    return m;
}

/* v rounded to the nearest integer, ties to even, for |v| < 2^22 in the
 * default rounding mode: nearbyintf's result, by adding and subtracting
 * 1.5 * 2^23, which vectorises (nearbyintf is a library call at -O2). */
static inline float cpu_round_even(float v)
{
    const float magic = 12582912.0f;
    return (v + magic) - magic;
}

/* Whether the layer computes in a reduced precision (bf16 or int8): NHWC,
 * never Winograd or the blocked layout. */
static inline int cpu_layer_reduced(const struct mr_layer *l)
{
    return l->bf16 || l->int8;
}

/* The backend's arrays (activations, scratch, weights; backend_cpu_alloc.c): 64-byte aligned;
 * from CPU_HUGE_PAGE bytes up, aligned to a huge page and marked for
 * transparent huge pages. NULL when out of memory; release with free(). */
#define CPU_HUGE_PAGE ((size_t)2 << 20)
void *cpu_alloc(size_t bytes);

/* Zeroed arrays (the activation buffers, buffer_alloc), released with
 * cpu_free_zeroed only. From CPU_HUGE_PAGE bytes up they are fresh pages
 * of their own, zero by the kernel's promise, so nothing touches them
 * before the layers do: a page no input reaches is never made (the
 * activations are planned for the largest input). */
void *cpu_alloc_zeroed(size_t bytes);
void cpu_free_zeroed(void *p);
/* The size cpu_alloc_zeroed was asked for p. */
size_t cpu_zeroed_bytes(const void *p);

/* Readers of [p, p+bytes) as NHWC call cpu_layout_nhwc first; writers of
 * NHWC output call cpu_layout_written; blocked convolutions call
 * cpu_layout_blocked on what they read (turned in place if need be) and
 * cpu_layout_will_be_blocked on what they write. `keep` is a tensor the call
 * must leave blocked (the convolution's other operand). */
mr_status cpu_layout_nhwc(cpu_ctx *c, const void *p, size_t bytes, mr_error *err);
void cpu_layout_written(cpu_ctx *c, const void *p, size_t bytes);
void cpu_layout_freed(cpu_ctx *c, void *p); /* p: from cpu_alloc_zeroed (buffer_alloc) */
mr_status cpu_layout_blocked(cpu_ctx *c, const mr_tensor *t, const mr_tensor *keep, mr_error *err);
mr_status cpu_layout_will_be_blocked(cpu_ctx *c, const mr_tensor *t, const mr_tensor *keep, mr_error *err);

/* For ops that treat every channel alike (max pool, nearest upsample): xv
 * and yv are what to run the NHWC loop on. A blocked x gives views as NHWC
 * of n*c/block images of `block` channels, and y is recorded blocked; otherwise x is
 * read as NHWC and xv, yv are x, y. */
mr_status cpu_layout_channelwise(cpu_ctx *c, const mr_tensor *x, const mr_tensor *y, mr_tensor *xv, mr_tensor *yv,
                                 mr_error *err);

/* Whether t (this data, this shape) is held blocked now: for readers that
 * take either layout (RoIAlign) instead of calling cpu_read. */
int cpu_layout_is_blocked(const cpu_ctx *c, const mr_tensor *t);

/* Whether t is held in this reduced type (u8 and s8 at this step; bf16:
 * step 0), so that a reader computing in it can take it as it is; and the
 * record a reduced-precision conv's output in that type makes. */
int cpu_layout_is_reduced(const cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t type, float step);
/* Whether t is held in a reduced type, and which (its step for u8 and s8). */
int cpu_layout_held(const cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t *type, float *step);
mr_status cpu_layout_will_be_reduced(cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t type, float step,
                                     mr_error *err);
/* t's fp32 values converted in place to that type (u8, s8: quantized at
 * the step, round half even, saturated; bf16: rounded to nearest even),
 * and recorded so. */
mr_status cpu_layout_reduce(cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t type, float step, mr_error *err);

static inline mr_status cpu_read(cpu_ctx *c, const mr_tensor *t, mr_error *err)
{
    return cpu_layout_nhwc(c, t->data, sizeof(float) * mr_tensor_numel(t), err);
}

/* An op's output: its whole capacity is forgotten as blocked. */
static inline void cpu_wrote(cpu_ctx *c, const mr_tensor *t)
{
    cpu_layout_written(c, t->data, sizeof(float) * t->cap);
}

mr_status cpu_conv_init(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                        const float *bias, mr_layer **out, mr_error *err);
mr_status cpu_linear_init(void *ctx, const char *name, const mr_linear_params *p, const float *w,
                          const float *bias, mr_layer **out, mr_error *err);
mr_status cpu_deconv2x2_init(void *ctx, const char *name, const mr_deconv2x2_params *p, const float *w,
                             const float *bias, mr_layer **out, mr_error *err);
void cpu_layer_free(void *ctx, mr_layer *layer);
mr_status cpu_conv(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err);
mr_status cpu_linear(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
mr_status cpu_deconv2x2(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
/* GroupNorm (backend_cpu_norm.c). */
mr_status cpu_group_norm_init(void *ctx, const char *name, const mr_group_norm_params *p, const float *gamma,
                              const float *beta, mr_layer **out, mr_error *err);
mr_status cpu_group_norm(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate,
                         mr_error *err);

mr_status cpu_roi_align(void *ctx, const mr_roi_align_params *p, const mr_level_map *map,
                        const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err);
mr_status cpu_rpn_proposals(void *ctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                            const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err);
mr_status cpu_box_detections(void *ctx, const mr_box_post_params *p, const mr_tensor *rois, const mr_tensor *logits,
                             const mr_tensor *deltas, mr_tensor *boxes, mr_tensor *scores, mr_tensor *labels,
                             mr_error *err);
mr_status cpu_mask_class_probs(void *ctx, const mr_tensor *x, const mr_tensor *weight, const mr_tensor *bias,
                               const mr_tensor *labels, mr_tensor *probs, mr_error *err);
mr_status cpu_mask_probs(void *ctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                         mr_error *err);
mr_status cpu_mask_paste(void *ctx, const mr_mask_paste_params *p, const mr_tensor *probs, const mr_tensor *boxes,
                         int img_h, int img_w, const mr_mask_window *win, uint8_t *masks, float *soft, mr_error *err);

#endif
