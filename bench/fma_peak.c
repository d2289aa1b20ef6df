/* The CPU's FMA peak (bench/NOTES.md): each OpenMP thread runs 12
 * independent chains of 8-wide single-precision FMAs (enough to cover the
 * FMA latency on two pipes), no memory traffic.
 *   gcc -O2 -mavx2 -mfma -fopenmp bench/fma_peak.c -o build/fma_peak
 *   OMP_NUM_THREADS=2 build/fma_peak */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
int main(void) {
    long iters = 400000000L;
    double t0 = omp_get_wtime();
    float sink = 0;
#pragma omp parallel reduction(+:sink)
    {
        __m256 a[12], m = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-6f);
        for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
        for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, b);
        }
        for (int i = 0; i < 12; i++) { float o[8]; _mm256_storeu_ps(o, a[i]); sink += o[0]; }
    }
    double t = omp_get_wtime() - t0;
    int th = omp_get_max_threads();
    printf("threads %d: %.2f s, %.1f GFLOP/s (sink %g)\n", th, t, 2.0 * 8 * 12 * iters * th / t / 1e9, sink);
}
