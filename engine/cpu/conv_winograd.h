/* Winograd F(4x4,3x3) convolution: 3x3, stride 1, pad 1, dilation 1,
 * groups 1, Cin and Cout multiples of the block B (8 or 16).
 *
 * Contract (CPU, conv_winograd.c):
 *   x  [n][cin/B][h][w][B]   nChw<B>c (oneDNN's blocked layout, the CPU
 *                            backend's layout between convolutions)
 *   y  [n][cout/B][h][w][B]  the same, same h, w (pad 1 keeps the size)
 *   y = act(conv3x3(x, W) + bias + (accumulate ? y_before : 0))
 * i.e. the bias, the residual sum and the ReLU are fused into the output
 * transform, as oneDNN's post-ops do on the direct path.
 *
 * Algorithm (Lavin & Gray 2015): the output is cut into 4x4 tiles; each
 * needs a 6x6 input patch d (rows/cols -1..4 around the tile, zero outside
 * the image). With the interpolation points 0, 1, -1, 2, -2 and infinity:
 *   U = G g G^T       (6x6, per (cout, cin), once per layer)
 *   V = B^T d B       (6x6, per (tile, cin))
 *   M[k] = sum_cin V[k] U[k]   for the 36 points k: 36 GEMMs
 *                     [tiles x cin] x [cin x cout]
 *   Y = A^T M A       (4x4, per (tile, cout))
 *
 *         | 1/4    0     0   |          | 4  0 -5  0  1  0 |
 *         | -1/6 -1/6  -1/6  |          | 0 -4 -4  1  1  0 |
 *   G  =  | -1/6  1/6  -1/6  |   B^T =  | 0  4 -4 -1  1  0 |
 *         | 1/24 1/12   1/6  |          | 0 -2 -1  2  1  0 |
 *         | 1/24 -1/12  1/6  |          | 0  2 -1 -2  1  0 |
 *         |  0     0     1   |          | 0  4  0 -5  0  1 |
 *
 *          | 1  1  1  1  1  0 |
 *   A^T =  | 0  1 -1  2 -2  0 |
 *          | 0  1  1  4  4  0 |
 *          | 0  1 -1  8 -8  1 |
 *
 * 36 multiplies per output 4x4 tile and channel pair instead of 144: 4x
 * fewer in the GEMMs; the transforms are O(1/cout) and O(1/cin) of that.
 * Numerics: the +-2 points amplify rounding (A^T's 8s, G's 1/24), so fp32
 * results differ from a direct convolution's by ~1e-6..1e-5 relative, not
 * ~1e-7 (tests/unit/test_conv_winograd.c measures both against a double
 * reference).
 *
 * The per-tile transforms below are the shared math (MR_HD, so a CUDA path
 * can call them). They work on WINO_T, float unless the includer defines it
 * first: the CPU file defines it as an 8-float GCC vector, one lane per
 * channel of 8 (half a block when B is 16), so the same source is its SIMD
 * code. Arrays
 * are row-major; point k of a 6x6 tile is k = 6*row + col. */
#ifndef MR_CONV_WINOGRAD_H
#define MR_CONV_WINOGRAD_H

#include <stddef.h>

#include "core/hd.h"

#ifndef WINO_T
#define WINO_T float
#endif

#define WINO_TILE 4  /* output tile side */
#define WINO_ALPHA 6 /* transformed tile side: 4 + 3 - 1 */
#define WINO_POINTS 36

/* ----------------------------------------------------------- shared math */

/* One axis of B^T d: 6 values (stride ds) -> 6 (stride vs). */
MR_HD static inline void wino43_bt_1d(const WINO_T *d, int ds, WINO_T *v, int vs)
{
    WINO_T d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds], d5 = d[5 * ds];
    /* Shared subexpressions of rows 1-4: (d4 - 4 d2) +- (d3 - 4 d1), (d4 - d2) +- 2 (d3 - d1). */
    WINO_T a = d4 - 4.0f * d2, b = d3 - 4.0f * d1;
    WINO_T c = d4 - d2, e = 2.0f * (d3 - d1);
    v[0] = 4.0f * d0 - 5.0f * d2 + d4;
    v[vs] = a + b;
    v[2 * vs] = a - b;
    v[3 * vs] = c + e;
    v[4 * vs] = c - e;
    v[5 * vs] = 4.0f * d1 - 5.0f * d3 + d5;
}

/* One axis of A^T m: 6 values (stride ms) -> 4 (stride os). */
MR_HD static inline void wino43_at_1d(const WINO_T *m, int ms, WINO_T *o, int os)
{
    WINO_T m0 = m[0], m1 = m[ms], m2 = m[2 * ms], m3 = m[3 * ms], m4 = m[4 * ms], m5 = m[5 * ms];
    WINO_T s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
    o[0] = m0 + s12 + s34;
    o[os] = d12 + 2.0f * d34;
    o[2 * os] = s12 + 4.0f * s34;
    o[3 * os] = d12 + 8.0f * d34 + m5;
}

/* One axis of G g: 3 values (stride gs) -> 6 (stride us). */
MR_HD static inline void wino43_g_1d(const WINO_T *g, int gs, WINO_T *u, int us)
{
    WINO_T g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    u[0] = g0 * (1.0f / 4);
    u[us] = (g0 + g1 + g2) * (-1.0f / 6);
    u[2 * us] = (g0 - g1 + g2) * (-1.0f / 6);
    u[3 * us] = g0 * (1.0f / 24) + g1 * (1.0f / 12) + g2 * (1.0f / 6);
    u[4 * us] = g0 * (1.0f / 24) - g1 * (1.0f / 12) + g2 * (1.0f / 6);
    u[5 * us] = g2;
}

/* V = B^T d B: d[36] -> v[36]. */
MR_HD static inline void wino43_input_tile(const WINO_T *d, WINO_T *v)
{
    WINO_T t[WINO_POINTS];
    for (int j = 0; j < 6; j++) wino43_bt_1d(d + j, 6, t + j, 6);
    for (int i = 0; i < 6; i++) wino43_bt_1d(t + 6 * i, 1, v + 6 * i, 1);
}

/* Y = A^T M A: m[36] -> o[16] (4x4). */
MR_HD static inline void wino43_output_tile(const WINO_T *m, WINO_T *o)
{
    WINO_T t[24]; /* 4 x 6 */
    for (int j = 0; j < 6; j++) wino43_at_1d(m + j, 6, t + j, 6);
    for (int i = 0; i < 4; i++) wino43_at_1d(t + 6 * i, 1, o + 4 * i, 1);
}

/* U = G g G^T: g[9] (3x3) -> u[36]. */
MR_HD static inline void wino43_weight_tile(const WINO_T *g, WINO_T *u)
{
    WINO_T t[18]; /* 6 x 3 */
    for (int j = 0; j < 3; j++) wino43_g_1d(g + j, 3, t + j, 3);
    for (int i = 0; i < 6; i++) wino43_g_1d(t + 3 * i, 1, u + 6 * i, 1);
}

/* ------------------------------------------------------------ CPU entry */

typedef struct {
    int cin, cout; /* multiples of block */
    int relu;
    int block;     /* x's and y's channel block, 8 or 16 (wino_forward only) */
    int avx512;    /* non-zero: the AVX-512 GEMM kernel and (block 16,
                      64-byte-aligned data) 16-lane transforms where the
                      CPU has it; else, and on other CPUs, the AVX2 code */
    int x_nhwc;    /* non-zero: x is NHWC, not nChw<block>c (y stays
                      blocked). A group of 8 or 16 channels of a pixel is
                      one contiguous vector in both; only the strides
                      differ, so the results are the same bits */
} mr_wino_params;

/* Whether this CPU can run the CPU path (AVX2 and FMA). */
int wino_cpu_supported(void);

/* Floats of the transformed weights U: 36 * cin * cout. */
size_t wino_weights_floats(const mr_wino_params *p);

/* U from PyTorch's OIHW [cout][cin][3][3], into the GEMM layout
 * u[36][cout/16 panels][cin][16] (a last panel of 8 when cout % 16 == 8). */
void wino_weights_transform(const mr_wino_params *p, const float *w_oihw, float *u);

/* Scratch for wino_forward with `threads` threads (a chunk of tiles'
 * V and M per thread). */
size_t wino_scratch_bytes(const mr_wino_params *p, int threads);

/* y = act(conv(x) + bias (+ y)) on nChw<block>c tensors of n x h x w (x
 * NHWC where p->x_nhwc); scratch of wino_scratch_bytes(p, threads),
 * 64-byte aligned. x and y must be 32-byte aligned (8 channels of a pixel
 * are read as an aligned vector) and must not overlap. */
void wino_forward(const mr_wino_params *p, const float *u, const float *bias, const float *x, int n, int h, int w,
                  float *y, int accumulate, int threads, void *scratch);

#endif
