/* The CUDA backend's batched bitmask NMS (cuda/nms.cu), emulated on the
 * CPU, against engine/ops/nms.c and against a brute-force greedy NMS written
 * here.
 *
 * Nothing CUDA can run on the machines these tests run on. The emulation
 * below performs cuda/nms.cu's steps in plain C with the same nms.h
 * functions the kernels call (nms_sort_key, nms_mask_word, nms_block_keep,
 * nms_score_key): the sort by (key, slot), the per-group segments, the
 * upper-triangle 64x64 mask tiles (the lower triangle is filled with
 * garbage, which must never be read), the tile-by-tile reduction, the
 * merge. It is the closest these tests get to running the GPU algorithm;
 * the thread-level details (shared-memory tiles, atomics, the parallel OR)
 * are not exercised.
 *
 * The brute-force reference is independent of engine/ops/nms.c: its own sort,
 * its own IoU (torchvision's formula written out), the threshold compared
 * in double (default rule) or as `>= (float)thresh` (Detectron's rule).
 * Cases: random boxes on a coarse integer grid (many exact IoU ties at the
 * thresholds), random float boxes, degenerate boxes, tied, NaN and signed
 * zero scores, 1..6 groups, sizes across the 64-box word boundaries. The
 * seed is fixed and printed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/box_post.h"
#include "ops/nms.h"

#define SEED 20240531u
#define MAX_N 300

static uint32_t rng_state;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static float uniform(void) { return (float)(rng() >> 8) / 16777216.0f; }

/* ------------------------------------------------------------ brute force */

static float ref_iou(const float *a, const float *b, int plus_one)
{
    float one = plus_one ? 1.0f : 0.0f;
    float area_a = (a[2] - a[0] + one) * (a[3] - a[1] + one);
    float area_b = (b[2] - b[0] + one) * (b[3] - b[1] + one);
    float w = fminf(a[2], b[2]) - fmaxf(a[0], b[0]) + one;
    float h = fminf(a[3], b[3]) - fmaxf(a[1], b[1]) + one;
    /* std::max(0, v) of the reference: NaN -> 0 (fmaxf would agree too) */
    w = 0.0f < w ? w : 0.0f;
    h = 0.0f < h ? h : 0.0f;
    float inter = w * h;
    return inter / (area_a + area_b - inter);
}

static int ref_suppress(float iou, double thresh, int flags)
{
    if (flags & MR_NMS_SUPPRESS_GE) return iou >= (float)thresh;
    return (double)iou > thresh;
}

/* descending score, NaN first, -0 == +0, ties by index */
static const float *ref_scores;

static int ref_before(int a, int b)
{
    float x = ref_scores[a], y = ref_scores[b];
    int nx = isnan(x), ny = isnan(y);
    if (nx != ny) return nx;
    if (!nx && x != y) return x > y;
    return a < b;
}

/* insertion sort: simple, stable, obviously right */
static void ref_sort(int *idx, int n)
{
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i - 1;
        while (j >= 0 && ref_before(v, idx[j])) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = v;
    }
}

static int ref_batched_nms(const float *boxes, const float *scores, const int *groups, int n, double thresh,
                           int flags, int *keep)
{
    int order[MAX_N];
    unsigned char dead[MAX_N] = {0};
    for (int i = 0; i < n; i++) order[i] = i;
    ref_scores = scores;
    ref_sort(order, n);
    int k = 0;
    for (int a = 0; a < n; a++) {
        int i = order[a];
        if (dead[i]) continue;
        keep[k++] = i;
        for (int b = a + 1; b < n; b++) {
            int j = order[b];
            if (groups[j] == groups[i] && ref_suppress(ref_iou(boxes + 4 * i, boxes + 4 * j, flags & 1), thresh, flags))
                dead[j] = 1;
        }
    }
    /* kept already in (score desc, index) order: the visit order was global */
    return k;
}

/* --------------------------------------------- cuda/nms.cu's steps, in C */

typedef struct {
    uint64_t key;
    int slot;
} emu_key;

static int emu_cmp(const void *pa, const void *pb)
{
    const emu_key *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->slot - b->slot; /* a stable radix sort keeps slot order */
}

/* valid[i] as the kernels' valid flags; groups in 0..G-1. */
static int emu_bitmask_nms(const float *boxes, const float *scores, const int *groups, const unsigned char *valid,
                           int n, int G, double thresh, int flags, int *keep)
{
    static emu_key keys[MAX_N];
    static int order[MAX_N], hist[16], start[16], words[16], rowblock[16];
    static size_t base[16];
    static uint64_t mask[MAX_N * ((MAX_N + 63) / 64)], tile[64 * ((MAX_N + 63) / 64)];
    static unsigned char flagged[MAX_N];
    const float thr = nms_float_threshold(thresh, flags);
    const int plus_one = flags & MR_NMS_PLUS_ONE;
    memset(hist, 0, sizeof hist);
    /* 1-2: keys and the sort */
    for (int i = 0; i < n; i++) {
        keys[i].key = valid[i] ? nms_sort_key(groups[i], scores[i]) : ~(uint64_t)0;
        keys[i].slot = i;
        if (valid[i]) hist[groups[i]]++;
    }
    qsort(keys, (size_t)n, sizeof *keys, emu_cmp);
    for (int i = 0; i < n; i++) order[i] = keys[i].slot;
    /* 3: segments */
    int s0 = 0, rb0 = 0;
    size_t b0 = 0;
    for (int g = 0; g < G; g++) {
        start[g] = s0;
        words[g] = (hist[g] + 63) / 64;
        rowblock[g] = rb0;
        base[g] = b0;
        s0 += hist[g];
        rb0 += words[g];
        b0 += (size_t)hist[g] * (size_t)words[g];
    }
    /* 4: the mask, upper-triangle tiles only; garbage elsewhere */
    for (size_t w = 0; w < sizeof mask / sizeof *mask; w++) mask[w] = 0xA5A5A5A5A5A5A5A5ull;
    for (int g = 0; g < G; g++) {
        for (int rb = 0; rb < words[g]; rb++) {
            for (int cb = rb; cb < words[g]; cb++) {
                float cols[64 * 4], areas[64];
                int ncols = hist[g] - cb * 64 < 64 ? hist[g] - cb * 64 : 64;
                int nrows = hist[g] - rb * 64 < 64 ? hist[g] - rb * 64 : 64;
                for (int t = 0; t < ncols; t++) {
                    memcpy(cols + 4 * t, boxes + 4 * order[start[g] + cb * 64 + t], 4 * sizeof(float));
                    areas[t] = box_area(cols + 4 * t, plus_one);
                }
                for (int t = 0; t < nrows; t++) {
                    int a = rb * 64 + t;
                    const float *row = boxes + 4 * order[start[g] + a];
                    mask[base[g] + (size_t)a * words[g] + cb] = nms_mask_word(
                        row, box_area(row, plus_one), cols, areas, cb == rb ? t + 1 : 0, ncols, thr, plus_one);
                }
            }
        }
    }
    /* 5: the reduction, a tile of 64 rows at a time */
    memset(flagged, 0, sizeof flagged);
    for (int g = 0; g < G; g++) {
        uint64_t removed[(MAX_N + 63) / 64] = {0};
        int W = words[g];
        for (int rb = 0; rb < W; rb++) {
            int rows = hist[g] - rb * 64 < 64 ? hist[g] - rb * 64 : 64, width = W - rb;
            for (int i = 0; i < rows * width; i++)
                tile[i] = mask[base[g] + (size_t)(rb * 64 + i / width) * W + rb + i % width];
            uint64_t kb = nms_block_keep(removed[rb], tile, (size_t)width, rows);
            for (int w = 1; w < width; w++)
                for (int r = 0; r < rows; r++)
                    if ((kb >> r) & 1) removed[rb + w] |= tile[r * width + w];
            for (int r = 0; r < rows; r++)
                if ((kb >> r) & 1) flagged[order[start[g] + rb * 64 + r]] = 1;
        }
    }
    /* 6: the merge */
    int kept = 0;
    for (int i = 0; i < n; i++) {
        keys[i].key = flagged[i] ? nms_score_key(scores[i]) : 0xFFFFFFFFu;
        keys[i].slot = i;
        kept += flagged[i];
    }
    qsort(keys, (size_t)n, sizeof *keys, emu_cmp);
    for (int k = 0; k < kept; k++) keep[k] = keys[k].slot;
    (void)rowblock;
    return kept;
}

/* ------------------------------------------------------------ the cases */

static void random_case(int n, int G, int grid_boxes, float *boxes, float *scores, int *groups, unsigned char *valid)
{
    for (int i = 0; i < n; i++) {
        float *b = boxes + 4 * i;
        if (grid_boxes) {
            /* integer corners on a small grid: many equal IoUs, e.g. exactly 0.5 */
            b[0] = (float)(rng() % 8);
            b[1] = (float)(rng() % 8);
            b[2] = b[0] + (float)(rng() % 6);
            b[3] = b[1] + (float)(rng() % 6);
        } else {
            b[0] = uniform() * 100.0f;
            b[1] = uniform() * 100.0f;
            b[2] = b[0] + uniform() * 40.0f;
            b[3] = b[1] + uniform() * 40.0f;
        }
        if (rng() % 50 == 0) { /* degenerate: x2 < x1 */
            float t = b[0];
            b[0] = b[2];
            b[2] = t;
        }
        uint32_t r = rng() % 100;
        if (r < 40) scores[i] = (float)(rng() % 5) / 4.0f; /* heavy ties */
        else if (r < 42) scores[i] = NAN;
        else if (r < 44) scores[i] = -0.0f;
        else if (r < 46) scores[i] = 0.0f;
        else scores[i] = uniform();
        groups[i] = (int)(rng() % (uint32_t)G);
        valid[i] = 1;
    }
}

static void test_bitmask_equals_cpu_and_brute_force(void **state)
{
    (void)state;
    static float boxes[4 * MAX_N], scores[MAX_N], cb[4 * MAX_N], cs[MAX_N];
    static int groups[MAX_N], cg[MAX_N], slot_of[MAX_N], keep_cpu[MAX_N], keep_ref[MAX_N], keep_emu[MAX_N];
    static unsigned char valid[MAX_N];
    static char scratch[1 << 16];
    const double thresholds[] = {0.3, 0.5, 0.7, 0.25, 1.0 / 3.0};
    const int sizes[] = {0, 1, 2, 63, 64, 65, 127, 128, 129, 200, 300};
    rng_state = SEED;
    printf("test_nms_bitmask: seed %u\n", SEED);
    int cases = 0, total_kept = 0;
    for (int rep = 0; rep < 3000; rep++) {
        int n = rep < 200 ? sizes[rep % 11] : (int)(rng() % MAX_N) + 1;
        int G = (int)(rng() % 6) + 1, flags = (int)(rng() % 4), grid_boxes = (int)(rng() % 2);
        double thresh = rep % 7 == 6 ? (double)uniform() : thresholds[rng() % 5];
        random_case(n, G, grid_boxes, boxes, scores, groups, valid);
        /* a tenth of the slots invalid, as the candidate kernels' flags; the
         * CPU's candidates are the valid slots in slot order */
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (rng() % 10 == 0) valid[i] = 0;
            if (!valid[i]) continue;
            memcpy(cb + 4 * m, boxes + 4 * i, 4 * sizeof(float));
            cs[m] = scores[i];
            cg[m] = groups[i];
            slot_of[m++] = i;
        }
        assert_true(nms_scratch_bytes(m) <= sizeof scratch);
        int k_cpu = batched_nms_cpu(cb, cs, cg, m, thresh, flags, keep_cpu, scratch);
        int k_ref = ref_batched_nms(cb, cs, cg, m, thresh, flags, keep_ref);
        int k_emu = emu_bitmask_nms(boxes, scores, groups, valid, n, G, thresh, flags, keep_emu);
        if (k_cpu != k_ref || k_emu != k_cpu)
            fail_msg("case %d (n %d, groups %d, thresh %.17g, flags %d): kept cpu %d, brute force %d, bitmask %d", rep,
                     n, G, thresh, flags, k_cpu, k_ref, k_emu);
        for (int k = 0; k < k_cpu; k++) {
            if (keep_cpu[k] != keep_ref[k] || keep_emu[k] != slot_of[keep_cpu[k]])
                fail_msg("case %d: keep[%d] cpu %d, brute force %d, bitmask slot %d (cpu's slot %d)", rep, k,
                         keep_cpu[k], keep_ref[k], keep_emu[k], slot_of[keep_cpu[k]]);
        }
        cases++;
        total_kept += k_cpu;
    }
    printf("test_nms_bitmask: %d cases, %d boxes kept in all\n", cases, total_kept);
}

/* nms_sort_key's order against the comparator written out: group, NaN
 * first, descending score, -0 == +0. */
static int ref_key_cmp(int ga, float a, int gb, float b)
{
    if (ga != gb) return ga < gb ? -1 : 1;
    int na = isnan(a), nb = isnan(b);
    if (na != nb) return na ? -1 : 1;
    if (na || a == b) return 0;
    return a > b ? -1 : 1;
}

static void test_sort_key_order(void **state)
{
    (void)state;
    const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, -1e-45f,
                             3.4028235e38f, -3.4028235e38f, 0.5f, 0.49999997f};
    const int ns = (int)(sizeof special / sizeof *special);
    rng_state = SEED ^ 0x9e3779b9u;
    for (int t = 0; t < 200000; t++) {
        float a, b;
        if (t < ns * ns) {
            a = special[t / ns];
            b = special[t % ns];
        } else {
            union {
                uint32_t u;
                float f;
            } x = {rng()}, y = {rng()};
            a = x.f;
            b = t % 3 ? y.f : a; /* some equal pairs */
        }
        int ga = t % 5 == 0 ? (int)(rng() % 5) - 2 : 0, gb = t % 7 == 0 ? (int)(rng() % 5) - 2 : ga;
        int want = ref_key_cmp(ga, a, gb, b);
        uint64_t ka = nms_sort_key(ga, a), kb = nms_sort_key(gb, b);
        int got = ka < kb ? -1 : ka > kb;
        if (got != want) fail_msg("keys of (%d, %a) and (%d, %a): %d, want %d", ga, (double)a, gb, (double)b, got, want);
        if (!isnan(a)) assert_true(nms_score_key(a) != 0u && nms_score_key(a) != 0xFFFFFFFFu);
    }
}

/* nms_float_threshold: x > f exactly when the reference's rule holds. */
static void test_float_threshold(void **state)
{
    (void)state;
    const double th[] = {0.3, 0.5, 0.7, 0.0, 1.0, 0.1, 2.0 / 3.0};
    for (int i = 0; i < 7; i++) {
        for (int flags = 0; flags < 4; flags++) {
            float f = nms_float_threshold(th[i], flags);
            float c = (float)th[i];
            /* the floats around the threshold */
            float xs[5] = {nextafterf(nextafterf(c, -1), -1), nextafterf(c, -1), c, nextafterf(c, 2),
                           nextafterf(nextafterf(c, 2), 2)};
            for (int k = 0; k < 5; k++)
                assert_int_equal(nms_suppresses(xs[k], f), ref_suppress(xs[k], th[i], flags));
        }
    }
    assert_false(nms_suppresses(NAN, 0.5f));
}

/* box_post_count: max_dets, then every further tie of the last kept. */
static void test_box_post_count(void **state)
{
    (void)state;
    mr_box_post_params p;
    memset(&p, 0, sizeof p);
    p.max_dets = 3;
    p.out_capacity = 5;
    /* scores by keep order: 0.9 0.8 0.7 0.7 0.7 0.7 0.1 */
    const float scores[7] = {0.1f, 0.7f, 0.9f, 0.7f, 0.8f, 0.7f, 0.7f};
    const int keep[7] = {2, 4, 1, 3, 5, 6, 0};
    assert_int_equal(box_post_count(&p, scores, 1, keep, 7), 3);
    p.keep_ties = 1;
    assert_int_equal(box_post_count(&p, scores, 1, keep, 7), 5); /* capped by out_capacity */
    p.out_capacity = 10;
    assert_int_equal(box_post_count(&p, scores, 1, keep, 7), 6);
    assert_int_equal(box_post_count(&p, scores, 1, keep, 2), 2);
    assert_int_equal(box_post_count(&p, scores, 1, keep, 0), 0);
    /* a strided record layout, as the GPU's candidates */
    float rec[7 * 3];
    for (int i = 0; i < 7; i++) rec[3 * i + 1] = scores[i], rec[3 * i] = rec[3 * i + 2] = -1.0f;
    assert_int_equal(box_post_count(&p, rec + 1, 3, keep, 7), 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitmask_equals_cpu_and_brute_force),
        cmocka_unit_test(test_sort_key_order),
        cmocka_unit_test(test_float_threshold),
        cmocka_unit_test(test_box_post_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
