/* The AVX-512 parts of the CPU Winograd F(4x4,3x3) (conv_winograd.c
 * drives them, only where the CPU has AVX-512F): the 6x32 GEMM kernel and
 * the 16-lane input and output transforms of a 16-channel block, one zmm
 * vector per pixel. Each output sums the same products, and each
 * transform lane does the same arithmetic, in the same order as the AVX2
 * code, so both give the same bits (tests/unit/test_conv_winograd.c
 * compares them; MR_CPU_AVX512=0 selects the AVX2 code). bench/NOTES.md
 * section 11 has the measurements. */
#include <string.h>

typedef float wino_v16 __attribute__((vector_size(64), aligned(64)));
typedef float wino_v16u __attribute__((vector_size(64), aligned(4), may_alias)); /* unaligned access */
#define WINO_T wino_v16
#include "cpu/conv_winograd_cpu.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

/* C[6][32] = A x [two adjacent 16-wide panels b0, b1]: 12 zmm
 * accumulators, per input channel 2 loads of B and 6 broadcasts for 12
 * FMAs of 16 lanes, twice the AVX2 kernel's work per instruction. */
AVX512 void wino_kernel6x32(int cin, const float *a, size_t lda, const float *b0, const float *b1, float *c,
                            size_t ldc)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int ci = 0; ci < cin; ci++, b0 += 16, b1 += 16) {
        __m512 p = _mm512_load_ps(b0), q = _mm512_load_ps(b1), av;
        av = _mm512_set1_ps(a0[ci]);
        c00 = _mm512_fmadd_ps(av, p, c00);
        c01 = _mm512_fmadd_ps(av, q, c01);
        av = _mm512_set1_ps(a1[ci]);
        c10 = _mm512_fmadd_ps(av, p, c10);
        c11 = _mm512_fmadd_ps(av, q, c11);
        av = _mm512_set1_ps(a2[ci]);
        c20 = _mm512_fmadd_ps(av, p, c20);
        c21 = _mm512_fmadd_ps(av, q, c21);
        av = _mm512_set1_ps(a3[ci]);
        c30 = _mm512_fmadd_ps(av, p, c30);
        c31 = _mm512_fmadd_ps(av, q, c31);
        av = _mm512_set1_ps(a4[ci]);
        c40 = _mm512_fmadd_ps(av, p, c40);
        c41 = _mm512_fmadd_ps(av, q, c41);
        av = _mm512_set1_ps(a5[ci]);
        c50 = _mm512_fmadd_ps(av, p, c50);
        c51 = _mm512_fmadd_ps(av, q, c51);
    }
    _mm512_storeu_ps(c, c00), _mm512_storeu_ps(c + 16, c01), c += ldc;
    _mm512_storeu_ps(c, c10), _mm512_storeu_ps(c + 16, c11), c += ldc;
    _mm512_storeu_ps(c, c20), _mm512_storeu_ps(c + 16, c21), c += ldc;
    _mm512_storeu_ps(c, c30), _mm512_storeu_ps(c + 16, c31), c += ldc;
    _mm512_storeu_ps(c, c40), _mm512_storeu_ps(c + 16, c41), c += ldc;
    _mm512_storeu_ps(c, c50), _mm512_storeu_ps(c + 16, c51);
}


#define WINO_TU wino_v16u
#define WINO_LANES 16
#define WINO_TARGET AVX512
#define WINO_SCOPE
#define WINO_RELU(v) ((wino_v16)_mm512_max_ps((__m512)(v), _mm512_setzero_ps()))
#define WINO_CHUNK(f) wino_##f##16
#include "cpu/conv_winograd_chunks.inc"
