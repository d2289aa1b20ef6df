/* The GEMMs of the heads in a reduced precision (backend_cpu.h,
 * cpu_gemm_lowp): the box head's fully connected layers and the mask head's
 * 2x2 deconvolution, at --precision bf16 or int8, as oneDNN matmuls over
 * chunks of a fixed row count.
 *
 * Why chunks: the rows are RoIs (or RoI pixels), and their count changes
 * with every image. A oneDNN primitive has a fixed shape, and one made per
 * count (1-3 ms each, measured) would be made anew almost every image on
 * small inputs; a run-time row count takes oneDNN's gemm:jit, which ran the
 * demo model's fc6 ([1000 x 3136] x [3136 x 256]) at 0.45 T int8
 * multiply-adds/s against 1.8 T for AMX's brgemm at fixed shapes (bench/NOTES.md
 * section 35). So one primitive per layer, made at load, runs chunks of
 * chunk_rows rows; the input is converted once per call into ctx->lowp_src,
 * padded with zero rows to whole chunks, and a last chunk whose rows run past
 * the output's room writes to scratch and is copied. int8 sums are exact
 * integers: the result is the same bytes at any thread count. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"

#define DNNL_TRY(call, what)                                                                      \
    do {                                                                                          \
        dnnl_status_t s_ = (call);                                                                \
        if (s_ != dnnl_success) {                                                                 \
            st = mr_fail(err, MR_ERR_BACKEND, "%s: oneDNN %s failed (status %d)", name, what, (int)s_); \
            goto done;                                                                            \
        }                                                                                         \
    } while (0)

/* fp32 to bf16, rounded to nearest even; NaN stays a (quiet) NaN. Written
 * without branches, so that the loops over it vectorise. */
static inline uint16_t to_bf16(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

/* q = saturate(round_half_even(x * to_steps)), as oneDNN's quantizing
 * reorder does for the convolutions; NaN gives the lowest step. Clamped
 * first (the bounds are whole numbers, so clamping and rounding commute),
 * then rounded by cpu_round_even: nearbyintf is a library call at -O2 and
 * kept the loop scalar (12% of an int8 run of the demo model,
 * bench/NOTES.md section 36). */
static inline float quantize(float x, float to_steps, float lo, float hi)
{
    float v = x * to_steps;
    v = v == v ? v : lo;
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    return cpu_round_even(v);
}

/* One row of cpu_lowp_convert with AVX-512 (ctx->avx512): the same values
 * as the loops below (the conversion rounds by MXCSR, nearest even), 16 a
 * step. The SSE2 loops the compiler makes of those ran 3x slower than
 * oneDNN's reorder (6.1 ms against 2.2 for a 200x304x256 map, 2 threads;
 * bench/NOTES.md section 36). */
__attribute__((target("avx512f,avx512bw"))) static void convert_row_avx512(const float *src, size_t k, int int8,
                                                                          int is_signed, float to_steps, void *dst)
{
    const __m512 steps = _mm512_set1_ps(to_steps);
    const __m512 lo = _mm512_set1_ps(is_signed ? -128.0f : 0.0f), hi = _mm512_set1_ps(is_signed ? 127.0f : 255.0f);
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
    for (size_t i = 0; i < k; i += 16) {
        const __mmask16 m = k - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, src + i);
        if (int8) {
            v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, steps), lo), hi); /* max: NaN gives lo */
            __m512i q = _mm512_cvtps_epi32(v);
            if (is_signed) _mm512_mask_cvtsepi32_storeu_epi8((int8_t *)dst + i, m, q);
            else _mm512_mask_cvtusepi32_storeu_epi8((uint8_t *)dst + i, m, q);
        } else {
            __m512i u = _mm512_castps_si512(v);
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, lsb)), 16);
            __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
            _mm512_mask_cvtepi32_storeu_epi16((uint16_t *)dst + i, m, r);
        }
    }
}

/* One row of cpu_lowp_convert in plain C, which the compiler vectorises
 * (the Makefile gives this file -fno-trapping-math for the selects). */
static inline void convert_row_c(const float *src, size_t k, int int8, int is_signed, float to_steps, void *dst)
{
    if (int8 && is_signed) {
        int8_t *o = dst;
#pragma omp simd
        for (size_t i = 0; i < k; i++) o[i] = (int8_t)quantize(src[i], to_steps, -128.0f, 127.0f);
    } else if (int8) {
        uint8_t *o = dst;
#pragma omp simd
        for (size_t i = 0; i < k; i++) o[i] = (uint8_t)quantize(src[i], to_steps, 0.0f, 255.0f);
    } else {
        uint16_t *o = dst;
#pragma omp simd
        for (size_t i = 0; i < k; i++) o[i] = to_bf16(src[i]);
    }
}

/* The same compiled for AVX2: the baseline's 16-byte vectors ran 5x slower
 * than oneDNN's reorder (bench/NOTES.md section 36). */
__attribute__((target("avx2,fma"))) static void convert_row_avx2(const float *src, size_t k, int int8,
                                                                int is_signed, float to_steps, void *dst)
{
    convert_row_c(src, k, int8, is_signed, to_steps, dst);
}

void cpu_lowp_convert(const float *x, size_t rows, size_t padded_rows, size_t k, int int8, int is_signed,
                      float to_steps, int avx512, void *dst)
{
    const size_t elem = int8 ? 1 : 2;
    const int avx2 = !avx512 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < padded_rows; r++) {
        void *o = (char *)dst + r * k * elem;
        if (r >= rows) memset(o, 0, k * elem);
        else if (avx512) convert_row_avx512(x + r * k, k, int8, is_signed, to_steps, o);
        else if (avx2) convert_row_avx2(x + r * k, k, int8, is_signed, to_steps, o);
        else convert_row_c(x + r * k, k, int8, is_signed, to_steps, o);
    }
}

/* W as s8 with one symmetric scale per column (its largest |w| maps to
 * qmax), rounded to nearest even, into q in w's own layout: [k, cols], or
 * [cols, k] where transposed (oneDNN's reorder then does the transpose;
 * writing fc6's 12.8 M weights column by column was the slow part of its
 * load). The scales: input step x column scale. */
static void int8_columns(const float *w, int transposed, int k, int cols, int qmax, float src_step, int8_t *q,
                         float *scales)
{
    /* memory order: [outer][inner], the column index being outer (transposed) or inner */
    const size_t outer = transposed ? (size_t)cols : (size_t)k, inner = transposed ? (size_t)k : (size_t)cols;
    const float hi = (float)qmax;
    if (transposed) { /* a column is a row of w */
#pragma omp parallel for schedule(static)
        for (int n = 0; n < cols; n++) scales[n] = cpu_abs_max(w + (size_t)n * inner, inner);
    } else { /* amax per column, into scales, row by row */
        for (int n = 0; n < cols; n++) scales[n] = 0.0f;
        for (size_t o = 0; o < outer; o++) {
            const float *row = w + o * inner;
#pragma omp simd
            for (size_t i = 0; i < inner; i++) {
                float a = fabsf(row[i]);
                scales[i] = a > scales[i] ? a : scales[i];
            }
        }
    }
    for (int n = 0; n < cols; n++) scales[n] = scales[n] > 0.0f ? scales[n] / hi : 1.0f;
#pragma omp parallel for schedule(static)
    for (size_t o = 0; o < outer; o++) {
        const float *row = w + o * inner;
        int8_t *qrow = q + o * inner;
        if (transposed) {
            const float s = scales[o];
#pragma omp simd
            for (size_t i = 0; i < inner; i++) {
                float v = cpu_round_even(row[i] / s);
                qrow[i] = (int8_t)(v > hi ? hi : v < -hi ? -hi : v);
            }
        } else {
#pragma omp simd
            for (size_t i = 0; i < inner; i++) {
                float v = cpu_round_even(row[i] / scales[i]);
                qrow[i] = (int8_t)(v > hi ? hi : v < -hi ? -hi : v);
            }
        }
    }
    for (int n = 0; n < cols; n++) scales[n] *= src_step;
}

mr_status cpu_gemm_lowp_init(const cpu_ctx *c, const char *name, cpu_gemm_lowp *g, int k, int cols, int chunk_rows,
                             const float *w, int transposed, int epilogue, const float *bias, int relu,
                             float int8_range, int int8_signed, mr_error *err)
{
    mr_status st = MR_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    void *plain = NULL;
    memset(g, 0, sizeof *g);
    g->k = k;
    g->cols = cols;
    g->chunk_rows = chunk_rows;
    g->int8 = c->int8;
    g->is_signed = int8_signed;
    g->with_bias = epilogue;
    dnnl_data_type_t wdt = g->int8 ? dnnl_s8 : dnnl_bf16;
    dnnl_data_type_t sdt = !g->int8 ? dnnl_bf16 : int8_signed ? dnnl_s8 : dnnl_u8;
    dnnl_dims_t src_dims = {chunk_rows, k}, wei_dims = {k, cols}, dst_dims = {chunk_rows, cols}, bias_dims = {1, cols};
    dnnl_memory_desc_t wei_any, wei_plain;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->src_md, 2, src_dims, sdt, dnnl_ab), "matmul desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_any, 2, wei_dims, wdt, dnnl_format_tag_any), "matmul desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->dst_md, 2, dst_dims, dnnl_f32, dnnl_ab), "matmul desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&g->bias_md, 2, bias_dims, dnnl_f32, dnnl_ab), "matmul desc");

    g->bias = calloc((size_t)cols, sizeof(float));
    plain = malloc((size_t)k * (size_t)cols * (g->int8 ? 1 : 2));
    if (!g->bias || !plain) {
        st = mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
        goto done;
    }
    if (bias) memcpy(g->bias, bias, sizeof(float) * (size_t)cols);
    DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr");
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "attr");
    if (g->int8) {
        /* Without VNNI oneDNN sums u8 x s8 pairs in int16 (vpmaddubsw):
         * 255 * 127 * 2 would saturate, so the weights take 63 steps, as the
         * convolutions' do for a u8 input (backend_cpu.h, cpu_ctx.int8). Its
         * s8 x s8 matmul shifts the input to u8 (+128) and saturates the
         * same way (measured: 1% errors at 127 steps, AVX2), and unlike its
         * convolutions' reorder does not halve the weights itself: 63 for
         * both. */
        int qmax = c->int8_vnni ? 127 : 63;
        float src_step = int8_range / (int8_signed ? 127.0f : 255.0f);
        g->to_steps = 1.0f / src_step;
        g->scales = calloc((size_t)cols, sizeof(float));
        if (!g->scales) {
            st = mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
            goto done;
        }
        int8_columns(w, transposed, k, cols, qmax, src_step, plain, g->scales);
        /* oneDNN 2.x adds an int8 matmul's bias before the output scale
         * (dst = scale * (sum + bias)): the bias in accumulator units */
        for (int n = 0; n < cols; n++) g->bias[n] /= g->scales[n];
        DNNL_TRY(dnnl_primitive_attr_set_output_scales(attr, cols, 1 << 1, g->scales), "output scales");
    } else {
        uint16_t *b = plain; /* in w's layout, as int8_columns */
        for (size_t i = 0; i < (size_t)k * (size_t)cols; i++) b[i] = to_bf16(w[i]);
    }
    DNNL_TRY(dnnl_post_ops_create(&ops), "post-ops");
    if (relu && epilogue) DNNL_TRY(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f), "relu post-op");
    DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, ops), "attr");
    dnnl_matmul_desc_t md;
    DNNL_TRY(dnnl_matmul_desc_init(&md, &g->src_md, &wei_any, epilogue ? &g->bias_md : NULL, &g->dst_md),
             "matmul desc");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &md, attr, c->engine, NULL), "matmul");
    g->wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    g->scratch_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    DNNL_TRY(dnnl_primitive_create(&g->prim, pd), "matmul");
    /* the weights, once, into the layout the primitive chose */
    g->weights = cpu_alloc(dnnl_memory_desc_get_size(&g->wei_md));
    if (!g->weights) {
        st = mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
        goto done;
    }
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_plain, 2, wei_dims, wdt, transposed ? dnnl_ba : dnnl_ab),
             "weights desc");
    st = cpu_reorder_once(c, name, &wei_plain, plain, &g->wei_md, g->weights, err);
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    free(plain);
    if (st != MR_OK) cpu_gemm_lowp_free(g);
    return st;
}

void cpu_gemm_lowp_free(cpu_gemm_lowp *g)
{
    if (g->prim) dnnl_primitive_destroy(g->prim);
    free(g->weights);
    free(g->scales);
    free(g->bias);
    memset(g, 0, sizeof *g);
}

mr_status cpu_gemm_lowp_convert(cpu_ctx *c, const cpu_gemm_lowp *g, const float *x, int rows, mr_error *err)
{
    const size_t padded = ((size_t)rows + (size_t)g->chunk_rows - 1) / (size_t)g->chunk_rows * (size_t)g->chunk_rows;
    MR_TRY(cpu_lowp_src_reserve(c, padded * (size_t)g->k * (g->int8 ? 1 : 2), err));
    cpu_lowp_convert(x, (size_t)rows, padded, (size_t)g->k, g->int8, g->is_signed, g->to_steps, c->avx512,
                     c->lowp_src);
    return MR_OK;
}

mr_status cpu_gemm_lowp_room(cpu_ctx *c, const cpu_gemm_lowp *g, float **room, mr_error *err)
{
    const size_t sp = (g->scratch_bytes + 63) / 64 * 64;
    MR_TRY(cpu_scratch_reserve(c, sp + sizeof(float) * (size_t)g->chunk_rows * (size_t)g->cols, err));
    *room = (float *)((char *)c->scratch + sp);
    return MR_OK;
}

mr_status cpu_gemm_lowp_chunk(cpu_ctx *c, const char *name, const cpu_gemm_lowp *g, int chunk, float *dst,
                              mr_error *err)
{
    mr_status st = MR_OK;
    dnnl_memory_t m[5] = {0};
    const size_t elem = g->int8 ? 1 : 2;
    void *src = (char *)c->lowp_src + (size_t)chunk * (size_t)g->chunk_rows * (size_t)g->k * elem;
    dnnl_memory_desc_t sp_md;
    dnnl_dims_t sp_dims = {(dnnl_dim_t)g->scratch_bytes};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&sp_md, 1, sp_dims, dnnl_u8, dnnl_a), "memory");
    DNNL_TRY(dnnl_memory_create(&m[0], &g->src_md, c->engine, src), "memory");
    DNNL_TRY(dnnl_memory_create(&m[1], &g->wei_md, c->engine, g->weights), "memory");
    DNNL_TRY(dnnl_memory_create(&m[2], &g->bias_md, c->engine, g->bias), "memory");
    DNNL_TRY(dnnl_memory_create(&m[3], &g->dst_md, c->engine, dst), "memory");
    DNNL_TRY(dnnl_memory_create(&m[4], &sp_md, c->engine, c->scratch), "memory");
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[3]},
                               {DNNL_ARG_SCRATCHPAD, m[4]}, {DNNL_ARG_BIAS, m[2]}};
    DNNL_TRY(dnnl_primitive_execute(g->prim, c->stream, g->with_bias ? 5 : 4, args), "matmul");
    DNNL_TRY(dnnl_stream_wait(c->stream), "matmul");
done:
    for (int i = 0; i < 5; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    return st;
}

mr_status cpu_gemm_lowp_run(cpu_ctx *c, const char *name, const cpu_gemm_lowp *g, const float *x, int rows,
                            float *y, size_t y_cap, mr_error *err)
{
    if (rows == 0) return MR_OK;
    float *tail;
    MR_TRY(cpu_gemm_lowp_convert(c, g, x, rows, err));
    MR_TRY(cpu_gemm_lowp_room(c, g, &tail, err));
    const size_t chunk_out = (size_t)g->chunk_rows * (size_t)g->cols;
    const int chunks = (rows + g->chunk_rows - 1) / g->chunk_rows;
    for (int ch = 0; ch < chunks; ch++) {
        const size_t r0 = (size_t)ch * (size_t)g->chunk_rows;
        float *dst = y + r0 * (size_t)g->cols;
        int inside = r0 * (size_t)g->cols + chunk_out <= y_cap;
        MR_TRY(cpu_gemm_lowp_chunk(c, name, g, ch, inside ? dst : tail, err));
        if (!inside) memcpy(dst, tail, sizeof(float) * ((size_t)rows - r0) * (size_t)g->cols);
    }
    return MR_OK;
}
