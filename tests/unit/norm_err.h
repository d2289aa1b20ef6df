/* The normalised error the op tests compare by, shared by test_backend_ops.c
 * and test_cuda_fp16.c: ||got - ref|| / ||ref|| in double, or ||got - ref||
 * when ref is all zero; NaN when either side holds a NaN or an infinity. */
#ifndef MR_TEST_NORM_ERR_H
#define MR_TEST_NORM_ERR_H

#include <math.h>
#include <stddef.h>

static inline double norm_err(const float *got, const float *ref, size_t n)
{
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) return NAN;
        double d = (double)got[i] - (double)ref[i];
        d2 += d * d;
        r2 += (double)ref[i] * (double)ref[i];
    }
    return r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
}

#endif
