/* Winograd F(4x4,3x3) on the CPU (AVX2 + FMA): see conv_winograd.h.
 *
 * The tiles are processed in chunks of T (a multiple of the micro-kernel's
 * 6 rows), each chunk by one thread, start to end:
 *   1. input transform of the chunk: V[36][T][cin] (one 8-lane vector per
 *      nChw8c channel block: the header's transforms on WINO_T = 8 floats);
 *   2. 36 GEMMs M[k] = V[k] x U[k], [T x cin] x [cin x cout], by a 6x16
 *      register-blocked FMA kernel (12 accumulators);
 *   3. output transform of M[36][T][cout] with bias, residual and ReLU,
 *      clipped at the image edge, straight into y.
 * T is chosen so that V and M (36 T (cin + cout) floats) stay within about
 * 1 MiB, L2 plus a little: the GEMMs then read V and M from cache and only
 * U streams from L3/memory, once per chunk. */
#include <string.h>

#include <omp.h>

typedef float wino_v8 __attribute__((vector_size(32), aligned(32)));
typedef float wino_v8u __attribute__((vector_size(32), aligned(4), may_alias)); /* unaligned access */
#define WINO_T wino_v8
#include "conv_winograd.h"

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define KROWS 6 /* micro-kernel rows (tiles) */

int wino_cpu_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

size_t wino_weights_floats(const mr_wino_params *p)
{
    return (size_t)WINO_POINTS * (size_t)p->cin * (size_t)p->cout;
}

/* Tiles per chunk: V and M of a chunk in ~1 MiB, 6..96 tiles. */
static int chunk_tiles(const mr_wino_params *p)
{
    size_t per_tile = sizeof(float) * WINO_POINTS * (size_t)(p->cin + p->cout);
    size_t t = ((size_t)1 << 20) / per_tile;
    t = t / KROWS * KROWS;
    if (t < KROWS) t = KROWS;
    if (t > 96) t = 96;
    return (int)t;
}

size_t wino_scratch_bytes(const mr_wino_params *p, int threads)
{
    size_t per = sizeof(float) * WINO_POINTS * (size_t)chunk_tiles(p) * (size_t)(p->cin + p->cout);
    per = (per + 63) & ~(size_t)63;
    return per * (size_t)(threads > 0 ? threads : 1);
}

/* Panel of cout block `ob` (16 wide, or 8 for a last odd block) at point k. */
static size_t panel_offset(const mr_wino_params *p, int k, int ob)
{
    return (size_t)k * (size_t)p->cin * (size_t)p->cout + (size_t)ob * 16 * (size_t)p->cin;
}

void wino_weights_transform(const mr_wino_params *p, const float *w_oihw, float *u)
{
    int cin = p->cin, cout = p->cout;
    /* 8 output channels at a time, one per lane. */
    for (int co8 = 0; co8 < cout; co8 += 8) {
        int ob = co8 / 16, width = cout - ob * 16 < 16 ? 8 : 16, lane0 = co8 - ob * 16;
        for (int ci = 0; ci < cin; ci++) {
            wino_v8 g[9], t[WINO_POINTS];
            for (int e = 0; e < 9; e++)
                for (int l = 0; l < 8; l++) g[e][l] = w_oihw[((size_t)(co8 + l) * cin + ci) * 9 + e];
            wino43_weight_tile(g, t);
            for (int k = 0; k < WINO_POINTS; k++) {
                float *dst = u + panel_offset(p, k, ob) + (size_t)ci * width + lane0;
                for (int l = 0; l < 8; l++) dst[l] = t[k][l];
            }
        }
    }
}

/* ---------------------------------------------------------- transforms */

/* Input transform of tiles [t0, t0 + count) of the image (tile index over
 * n, tile row, tile column) into V[36][T][cin]; rows count..T-1 are zeroed
 * (the kernel always runs 6 rows). */
AVX2 static void input_chunk(const mr_wino_params *p, const float *x, int h, int w, int th, int tw, long t0,
                             int count, int T, float *V)
{
    int cb8 = p->cin / 8;
    size_t kstride = (size_t)T * (size_t)p->cin;
    for (int i = 0; i < T; i++) {
        if (i >= count) {
            for (int k = 0; k < WINO_POINTS; k++) memset(V + k * kstride + (size_t)i * p->cin, 0, sizeof(float) * p->cin);
            continue;
        }
        long t = t0 + i;
        int n = (int)(t / ((long)th * tw)), r = (int)(t % ((long)th * tw));
        int y0 = (r / tw) * WINO_TILE - 1, x0 = (r % tw) * WINO_TILE - 1;
        int inside = y0 >= 0 && x0 >= 0 && y0 + WINO_ALPHA <= h && x0 + WINO_ALPHA <= w;
        for (int cb = 0; cb < cb8; cb++) {
            const float *src = x + ((size_t)n * cb8 + cb) * (size_t)h * w * 8;
            wino_v8 d[WINO_POINTS], v[WINO_POINTS];
            if (inside) {
                for (int a = 0; a < WINO_ALPHA; a++)
                    for (int b = 0; b < WINO_ALPHA; b++)
                        d[a * 6 + b] = *(const wino_v8u *)(src + ((size_t)(y0 + a) * w + x0 + b) * 8);
            } else {
                for (int a = 0; a < WINO_ALPHA; a++)
                    for (int b = 0; b < WINO_ALPHA; b++) {
                        int yy = y0 + a, xx = x0 + b;
                        if (yy < 0 || yy >= h || xx < 0 || xx >= w) d[a * 6 + b] = (wino_v8){0};
                        else d[a * 6 + b] = *(const wino_v8u *)(src + ((size_t)yy * w + xx) * 8);
                    }
            }
            wino43_input_tile(d, v);
            float *dst = V + (size_t)i * p->cin + (size_t)cb * 8;
            for (int k = 0; k < WINO_POINTS; k++) *(wino_v8u *)(dst + k * kstride) = v[k];
        }
    }
}

/* Output transform of the chunk's M[36][T][cout] into y, with bias,
 * residual (accumulate) and ReLU; tiles are clipped at the image edge. */
AVX2 static void output_chunk(const mr_wino_params *p, const float *M, const float *bias, float *y, int h, int w,
                              int th, int tw, long t0, int count, int T, int accumulate)
{
    int ob8 = p->cout / 8;
    size_t kstride = (size_t)T * (size_t)p->cout;
    for (int i = 0; i < count; i++) {
        long t = t0 + i;
        int n = (int)(t / ((long)th * tw)), r = (int)(t % ((long)th * tw));
        int y0 = (r / tw) * WINO_TILE, x0 = (r % tw) * WINO_TILE;
        int rows = h - y0 < WINO_TILE ? h - y0 : WINO_TILE, cols = w - x0 < WINO_TILE ? w - x0 : WINO_TILE;
        for (int ob = 0; ob < ob8; ob++) {
            wino_v8 m[WINO_POINTS], o[16];
            const float *src = M + (size_t)i * p->cout + (size_t)ob * 8;
            for (int k = 0; k < WINO_POINTS; k++) m[k] = *(const wino_v8u *)(src + k * kstride);
            wino43_output_tile(m, o);
            wino_v8 b = *(const wino_v8u *)(bias + ob * 8), zero = {0};
            float *dst = y + ((size_t)n * ob8 + ob) * (size_t)h * w * 8;
            for (int a = 0; a < rows; a++)
                for (int c = 0; c < cols; c++) {
                    wino_v8u *q = (wino_v8u *)(dst + ((size_t)(y0 + a) * w + x0 + c) * 8);
                    wino_v8 v = o[a * 4 + c] + b;
                    if (accumulate) v += *q;
                    if (p->relu) v = (wino_v8)_mm256_max_ps((__m256)v, (__m256)zero);
                    *q = v;
                }
        }
    }
}

/* --------------------------------------------------------------- GEMM */

/* C[6][nv*8] = A[6 rows, stride lda][cin] x B[cin][nv*8] (a panel). */
#define KERNEL(NV)                                                                                         \
    AVX2 static void kernel6x##NV(int cin, const float *a, size_t lda, const float *b, float *c, size_t ldc) \
    {                                                                                                      \
        __m256 acc[KROWS][NV];                                                                             \
        for (int r = 0; r < KROWS; r++)                                                                    \
            for (int j = 0; j < NV; j++) acc[r][j] = _mm256_setzero_ps();                                  \
        const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda,       \
                    *a5 = a + 5 * lda;                                                                     \
        for (int ci = 0; ci < cin; ci++) {                                                                 \
            __m256 bv[NV];                                                                                 \
            for (int j = 0; j < NV; j++) bv[j] = _mm256_load_ps(b + (size_t)ci * NV * 8 + j * 8);          \
            __m256 av;                                                                                     \
            av = _mm256_broadcast_ss(a0 + ci);                                                             \
            for (int j = 0; j < NV; j++) acc[0][j] = _mm256_fmadd_ps(av, bv[j], acc[0][j]);                \
            av = _mm256_broadcast_ss(a1 + ci);                                                             \
            for (int j = 0; j < NV; j++) acc[1][j] = _mm256_fmadd_ps(av, bv[j], acc[1][j]);                \
            av = _mm256_broadcast_ss(a2 + ci);                                                             \
            for (int j = 0; j < NV; j++) acc[2][j] = _mm256_fmadd_ps(av, bv[j], acc[2][j]);                \
            av = _mm256_broadcast_ss(a3 + ci);                                                             \
            for (int j = 0; j < NV; j++) acc[3][j] = _mm256_fmadd_ps(av, bv[j], acc[3][j]);                \
            av = _mm256_broadcast_ss(a4 + ci);                                                             \
            for (int j = 0; j < NV; j++) acc[4][j] = _mm256_fmadd_ps(av, bv[j], acc[4][j]);                \
            av = _mm256_broadcast_ss(a5 + ci);                                                             \
            for (int j = 0; j < NV; j++) acc[5][j] = _mm256_fmadd_ps(av, bv[j], acc[5][j]);                \
        }                                                                                                  \
        for (int r = 0; r < KROWS; r++)                                                                    \
            for (int j = 0; j < NV; j++) _mm256_storeu_ps(c + r * ldc + j * 8, acc[r][j]);                 \
    }
KERNEL(2)
KERNEL(1)

/* M[k] = V[k] x U[k] for the 36 points of one chunk of T tiles. */
AVX2 static void gemm_chunk(const mr_wino_params *p, const float *V, const float *u, float *M, int T)
{
    int cin = p->cin, cout = p->cout, obs = (cout + 15) / 16;
    for (int k = 0; k < WINO_POINTS; k++) {
        const float *Vk = V + (size_t)k * T * cin;
        float *Mk = M + (size_t)k * T * cout;
        for (int ob = 0; ob < obs; ob++) {
            const float *panel = u + panel_offset(p, k, ob);
            int wide = cout - ob * 16 >= 16;
            for (int t = 0; t < T; t += KROWS) {
                if (wide) kernel6x2(cin, Vk + (size_t)t * cin, cin, panel, Mk + (size_t)t * cout + ob * 16, cout);
                else kernel6x1(cin, Vk + (size_t)t * cin, cin, panel, Mk + (size_t)t * cout + ob * 16, cout);
            }
        }
    }
}

void wino_forward(const mr_wino_params *p, const float *u, const float *bias, const float *x, int n, int h, int w,
                  float *y, int accumulate, int threads, void *scratch)
{
    int th = (h + WINO_TILE - 1) / WINO_TILE, tw = (w + WINO_TILE - 1) / WINO_TILE;
    long tiles = (long)n * th * tw;
    int T = chunk_tiles(p);
    long chunks = (tiles + T - 1) / T;
    size_t per = sizeof(float) * WINO_POINTS * (size_t)T * (size_t)(p->cin + p->cout);
    per = (per + 63) & ~(size_t)63;
    if (threads < 1) threads = 1;
    if (chunks < threads) threads = (int)chunks;
    if (threads < 1) return;
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num();
        float *V = (float *)((char *)scratch + per * (size_t)id);
        float *M = V + (size_t)WINO_POINTS * T * p->cin;
#pragma omp for schedule(static)
        for (long ch = 0; ch < chunks; ch++) {
            long t0 = ch * T;
            int count = tiles - t0 < T ? (int)(tiles - t0) : T;
            input_chunk(p, x, h, w, th, tw, t0, count, T, V);
            gemm_chunk(p, V, u, M, T);
            output_chunk(p, M, bias, y, h, w, th, tw, t0, count, T, accumulate);
        }
    }
}
