/* Folding a per-channel affine (batchnorm, Detectron's AffineChannel) into
 * the convolution before it, the one place this arithmetic lives:
 *   conv(x, W)*s + (b*s + t)  ==  conv(x, W*s) + (b*s + t)
 * W is OIHW (per_out = I*H*W weights per output channel o), b the conv's
 * own bias (0 when absent), s and t the affine's scale and shift. Both
 * backends fold with these functions (the CPU always, CUDA unless
 * --no-fold), and the CUDA no-fold path applies s and b*s + t after the
 * conv, so every path takes the same float32 operations. */
#ifndef MR_AFFINE_FOLD_H
#define MR_AFFINE_FOLD_H

#include <stddef.h>

#include "core/hd.h"

/* The bias that goes with the folded weights (and the shift applied after
 * an unfolded conv): b*s + t. */
MR_HD static inline float affine_fold_bias(float b, float s, float t) { return b * s + t; }

/* w_out[o, :] = w[o, :]*scale[o]; bias_out[o] = affine_fold_bias(bias[o]
 * or 0, scale[o], shift[o]). w_out may be w; bias may be NULL. */
static inline void affine_fold_conv(const float *w, const float *bias, const float *scale, const float *shift,
                                    size_t per_out, int cout, float *w_out, float *bias_out)
{
    for (int o = 0; o < cout; o++) {
        for (size_t i = 0; i < per_out; i++) w_out[(size_t)o * per_out + i] = w[(size_t)o * per_out + i] * scale[o];
        bias_out[o] = affine_fold_bias(bias ? bias[o] : 0.0f, scale[o], shift[o]);
    }
}

#endif
