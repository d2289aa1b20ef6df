/* Winograd F(4x4,3x3) on the CPU (AVX2 + FMA; AVX-512 where the CPU has
 * it, conv_winograd_avx512.c): see conv_winograd.h.
 *
 * The tiles are processed in chunks of T (a multiple of the micro-kernel's
 * 6 rows), each chunk by one thread, start to end:
 *   1. input transform of the chunk: V[T][36][cin] (one 8-lane vector per
 *      8 channels of a pixel, half a block when it is 16: the header's
 *      transforms on WINO_T = 8 floats; with AVX-512 and a 16-channel
 *      block, one 16-lane vector per pixel);
 *   2. 36 GEMMs M[k] = V[k] x U[k], [T x cin] x [cin x cout], by a 6x16
 *      register-blocked FMA kernel (12 accumulators), or 6x32 in AVX-512
 *      (the same sums in the same order: the same bits);
 *   3. output transform of M[T][36][cout] with bias, residual and ReLU,
 *      clipped at the image edge, straight into y.
 * T (chunk_max) trades the chunk's V and M (36 T (cin + cout) floats, in
 * L2/L3) against how often U streams from memory: once per chunk. */
#include <stdint.h>
#include <string.h>

#include <omp.h>

typedef float wino_v8 __attribute__((vector_size(32), aligned(32)));
typedef float wino_v8u __attribute__((vector_size(32), aligned(4), may_alias)); /* unaligned access */
#define WINO_T wino_v8
#include "cpu/conv_winograd_cpu.h"

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

/* Tiles per chunk, at most (a multiple of 6): 96, fewer only where V and M
 * of a chunk would pass 16 MiB per thread. The GEMMs read one point's rows
 * of V (T x cin) once per 16-wide panel of U, from L2; a larger T reads U
 * (36 cin cout floats: 37.7 MB at 512 channels, more than L3) from memory
 * fewer times. Measured (bench/NOTES.md section 6), 2 threads: 96 was as
 * fast as 24, 48 or 144 within the noise at 64..128 channels and 10-30%
 * faster than 24 at 256..512. */
static int chunk_max(const mr_wino_params *p)
{
    size_t t = ((size_t)16 << 20) / (sizeof(float) * (row_floats(p->cin) + row_floats(p->cout)));
    if (t > 96) t = 96;
    t = t / KROWS * KROWS;
    return t < KROWS ? KROWS : (int)t;
}

/* The chunk actually used: as many chunks as chunk_max needs, rounded up
 * to a multiple of the thread count and shared evenly, so that every
 * thread gets the same number of tiles (a 50x76 map has 247 tiles: 3
 * chunks of 96 would leave one thread idle a third of the time). */
static int chunk_tiles(const mr_wino_params *p, long tiles, int threads)
{
    long max = chunk_max(p);
    long chunks = (tiles + max - 1) / max;
    chunks = (chunks + threads - 1) / threads * threads;
    long t = (tiles + chunks - 1) / chunks;
    t = (t + KROWS - 1) / KROWS * KROWS;
    return t < max ? (int)t : (int)max;
}

/* One thread's V and M for chunks of T tiles, rounded to a cache line. */
static size_t chunk_bytes(const mr_wino_params *p, int T)
{
    size_t per = sizeof(float) * (size_t)T * (row_floats(p->cin) + row_floats(p->cout));
    return (per + 63) & ~(size_t)63;
}

size_t wino_scratch_bytes(const mr_wino_params *p, int threads)
{
    return chunk_bytes(p, chunk_max(p)) * (size_t)(threads > 0 ? threads : 1);
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

/* input_chunk8 and output_chunk8: 8 channels a vector, either block. */
#define WINO_TU wino_v8u
#define WINO_LANES 8
#define WINO_TARGET AVX2
#define WINO_SCOPE static
#define WINO_RELU(v) ((wino_v8)_mm256_max_ps((__m256)(v), _mm256_setzero_ps()))
#define WINO_CHUNK(f) f##8
#include "cpu/conv_winograd_chunks.inc"

/* --------------------------------------------------------------- GEMM */

/* C[6][16] = A[6 rows, stride lda][cin] x B[cin][16] (a panel): 12
 * accumulators in named registers (an array of them spills under -O2). */
AVX2 static void kernel6x16(int cin, const float *a, size_t lda, const float *b, float *c, size_t ldc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int ci = 0; ci < cin; ci++, b += 16) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), av;
        av = _mm256_broadcast_ss(a0 + ci);
        c00 = _mm256_fmadd_ps(av, b0, c00);
        c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a1 + ci);
        c10 = _mm256_fmadd_ps(av, b0, c10);
        c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a2 + ci);
        c20 = _mm256_fmadd_ps(av, b0, c20);
        c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a3 + ci);
        c30 = _mm256_fmadd_ps(av, b0, c30);
        c31 = _mm256_fmadd_ps(av, b1, c31);
        av = _mm256_broadcast_ss(a4 + ci);
        c40 = _mm256_fmadd_ps(av, b0, c40);
        c41 = _mm256_fmadd_ps(av, b1, c41);
        av = _mm256_broadcast_ss(a5 + ci);
        c50 = _mm256_fmadd_ps(av, b0, c50);
        c51 = _mm256_fmadd_ps(av, b1, c51);
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01), c += ldc;
    _mm256_storeu_ps(c, c10), _mm256_storeu_ps(c + 8, c11), c += ldc;
    _mm256_storeu_ps(c, c20), _mm256_storeu_ps(c + 8, c21), c += ldc;
    _mm256_storeu_ps(c, c30), _mm256_storeu_ps(c + 8, c31), c += ldc;
    _mm256_storeu_ps(c, c40), _mm256_storeu_ps(c + 8, c41), c += ldc;
    _mm256_storeu_ps(c, c50), _mm256_storeu_ps(c + 8, c51);
}

/* The same for a last panel 8 wide (cout % 16 == 8). */
AVX2 static void kernel6x8(int cin, const float *a, size_t lda, const float *b, float *c, size_t ldc)
{
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int ci = 0; ci < cin; ci++, b += 8) {
        __m256 b0 = _mm256_load_ps(b);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + ci), b0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + ci), b0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a2 + ci), b0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a3 + ci), b0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a4 + ci), b0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a5 + ci), b0, c5);
    }
    _mm256_storeu_ps(c, c0), _mm256_storeu_ps(c + ldc, c1), _mm256_storeu_ps(c + 2 * ldc, c2);
    _mm256_storeu_ps(c + 3 * ldc, c3), _mm256_storeu_ps(c + 4 * ldc, c4), _mm256_storeu_ps(c + 5 * ldc, c5);
}

/* Prefetches part g of `groups` of the `bytes` at `next` into L1. Spread
 * over the row groups of the current panel, the next panel arrives while
 * this one is in use: its first use in a chunk otherwise waits on L3 or
 * memory (U is 2.4-37.7 MB). bench/NOTES.md section 8: -4 to -7% per
 * 256-channel layer. */
AVX2 static void prefetch_part(const char *next, size_t bytes, int g, int groups)
{
    size_t per = (bytes / (size_t)groups + 63) & ~(size_t)63, end = per * (size_t)(g + 1);
    if (end > bytes) end = bytes;
    for (size_t q = per * (size_t)g; q < end; q += 64) _mm_prefetch(next + q, _MM_HINT_T0);
}

/* M[k] = V[k] x U[k] for the 36 points of one chunk of T tiles. The panels
 * lie in U in the order they are used, so the next one starts where this
 * one ends. With AVX-512 (`wide512`), two 16-wide panels at a time. */
AVX2 static void gemm_chunk(const mr_wino_params *p, const float *V, const float *u, float *M, int T, int wide512)
{
    int cin = p->cin, cout = p->cout, obs = (cout + 15) / 16, groups = T / KROWS;
    const float *u_end = u + wino_weights_floats(p);
    size_t lda = row_floats(cin), ldc = row_floats(cout);
    for (int k = 0; k < WINO_POINTS; k++) {
        const float *Vk = V + (size_t)k * cin;
        float *Mk = M + (size_t)k * cout;
        for (int ob = 0; ob < obs;) {
            const float *panel = u + panel_offset(p, k, ob);
            int width = cout - ob * 16 >= 32 && wide512 ? 32 : cout - ob * 16 >= 16 ? 16 : 8;
            const float *next = panel + (size_t)width * (size_t)cin;
            size_t next_bytes = sizeof(float) * (size_t)(u_end - next);
            if (next_bytes > sizeof(float) * (size_t)width * (size_t)cin)
                next_bytes = sizeof(float) * (size_t)width * (size_t)cin;
            for (int t = 0; t < T; t += KROWS) {
                prefetch_part((const char *)next, next_bytes, t / KROWS, groups);
                float *c = Mk + t * ldc + ob * 16;
                if (width == 32) wino_kernel6x32(cin, Vk + t * lda, lda, panel, panel + (size_t)16 * cin, c, ldc);
                else if (width == 16) kernel6x16(cin, Vk + t * lda, lda, panel, c, ldc);
                else kernel6x8(cin, Vk + t * lda, lda, panel, c, ldc);
            }
            ob += width == 32 ? 2 : 1;
        }
    }
}

void wino_forward(const mr_wino_params *p, const float *u, const float *bias, const float *x, int n, int h, int w,
                  float *y, int accumulate, int threads, void *scratch)
{
    int th = (h + WINO_TILE - 1) / WINO_TILE, tw = (w + WINO_TILE - 1) / WINO_TILE;
    long tiles = (long)n * th * tw;
    if (threads < 1) threads = 1;
    int T = chunk_tiles(p, tiles, threads);
    long chunks = (tiles + T - 1) / T;
    size_t per = chunk_bytes(p, T);
    if (chunks < threads) threads = (int)chunks;
    if (threads < 1) return;
    __builtin_cpu_init();
    int wide512 = p->avx512 && __builtin_cpu_supports("avx512f");
    /* The 16-lane transforms read a pixel of a 16-channel block as one
     * aligned zmm vector (V's and M's rows are multiples of 64 bytes then). */
    int lanes16 = wide512 && p->block == 16 && ((uintptr_t)x | (uintptr_t)y | (uintptr_t)scratch) % 64 == 0;
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num();
        float *V = (float *)((char *)scratch + per * (size_t)id);
        float *M = V + (size_t)T * row_floats(p->cin);
#pragma omp for schedule(static)
        for (long ch = 0; ch < chunks; ch++) {
            long t0 = ch * T;
            int count = tiles - t0 < T ? (int)(tiles - t0) : T;
            if (lanes16) wino_input_chunk16(p, x, h, w, th, tw, t0, count, T, V);
            else input_chunk8(p, x, h, w, th, tw, t0, count, T, V);
            gemm_chunk(p, V, u, M, T, wide512);
            if (lanes16) wino_output_chunk16(p, M, bias, y, h, w, th, tw, t0, count, accumulate);
            else output_chunk8(p, M, bias, y, h, w, th, tw, t0, count, accumulate);
        }
    }
}
