/* engine/core/half.h against the compiler's own IEEE binary16 (_Float16, GCC
 * on x86-64 since 12): every one of the 65536 halves to float, and floats
 * to half over every float exponent with mantissas near the rounding
 * boundaries (ties, one ulp either side), subnormals, the overflow edge,
 * infinities and NaN. The CUDA backend's --precision fp16 converts its
 * weights with these functions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"

static uint16_t reference_half(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
}

static float bits_float(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static void test_every_half_to_float(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        _Float16 h;
        uint16_t bits = (uint16_t)b;
        memcpy(&h, &bits, sizeof h);
        float want = (float)h, got = mr_half_to_float(bits);
        if (isnan(want)) {
            assert_true(isnan(got));
            continue;
        }
        uint32_t wb, gb;
        memcpy(&wb, &want, 4);
        memcpy(&gb, &got, 4);
        if (wb != gb) fail_msg("half 0x%04x: got %a, want %a", b, (double)got, (double)want);
        /* and back: every half is a float exactly */
        assert_int_equal(mr_float_to_half(got), bits);
    }
}

/* One float against the reference. */
static void check_float(uint32_t x, int *checked)
{
    float f = bits_float(x);
    uint16_t want = reference_half(f), got = mr_float_to_half(f);
    if (isnan(f)) {
        /* a NaN stays a NaN of the same sign (payload bits are not compared) */
        assert_true((got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0);
        assert_int_equal(got & 0x8000u, want & 0x8000u);
        return;
    }
    if (want != got) fail_msg("float %a (0x%08x): got 0x%04x, want 0x%04x", (double)f, x, got, want);
    (*checked)++;
}

static void test_float_to_half_rounding(void **state)
{
    (void)state;
    int checked = 0;
    /* For every float exponent and sign: mantissas whose dropped bits sit
     * at, just below and just above each rounding boundary, for a spread
     * of kept bits (odd and even, so both tie directions occur). */
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 0; e < 256; e++)
            for (uint32_t kept = 0; kept < 1024; kept += 37) {
                for (uint32_t drop_bits = 13; drop_bits <= 23; drop_bits++) {
                    /* below 2^-14 a half keeps fewer bits: vary where the boundary is */
                    uint32_t half_ulp = 1u << (drop_bits - 1);
                    uint32_t base = ((kept << drop_bits) ^ (e << 11)) & 0x7fffffu & ~((1u << drop_bits) - 1u);
                    uint32_t probes[] = {0, 1, half_ulp - 1, half_ulp, half_ulp + 1, (half_ulp << 1) - 1};
                    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
                        uint32_t m = (base | probes[k]) & 0x7fffffu;
                        check_float((sign << 31) | (e << 23) | m, &checked);
                    }
                }
            }
    /* the edges by name */
    const float edges[] = {0.0f,       -0.0f,      65504.0f,   65519.99f, 65520.0f, 65536.0f,  1e30f,
                           5.960464e-8f, 2.980232e-8f, 2.9802326e-8f, 6.097555e-5f, 6.103516e-5f, 1.0f, 0.1f,
                           -3.14159f,  INFINITY,   -INFINITY,  NAN};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        uint32_t x;
        memcpy(&x, &edges[i], 4);
        check_float(x, &checked);
    }
    /* a seeded sweep of arbitrary bit patterns (xorshift, seed printed) */
    uint32_t s = 0x9e3779b9u;
    printf("test_half: sweep seed 0x%08x\n", s);
    for (int i = 0; i < 2000000; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        check_float(s, &checked);
    }
    assert_true(checked > 2000000);
}

static void test_arrays(void **state)
{
    (void)state;
    const float src[5] = {1.5f, -2.0f, 1e-6f, 70000.0f, 0.333333f};
    uint16_t h[5];
    float back[5];
    mr_floats_to_halves(src, h, 5);
    mr_halves_to_floats(h, back, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(h[i], reference_half(src[i]));
        assert_true(back[i] == (float)(_Float16)src[i]);
    }
    mr_floats_to_halves(src, h, 0); /* n = 0 touches nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_half_to_float),
        cmocka_unit_test(test_float_to_half_rounding),
        cmocka_unit_test(test_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
