/* Internals of the CPU Winograd F(4x4,3x3) shared by its two files:
 * conv_winograd.c (AVX2: the driver, 8-lane transforms, the 6x16 and 6x8
 * GEMM kernels) and conv_winograd_avx512.c (16-lane transforms and the
 * 6x32 GEMM kernel, used where the CPU has AVX-512). Not part of the
 * op's contract (conv_winograd.h). */
#ifndef MR_CONV_WINOGRAD_CPU_H
#define MR_CONV_WINOGRAD_CPU_H

#include <stddef.h>

#include "cpu/conv_winograd.h"

/* A tile's row in V (M) is 36 cin (36 cout) floats plus this pad: 36 cin
 * floats are a multiple of 4 KiB at cin 256 and 512, which put the six
 * rows the kernel reads at once into the same L1 sets. With a channel
 * count that is a multiple of 16 a row stays a multiple of 64 bytes. */
#define WINO_ROW_PAD 16

static inline size_t row_floats(int c) { return (size_t)WINO_POINTS * (size_t)c + WINO_ROW_PAD; }

/* conv_winograd_avx512.c; call only where the CPU has AVX-512F. */

/* C[6][32] = A[6 rows, stride lda][cin] x [panels b0 | b1] (two 16-wide
 * panels of U, each [cin][16], 64-byte aligned). */
void wino_kernel6x32(int cin, const float *a, size_t lda, const float *b0, const float *b1, float *c, size_t ldc);

/* conv_winograd_chunks.inc at 16 lanes, for a 16-channel block: x, y, V
 * and M 64-byte aligned. */
void wino_input_chunk16(const mr_wino_params *p, const float *x, int h, int w, int th, int tw, long t0, int count,
                        int T, float *V);
void wino_output_chunk16(const mr_wino_params *p, const float *M, const float *bias, float *y, int h, int w, int th,
                         int tw, long t0, int count, int accumulate);

#endif
