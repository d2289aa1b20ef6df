/* IEEE binary16 (fp16) from and to float32, in plain C for the host side of
 * --precision fp16: the CUDA backend converts weights with it at load and
 * stage dumps read fp16 feature maps back with it. The kernels use CUDA's
 * __float2half_rn / __half2float, which round the same way (to nearest,
 * ties to even), so a weight converted here equals one converted on the
 * device. tests/unit/test_half.c checks both directions against the
 * compiler's own _Float16 over every half and a sweep of floats.
 *
 * Bits: sign 1, exponent 5 (bias 15), mantissa 10. Subnormals, infinities
 * and NaN (quiet, sign and top payload bits kept) are handled; floats
 * beyond 65504 round to infinity as the IEEE rule says. */
#ifndef MR_HALF_H
#define MR_HALF_H

#include <stdint.h>
#include <string.h>

#include "core/hd.h"

MR_HD static inline uint16_t mr_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) /* Inf, or NaN made quiet */
        return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u | ((mag >> 13) & 0x3ffu) : 0u));
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: rounds past 65504 */
    if (mag < 0x38800000u) {                                    /* below 2^-14: a subnormal half, or 0 */
        if (mag < 0x33000000u) return (uint16_t)sign;           /* below 2^-25: rounds to 0 */
        uint32_t exp = mag >> 23, m = (mag & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* 14..24: m >> shift is the half mantissa */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        q += rem > halfway || (rem == halfway && (q & 1u));
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent, round the 13 dropped bits to nearest even
     * (a carry into the exponent is the correct next binade) */
    uint32_t h = ((mag - 0x38000000u) >> 13), rem = mag & 0x1fffu;
    h += rem > 0x1000u || (rem == 0x1000u && (h & 1u));
    return (uint16_t)(sign | h);
}

MR_HD static inline float mr_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (exp != 0) {
        x = sign | ((exp + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign;
    } else { /* subnormal: normalise */
        uint32_t e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* n floats to halves (n may be 0). */
static inline void mr_floats_to_halves(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = mr_float_to_half(src[i]);
}

static inline void mr_halves_to_floats(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = mr_half_to_float(src[i]);
}

#endif
