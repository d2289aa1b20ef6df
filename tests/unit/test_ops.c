/* Hand-derived cases for the detection ops: box coder, anchors, NMS,
 * RoIAlign, level mapping, mask paste and RLE. Every expected value here is
 * worked out from the definitions in the headers, not produced by the code.
 * Parity with torchvision on random inputs is in
 * tests/parity/test_ops_torchvision.py. */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/anchors.h"
#include "ops/box_coder.h"
#include "ops/mask_paste.h"
#include "ops/nms.h"
#include "ops/proposals.h"
#include "io/rle.h"
#include "ops/roi_align.h"

#define ASSERT_FEQ(a, b, tol) assert_true(fabsf((float)(a) - (float)(b)) <= (tol))

/* ---------------------------------------------------------------- box coder */

static void test_decode_zero_delta(void **state)
{
    (void)state;
    const mr_box_coder c = {{10, 10, 5, 5}, 4.135166556742356f, 0, 0};
    const float box[4] = {10, 20, 30, 60}, d[4] = {0, 0, 0, 0};
    float out[4];
    box_decode(&c, box, d, out);
    for (int k = 0; k < 4; k++) assert_true(out[k] == box[k]);

    /* Detectron: w = 21, cx = 10 + 10.5 = 20.5, x2 = 20.5 + 10.5 - 1 = 30 */
    const mr_box_coder c1 = {{10, 10, 5, 5}, 4.135166556742356f, 1, 0};
    box_decode(&c1, box, d, out);
    for (int k = 0; k < 4; k++) assert_true(out[k] == box[k]);
}

static void test_decode_shift_scale_clip(void **state)
{
    (void)state;
    const mr_box_coder c = {{1, 1, 1, 1}, 4.135166556742356f, 0, 0};
    const float box[4] = {0, 0, 10, 20};
    /* dx = 0.5 moves the centre by half a width; dw = ln 2 doubles w */
    const float d[4] = {0.5f, -0.25f, 0.69314718f, 0};
    float out[4];
    box_decode(&c, box, d, out);
    ASSERT_FEQ(out[0], 10 - 10, 1e-4); /* pcx = 10, pw = 20 */
    ASSERT_FEQ(out[2], 10 + 10, 1e-4);
    ASSERT_FEQ(out[1], 5 - 10, 1e-4); /* pcy = 10 - 5 = 5, ph = 20 */
    ASSERT_FEQ(out[3], 5 + 10, 1e-4);

    /* a huge dw is clamped: pw = exp(log(62.5)) * 10 = 625 */
    const float big[4] = {0, 0, 1e6f, 1e6f};
    box_decode(&c, box, big, out);
    ASSERT_FEQ(out[2] - out[0], 625.0f, 1e-2);
    ASSERT_FEQ(out[3] - out[1], 1250.0f, 1e-2);
    assert_true(isfinite(out[0]) && isfinite(out[3]));
}

static void test_clip_area_iou(void **state)
{
    (void)state;
    float b[4] = {-5, 3, 120, 90};
    box_clip(b, 80, 100, 0);
    assert_true(b[0] == 0 && b[1] == 3 && b[2] == 100 && b[3] == 80);
    float d[4] = {-5, -1, 120, 90};
    box_clip(d, 80, 100, 1);
    assert_true(d[0] == 0 && d[1] == 0 && d[2] == 99 && d[3] == 79);

    const float a[4] = {0, 0, 10, 10}, a2[4] = {5, 0, 15, 10}, far[4] = {20, 20, 30, 30};
    assert_true(box_area(a, 0) == 100.0f);
    assert_true(box_area(a, 1) == 121.0f);
    assert_true(box_iou(a, a, 0) == 1.0f);
    assert_true(box_iou(a, far, 0) == 0.0f);
    ASSERT_FEQ(box_iou(a, a2, 0), 50.0f / 150.0f, 1e-7);
    /* +1: inter 6*11 = 66, areas 121 + 121 */
    ASSERT_FEQ(box_iou(a, a2, 1), 66.0f / (242.0f - 66.0f), 1e-7);
    /* degenerate: zero width on both sides -> 0/0 = NaN, never > thr */
    const float z[4] = {3, 3, 3, 8};
    assert_true(isnan(box_iou(z, z, 0)));
}

/* ------------------------------------------------------------------ anchors */

static void test_anchors_torchvision(void **state)
{
    (void)state;
    const float sizes[1] = {32}, ratios[3] = {0.5f, 1.0f, 2.0f};
    float cell[12];
    assert_int_equal(anchors_cell(sizes, 1, ratios, 3, 1, cell), 3);
    const float want[12] = {-23, -11, 23, 11, -16, -16, 16, 16, -11, -23, 11, 23};
    for (int k = 0; k < 12; k++) assert_true(cell[k] == want[k]);

    /* unrounded (detectron2): w = sqrt(32^2/0.5)/2 = 22.627..., size-major over 2 sizes */
    const float two[2] = {32, 64};
    float c2[24];
    assert_int_equal(anchors_cell(two, 2, ratios, 3, 0, c2), 6);
    ASSERT_FEQ(c2[0], -22.627417f, 1e-5);
    ASSERT_FEQ(c2[4 * 1 + 0], -16.0f, 0);         /* size 32, ratio 1 */
    ASSERT_FEQ(c2[4 * 3 + 0], -45.254834f, 1e-5); /* size 64, ratio 0.5 */
    assert_int_equal(anchors_cell(two, 0, ratios, 3, 1, c2), 0);

    /* P6 (size 512): 256/sqrt(.5) = 362.038..., 256*sqrt(.5) = 181.019... */
    const float s6[1] = {512};
    assert_int_equal(anchors_cell(s6, 1, ratios, 3, 1, cell), 3);
    assert_true(cell[0] == -362 && cell[1] == -181 && cell[2] == 362 && cell[3] == 181);
}

static void test_anchors_detectron_and_shift(void **state)
{
    (void)state;
    const float sizes[1] = {32}, ratios[3] = {0.5f, 1.0f, 2.0f};
    float cell[12];
    /* oracle.md section 6: Detectron's P2 table */
    assert_int_equal(anchors_cell_detectron(4, sizes, 1, ratios, 3, cell), 3);
    const float want[12] = {-22, -10, 25, 13, -14, -14, 17, 17, -10, -22, 13, 25};
    for (int k = 0; k < 12; k++) assert_true(cell[k] == want[k]);

    float out[4];
    anchor_at(cell, 1, 3, 2, 4, 4, 0, out); /* shift (12, 8) */
    assert_true(out[0] == -2 && out[1] == -6 && out[2] == 29 && out[3] == 25);
    anchor_at(cell, 1, 3, 2, 4, 4, 0.5f, out); /* detectron2 offset 0.5: shift (14, 10) */
    assert_true(out[0] == 0 && out[1] == -4);
}

/* ---------------------------------------------------------------------- NMS */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static void test_nms_empty(void **state)
{
    (void)state;
    int keep[1] = {-7};
    assert_int_equal(nms_scratch_bytes(0), 0);
    assert_int_equal(nms_cpu(NULL, NULL, 0, 0.5, 0, keep, NULL), 0);
    assert_int_equal(batched_nms_cpu(NULL, NULL, NULL, 0, 0.5, 0, keep, NULL), 0);
    assert_int_equal(keep[0], -7);
}

static void test_nms_basic_and_ties(void **state)
{
    (void)state;
    /* 0 and 1 overlap with IoU 50/150 = 0.333; 2 is far; 3 == 0 */
    const float boxes[16] = {0, 0, 10, 10, 5, 0, 15, 10, 50, 50, 60, 60, 0, 0, 10, 10};
    const float scores[4] = {0.9f, 0.8f, 0.7f, 0.95f};
    int keep[4];
    void *s = xmalloc(nms_scratch_bytes(4));
    int k = nms_cpu(boxes, scores, 4, 0.3, 0, keep, s);
    assert_int_equal(k, 2); /* 3 suppresses 0 (IoU 1) and 1 (0.333 > 0.3) */
    assert_int_equal(keep[0], 3);
    assert_int_equal(keep[1], 2);
    k = nms_cpu(boxes, scores, 4, 0.5, 0, keep, s);
    assert_int_equal(k, 3);
    assert_int_equal(keep[0], 3);
    assert_int_equal(keep[1], 1);
    assert_int_equal(keep[2], 2);

    /* equal scores: lower index first; identical boxes keep the first */
    const float same[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    k = nms_cpu(boxes, same, 4, 0.5, 0, keep, s);
    assert_int_equal(k, 3);
    assert_int_equal(keep[0], 0);
    assert_int_equal(keep[1], 1);
    assert_int_equal(keep[2], 2);
    free(s);
}

static void test_nms_threshold_is_double_and_degenerate(void **state)
{
    (void)state;
    /* inter 3, union 10: IoU = 0.3f = 0.30000001 > 0.3 (double) -> suppressed,
     * as torchvision compares with the Python float */
    const float boxes[8] = {0, 0, 10, 1, 7, 0, 10, 1};
    const float scores[2] = {1, 0.5f};
    int keep[2];
    void *s = xmalloc(nms_scratch_bytes(2));
    assert_int_equal(nms_cpu(boxes, scores, 2, 0.3, 0, keep, s), 1);
    assert_int_equal(nms_cpu(boxes, scores, 2, 0.3f, 0, keep, s), 2); /* 0.3f itself: not > */
    /* the same pair with +1 coordinates */
    const float b1[8] = {0, 0, 9, 0, 7, 0, 9, 0};
    assert_int_equal(nms_cpu(b1, scores, 2, 0.3, 1, keep, s), 1);
    assert_int_equal(nms_cpu(b1, scores, 2, 0.3, 0, keep, s), 2); /* no +1: zero areas, NaN IoU */

    /* zero-width boxes never suppress each other (NaN IoU) */
    const float z[8] = {3, 3, 3, 8, 3, 3, 3, 8};
    assert_int_equal(nms_cpu(z, scores, 2, 0.1, 0, keep, s), 2);
    free(s);
}

/* Detectron utils/cython_nms.pyx suppresses at IoU >= float32(thresh); the
 * default rule (torchvision) only above the double thresh. */
static void test_nms_suppress_ge(void **state)
{
    (void)state;
    /* +1 boxes: [0,0,19,9] (200 px) and [0,0,9,9] (100 px): IoU exactly 0.5 */
    const float half[8] = {0, 0, 19, 9, 0, 0, 9, 9};
    /* 70 of 100 px: IoU 0.7f, which is below 0.7 */
    const float seven[8] = {0, 0, 99, 0, 0, 0, 69, 0};
    const float scores[2] = {1, 0.5f};
    int keep[2];
    void *s = xmalloc(nms_scratch_bytes(2));
    assert_int_equal(nms_cpu(half, scores, 2, 0.5, MR_NMS_PLUS_ONE, keep, s), 2);
    assert_int_equal(nms_cpu(half, scores, 2, 0.5, MR_NMS_PLUS_ONE | MR_NMS_SUPPRESS_GE, keep, s), 1);
    assert_int_equal(nms_cpu(seven, scores, 2, 0.7, MR_NMS_PLUS_ONE, keep, s), 2);
    assert_int_equal(nms_cpu(seven, scores, 2, 0.7, MR_NMS_PLUS_ONE | MR_NMS_SUPPRESS_GE, keep, s), 1);
    /* just above the threshold: both rules suppress; NaN IoU: neither */
    assert_int_equal(nms_cpu(seven, scores, 2, 0.69, MR_NMS_PLUS_ONE, keep, s), 1);
    const float z[8] = {3, 3, 3, 8, 3, 3, 3, 8};
    assert_int_equal(nms_cpu(z, scores, 2, 0.1, MR_NMS_SUPPRESS_GE, keep, s), 2);
    int groups[2] = {4, 4};
    assert_int_equal(batched_nms_cpu(half, scores, groups, 2, 0.5, MR_NMS_PLUS_ONE | MR_NMS_SUPPRESS_GE, keep, s), 1);
    free(s);
}

static void test_batched_nms(void **state)
{
    (void)state;
    /* identical boxes in two groups survive once per group */
    const float boxes[20] = {0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10, 1, 0, 11, 10, 100, 100, 110, 110};
    const float scores[5] = {0.6f, 0.9f, 0.7f, 0.6f, 0.6f};
    const int groups[5] = {7, 3, 7, 3, 3};
    int keep[5];
    void *s = xmalloc(nms_scratch_bytes(5));
    int k = batched_nms_cpu(boxes, scores, groups, 5, 0.5, 0, keep, s);
    /* group 3: 1 (0.9) suppresses 3; 4 kept. group 7: 2 (0.7) suppresses 0 */
    assert_int_equal(k, 3);
    assert_int_equal(keep[0], 1);
    assert_int_equal(keep[1], 2);
    assert_int_equal(keep[2], 4);
    /* one group == plain NMS */
    const int one[5] = {0, 0, 0, 0, 0};
    int keep2[5];
    int k1 = batched_nms_cpu(boxes, scores, one, 5, 0.5, 0, keep, s);
    int k2 = nms_cpu(boxes, scores, 5, 0.5, 0, keep2, s);
    assert_int_equal(k1, k2);
    for (int i = 0; i < k1; i++) assert_int_equal(keep[i], keep2[i]);
    free(s);
}

static void test_nms_large_stable(void **state)
{
    (void)state;
    /* 20k disjoint unit boxes with 10 distinct scores: all kept (the
     * O(kept*n) worst case), in (score desc, index asc) order */
    const int n = 20000;
    float *b = xmalloc(sizeof(float) * 4 * n), *sc = xmalloc(sizeof(float) * n);
    int *keep = xmalloc(sizeof(int) * n), *grp = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) {
        float x = (float)(2 * (i % 300)), y = (float)(2 * (i / 300));
        b[4 * i] = x;
        b[4 * i + 1] = y;
        b[4 * i + 2] = x + 1;
        b[4 * i + 3] = y + 1;
        sc[i] = (float)(i % 10);
        grp[i] = i % 3;
    }
    void *s = xmalloc(nms_scratch_bytes(n));
    assert_int_equal(nms_cpu(b, sc, n, 0.5, 0, keep, s), n);
    for (int i = 1; i < n; i++) {
        int a = keep[i - 1], c = keep[i];
        assert_true(sc[a] > sc[c] || (sc[a] == sc[c] && a < c));
    }
    assert_int_equal(batched_nms_cpu(b, sc, grp, n, 0.5, 0, keep, s), n);
    for (int i = 1; i < n; i++) {
        int a = keep[i - 1], c = keep[i];
        assert_true(sc[a] > sc[c] || (sc[a] == sc[c] && a < c));
    }
    free(s);
    free(b);
    free(sc);
    free(keep);
    free(grp);
}

/* ---------------------------------------------------------------- proposals */

/* Two levels, one anchor each, logits 20 (P2) and 30 (P3): both sigmoids
 * round to 1.0f. With a cap of one proposal, the sigmoid ranking (torchvision)
 * keeps the first candidate of the tie, P2's box; detectron2 ranks by logit
 * (find_top_rpn_proposals sorts objectness_logits) and keeps P3's. */
static void test_proposals_rank_by_logit(void **state)
{
    (void)state;
    const float cell[4] = {-8, -8, 8, 8};
    const float logit2 = 20.0f, logit3 = 30.0f, zero[4] = {0, 0, 0, 0};
    assert_true(1.0f / (1.0f + expf(-logit2)) == 1.0f && 1.0f / (1.0f + expf(-logit3)) == 1.0f);
    mr_proposal_params p;
    memset(&p, 0, sizeof p);
    p.num_levels = 2;
    p.num_anchors = 1;
    for (int l = 0; l < 2; l++) {
        p.cell_anchors[l] = cell;
        p.grid_h[l] = p.grid_w[l] = 1;
        p.stride_h[l] = p.stride_w[l] = (float)(l + 1);
    }
    /* centre offset 0.5 stride: P2's anchor [-7.5,-7.5,8.5,8.5] clips to
     * [0,0,8.5,8.5], P3's [-7,-7,9,9] to [0,0,9,9] */
    p.offset = 0.5f;
    p.pre_nms_top_n = p.post_nms_top_n = 1;
    p.nms_thresh = 0.7;
    p.min_size = 1e-3f;
    for (int k = 0; k < 4; k++) p.coder.weights[k] = 1.0f;
    p.coder.clip = 4.135166556742356f;
    p.img_h = p.img_w = 64.0f;
    const float *logits[2] = {&logit2, &logit3}, *deltas[2] = {zero, zero};
    void *scratch = malloc(proposals_scratch_bytes(&p));
    float box[4], score;
    assert_int_equal(proposals_cpu(&p, logits, deltas, box, &score, scratch), 1);
    assert_true(score == 1.0f && box[2] == 8.5f);
    p.rank_by_logit = 1;
    assert_int_equal(proposals_cpu(&p, logits, deltas, box, &score, scratch), 1);
    assert_true(score == logit3 && box[2] == 9.0f);
    free(scratch);
}

/* proposals_cpu ranks by selecting each level's top anchors first: it
 * must give what a whole sort would (descending logit, equal logits by
 * ascending index), held here to proposals_select fed this test's own
 * whole sort. Logits with many ties (5 values) and without. */
static const float *g_rank_logits;
static int cmp_rank_ref(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    float x = g_rank_logits[i], y = g_rank_logits[j];
    if (x != y) return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

static void test_proposals_selection_equals_sort(void **state)
{
    (void)state;
    const float cell[3 * 4] = {-8, -8, 8, 8, -16, -8, 16, 8, -8, -16, 8, 16};
    mr_proposal_params p;
    memset(&p, 0, sizeof p);
    p.num_levels = 2;
    p.num_anchors = 3;
    const int gh[2] = {37, 19}, gw[2] = {53, 27};
    for (int l = 0; l < 2; l++) {
        p.cell_anchors[l] = cell;
        p.grid_h[l] = gh[l];
        p.grid_w[l] = gw[l];
        p.stride_h[l] = p.stride_w[l] = (float)(4 << l);
    }
    p.nms_thresh = 0.7;
    p.min_size = 1e-3f;
    for (int k = 0; k < 4; k++) p.coder.weights[k] = 1.0f;
    p.coder.clip = 4.135166556742356f;
    p.img_h = 150.0f;
    p.img_w = 215.0f;
    srand(99);
    for (int variant = 0; variant < 4; variant++) {
        p.pre_nms_top_n = variant < 2 ? 100 : 1;
        p.post_nms_top_n = 60;
        float *lg[2], *dl[2];
        int *ranked[2];
        for (int l = 0; l < 2; l++) {
            int n = gh[l] * gw[l] * 3;
            lg[l] = xmalloc(sizeof(float) * n);
            dl[l] = xmalloc(sizeof(float) * 4 * n);
            ranked[l] = xmalloc(sizeof(int) * n);
            for (int i = 0; i < n; i++) {
                lg[l][i] = variant % 2 ? (float)(rand() % 5) * 0.5f - 1.0f : (float)rand() / RAND_MAX * 8.0f - 4.0f;
                ranked[l][i] = i;
            }
            for (int i = 0; i < 4 * n; i++) dl[l][i] = (float)rand() / RAND_MAX * 0.4f - 0.2f;
            g_rank_logits = lg[l];
            qsort(ranked[l], (size_t)n, sizeof(int), cmp_rank_ref);
        }
        void *scratch = xmalloc(proposals_scratch_bytes(&p));
        float box_a[60 * 4], score_a[60], box_b[60 * 4], score_b[60];
        const float *clg[2] = {lg[0], lg[1]}, *cdl[2] = {dl[0], dl[1]};
        const int *crk[2] = {ranked[0], ranked[1]};
        int na = proposals_cpu(&p, clg, cdl, box_a, score_a, scratch);
        int nb = proposals_select(&p, crk, clg, cdl, box_b, score_b, scratch);
        assert_true(na > 0);
        assert_int_equal(na, nb);
        assert_memory_equal(box_a, box_b, sizeof(float) * 4 * (size_t)na);
        assert_memory_equal(score_a, score_b, sizeof(float) * (size_t)na);
        free(scratch);
        for (int l = 0; l < 2; l++) {
            free(lg[l]);
            free(dl[l]);
            free(ranked[l]);
        }
    }
}

/* ----------------------------------------------------------------- RoIAlign */

/* f(y, x, c) = x + 100*y + 1000*c: bilinear sampling of a linear function
 * is exact, so the expected output is the mean of the sample positions. */
static float *linear_feat(int H, int W, int C)
{
    float *f = xmalloc(sizeof(float) * H * W * C);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < C; c++) f[((size_t)y * W + x) * C + c] = (float)(x + 100 * y + 1000 * c);
    return f;
}

static void test_roi_align_empty(void **state)
{
    (void)state;
    float *f = linear_feat(4, 4, 2);
    mr_tensor t = mr_tensor_make(f, 1, 4, 4, 2);
    mr_roi_align_params p = {2, 2, 2, 0, 1.0f};
    float out[1] = {42};
    roi_align_cpu(&p, &t, NULL, 0, out);
    assert_true(out[0] == 42);
    free(f);
}

static void test_roi_align_linear(void **state)
{
    (void)state;
    const int H = 8, W = 8, C = 3;
    float *f = linear_feat(H, W, C);
    mr_tensor t = mr_tensor_make(f, 1, H, W, C);
    float out[2 * 2 * 3];

    /* aligned, sampling 1, roi [0,0,4,4]: start -0.5, bin 2, samples at 0.5, 2.5 */
    mr_roi_align_params p = {2, 2, 1, 1, 1.0f};
    const float roi[4] = {0, 0, 4, 4};
    roi_align_cpu(&p, &t, roi, 1, out);
    for (int ph = 0; ph < 2; ph++)
        for (int pw = 0; pw < 2; pw++)
            for (int c = 0; c < C; c++)
                ASSERT_FEQ(out[(ph * 2 + pw) * C + c], (0.5f + 2 * pw) + 100 * (0.5f + 2 * ph) + 1000 * c, 1e-3);

    /* legacy, sampling 2, scale 0.5, roi [2,2,10,10] -> [1,1,5,5]: bin 2,
     * samples at 1.5, 2.5 (bin 0) -> mean 2 (+ bin) */
    mr_roi_align_params q = {2, 2, 2, 0, 0.5f};
    const float r2[4] = {2, 2, 10, 10};
    roi_align_cpu(&q, &t, r2, 1, out);
    ASSERT_FEQ(out[0], 2 + 100 * 2, 1e-3);
    ASSERT_FEQ(out[(1 * 2 + 1) * C + 2], 4 + 100 * 4 + 2000, 1e-3);

    /* adaptive: roi 4x4 at scale 1 into 2x2 -> grid ceil(4/2) = 2, same as sampling 2 */
    mr_roi_align_params a = {2, 2, 0, 0, 1.0f}, a2 = {2, 2, 2, 0, 1.0f};
    float out2[12];
    roi_align_cpu(&a, &t, roi, 1, out);
    roi_align_cpu(&a2, &t, roi, 1, out2);
    for (int i = 0; i < 12; i++) assert_true(out[i] == out2[i]);
    free(f);
}

static void test_roi_align_degenerate_outside(void **state)
{
    (void)state;
    const int H = 6, W = 6, C = 1;
    float *f = linear_feat(H, W, C);
    mr_tensor t = mr_tensor_make(f, 1, H, W, C);
    float out[4];

    /* wholly outside (x > W everywhere): every sample contributes 0 */
    mr_roi_align_params p = {2, 2, 2, 0, 1.0f};
    const float far[4] = {50, 50, 60, 60};
    roi_align_cpu(&p, &t, far, 1, out);
    for (int i = 0; i < 4; i++) assert_true(out[i] == 0.0f);

    /* legacy zero-size roi at (2,3): forced to 1x1; bin 0.5, samples at
     * 2.125, 2.375 (x) and 3.125, 3.375 (y) -> bin (0,0) mean x 2.25, y 3.25 */
    const float pt[4] = {2, 3, 2, 3};
    roi_align_cpu(&p, &t, pt, 1, out);
    ASSERT_FEQ(out[0], 2.25f + 100 * 3.25f, 1e-3);

    /* aligned zero-size roi with adaptive sampling: grid 0, count 1 -> 0 */
    mr_roi_align_params z = {2, 2, 0, 1, 1.0f};
    roi_align_cpu(&z, &t, pt, 1, out);
    for (int i = 0; i < 4; i++) assert_true(out[i] == 0.0f);

    /* samples in (W-1, W]: clamped to the last column; in [-1, 0]: to 0 */
    mr_roi_align_params s1 = {1, 1, 1, 0, 1.0f};
    const float edge[4] = {5.2f, -0.8f, 6.2f, 0.2f}; /* sample (x 5.7, y -0.3) */
    roi_align_cpu(&s1, &t, edge, 1, out);
    ASSERT_FEQ(out[0], 5.0f + 0.0f, 1e-4);
    free(f);
}

static void test_level_map(void **state)
{
    (void)state;
    const mr_level_map tv = {2, 5, 224, 4, 1e-6f, 0, 0};
    const float b224[4] = {0, 0, 224, 224}, b112[4] = {10, 10, 122, 122}, b448[4] = {0, 0, 448, 448};
    const float just_below[4] = {0, 0, 223.9f, 224}, tiny[4] = {0, 0, 1, 1}, huge[4] = {0, 0, 5000, 5000};
    assert_int_equal(roi_level(&tv, b224), 4);
    assert_int_equal(roi_level(&tv, b112), 3);
    assert_int_equal(roi_level(&tv, b448), 5);
    assert_int_equal(roi_level(&tv, just_below), 3);
    assert_int_equal(roi_level(&tv, tiny), 2);
    assert_int_equal(roi_level(&tv, huge), 5);

    /* Detectron: +1 area, eps inside the log: [0,0,223,223] has s = 224 */
    const mr_level_map dt = {2, 5, 224, 4, 1e-6f, 1, 1};
    const float d224[4] = {0, 0, 223, 223};
    assert_int_equal(roi_level(&dt, d224), 4);
    assert_int_equal(roi_level(&tv, d224), 3);
    /* detectron2: no +1, eps 1e-8 inside */
    const mr_level_map d2 = {2, 5, 224, 4, 1e-8f, 0, 1};
    assert_int_equal(roi_level(&d2, b224), 4);
    assert_int_equal(roi_level(&d2, b112), 3);
}

static void test_roi_align_multilevel(void **state)
{
    (void)state;
    /* levels 2..5 of a 64x64 image: 16, 8, 4, 2 px; distinct constants per
     * level so the output names the level it came from */
    float *f[4];
    mr_tensor t[4];
    const mr_tensor *lv[4];
    for (int l = 0; l < 4; l++) {
        int s = 16 >> l;
        f[l] = xmalloc(sizeof(float) * s * s * 2);
        for (int i = 0; i < s * s * 2; i++) f[l][i] = (float)(l + 2) * 10 + (float)(i % 2);
        t[l] = mr_tensor_make(f[l], 1, s, s, 2);
        lv[l] = &t[l];
    }
    const mr_level_map map = {2, 5, 224, 4, 1e-6f, 0, 0};
    const mr_roi_align_params base = {2, 2, 2, 0, 123.0f};
    const float rois[12] = {0, 0, 8, 8, 0, 0, 60, 60, 0, 0, 224, 224};
    int lvls[3];
    float out[3 * 2 * 2 * 2];
    roi_align_multilevel_cpu(&base, &map, lv, rois, 3, lvls, out);
    assert_int_equal(lvls[0], 2);
    assert_int_equal(lvls[1], 2); /* 60/224 -> 4 + log2(.27) = 2.1 */
    assert_int_equal(lvls[2], 4);
    ASSERT_FEQ(out[0], 20.0f, 1e-5);
    ASSERT_FEQ(out[1], 21.0f, 1e-5);
    /* roi 2 at level 4 (scale 1/16: [0,0,14,14] on a 4x4 map: partly outside) */
    mr_roi_align_params single = base;
    single.spatial_scale = 1.0f / 16;
    float ref[8];
    roi_align_cpu(&single, &t[2], rois + 8, 1, ref);
    for (int i = 0; i < 8; i++) assert_true(out[16 + i] == ref[i]);
    roi_align_multilevel_cpu(&base, &map, lv, rois, 0, NULL, out); /* n = 0 */
    for (int l = 0; l < 4; l++) free(f[l]);
}

/* n rois of a 160x160 image, some reaching past its edges. */
static void random_rois(uint32_t *seed, int n, float *rois)
{
    for (int i = 0; i < n; i++) {
        float v[4];
        for (int k = 0; k < 4; k++) {
            *seed = *seed * 1664525u + 1013904223u;
            v[k] = (float)(*seed >> 8) / (float)(1u << 24) * 200.0f - 20.0f;
        }
        rois[4 * i + 0] = fminf(v[0], v[2]);
        rois[4 * i + 1] = fminf(v[1], v[3]);
        rois[4 * i + 2] = fmaxf(v[0], v[2]);
        rois[4 * i + 3] = fmaxf(v[1], v[3]);
    }
}

/* nChw8c and nChw16c levels (the CPU backend's layouts between
 * convolutions) give the same bits as NHWC, which the parity tests hold to
 * torchvision's kernel. */
static void test_roi_align_blocked_levels(void **state)
{
    (void)state;
    enum { C = 48, LEVELS = 4 };
    const int side[LEVELS] = {40, 20, 10, 5};
    float *nhwc[LEVELS], *blk[LEVELS], *blk16[LEVELS];
    mr_tensor tn[LEVELS], tb[LEVELS], tb16[LEVELS];
    const mr_tensor *ln[LEVELS], *lb[LEVELS];
    uint32_t seed = 12345u;
    for (int l = 0; l < LEVELS; l++) {
        int s = side[l];
        nhwc[l] = xmalloc(sizeof(float) * s * s * C);
        blk[l] = xmalloc(sizeof(float) * s * s * C);
        blk16[l] = xmalloc(sizeof(float) * s * s * C);
        for (int i = 0; i < s * s * C; i++) {
            seed = seed * 1664525u + 1013904223u;
            nhwc[l][i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
        }
        for (int y = 0; y < s; y++)
            for (int x = 0; x < s; x++)
                for (int c = 0; c < C; c++) {
                    float v = nhwc[l][((size_t)y * s + x) * C + c];
                    blk[l][(((size_t)(c / 8) * s + y) * s + x) * 8 + c % 8] = v;
                    blk16[l][(((size_t)(c / 16) * s + y) * s + x) * 16 + c % 16] = v;
                }
        tn[l] = mr_tensor_make(nhwc[l], 1, s, s, C);
        tb[l] = mr_tensor_make(blk[l], 1, s, s, C);
        tb16[l] = mr_tensor_make(blk16[l], 1, s, s, C);
        ln[l] = &tn[l];
    }
    enum { N = 40 };
    float rois[4 * N];
    random_rois(&seed, N, rois);
    const mr_level_map map = {2, 5, 224, 4, 1e-6f, 0, 0};
    const int blocked_sets[5][LEVELS] = {{8, 8, 8, 8}, {16, 16, 16, 16}, {8, 0, 8, 0}, {0, 16, 8, 16}, {0, 0, 0, 0}};
    const mr_roi_align_params params[3] = {{7, 7, 2, 0, 1.0f}, {14, 14, 0, 1, 1.0f}, {3, 5, 3, 0, 1.0f}};
    for (int pi = 0; pi < 3; pi++) {
        size_t count = (size_t)N * params[pi].out_h * params[pi].out_w * C;
        float *ref = xmalloc(sizeof(float) * count), *got = xmalloc(sizeof(float) * count);
        roi_align_multilevel_cpu(&params[pi], &map, ln, rois, N, NULL, ref);
        for (int bs = 0; bs < 5; bs++) {
            for (int l = 0; l < LEVELS; l++) {
                int b = blocked_sets[bs][l];
                lb[l] = b == 16 ? &tb16[l] : b == 8 ? &tb[l] : &tn[l];
            }
            memset(got, 0xff, sizeof(float) * count);
            roi_align_multilevel_layout_cpu(&params[pi], &map, lb, blocked_sets[bs], NULL, rois, N, NULL, got);
            assert_memory_equal(got, ref, sizeof(float) * count);
        }
        free(ref);
        free(got);
    }
    for (int l = 0; l < LEVELS; l++) {
        free(nhwc[l]);
        free(blk[l]);
        free(blk16[l]);
    }
}

/* Levels handed over quantized (the CPU backend's int8 FPN levels, s8) are
 * read as q x step: the same bits as NHWC fp32 levels holding those
 * values; an fp32 level among them is read as before. */
static void test_roi_align_quantized_levels(void **state)
{
    (void)state;
    enum { C = 48, LEVELS = 4 };
    const int side[LEVELS] = {40, 20, 10, 5};
    const int kind[LEVELS] = {ROI_ALIGN_LEVEL_S8, ROI_ALIGN_LEVEL_S8, ROI_ALIGN_LEVEL_S8, 0};
    const float step[LEVELS] = {0.037f, 0.011f, 0.25f, 0.0f};
    float *ref_level[LEVELS];
    void *q_level[LEVELS];
    mr_tensor tn[LEVELS], tq[LEVELS];
    const mr_tensor *ln[LEVELS], *lq[LEVELS];
    uint32_t seed = 777u;
    for (int l = 0; l < LEVELS; l++) {
        int s = side[l];
        ref_level[l] = xmalloc(sizeof(float) * s * s * C);
        q_level[l] = xmalloc((size_t)s * s * C);
        for (int i = 0; i < s * s * C; i++) {
            seed = seed * 1664525u + 1013904223u;
            int v = (int)(seed >> 24); /* 0..255 */
            if (kind[l] == ROI_ALIGN_LEVEL_S8) {
                int8_t q = (int8_t)(v - 128 < -127 ? -127 : v - 128);
                ((int8_t *)q_level[l])[i] = q;
                ref_level[l][i] = (float)q * step[l];
            } else {
                ref_level[l][i] = (float)(v - 128) / 64.0f;
            }
        }
        tn[l] = mr_tensor_make(ref_level[l], 1, s, s, C);
        tq[l] = mr_tensor_make(kind[l] ? q_level[l] : ref_level[l], 1, s, s, C);
        ln[l] = &tn[l];
        lq[l] = &tq[l];
    }
    enum { N = 40 };
    float rois[4 * N];
    random_rois(&seed, N, rois);
    /* rois for level 5 (side 600), level 4 (300) and level 2 (about 10) */
    const float big[4] = {-200.0f, -200.0f, 400.0f, 400.0f}, mid[4] = {-50.0f, -60.0f, 250.0f, 240.0f};
    const float small[4] = {30.0f, 40.0f, 42.0f, 49.0f};
    memcpy(rois, big, sizeof big);
    memcpy(rois + 4, mid, sizeof mid);
    memcpy(rois + 8, small, sizeof small);
    const mr_level_map map = {2, 5, 224, 4, 1e-6f, 0, 0};
    const mr_roi_align_params params[2] = {{7, 7, 2, 0, 1.0f}, {14, 14, 0, 1, 1.0f}};
    int levels_used[LEVELS] = {0};
    for (int i = 0; i < N; i++) levels_used[roi_level(&map, rois + 4 * i) - map.min_level]++;
    for (int pi = 0; pi < 2; pi++) {
        size_t count = (size_t)N * params[pi].out_h * params[pi].out_w * C;
        float *ref = xmalloc(sizeof(float) * count), *got = xmalloc(sizeof(float) * count);
        roi_align_multilevel_cpu(&params[pi], &map, ln, rois, N, NULL, ref);
        memset(got, 0xff, sizeof(float) * count);
        roi_align_multilevel_layout_cpu(&params[pi], &map, lq, kind, step, rois, N, NULL, got);
        assert_memory_equal(got, ref, sizeof(float) * count);
        free(ref);
        free(got);
    }
    printf("rois per level: %d %d %d %d\n", levels_used[0], levels_used[1], levels_used[2], levels_used[3]);
    /* every kind of level was sampled */
    for (int l = 0; l < LEVELS; l++) assert_true(levels_used[l] > 0);
    for (int l = 0; l < LEVELS; l++) {
        free(ref_level[l]);
        free(q_level[l]);
    }
}

/* --------------------------------------------------------------- mask paste */

static void assert_window(mr_mask_window w, int x0, int y0, int ww, int wh)
{
    assert_int_equal(w.x0, x0);
    assert_int_equal(w.y0, y0);
    assert_int_equal(w.w, ww);
    assert_int_equal(w.h, wh);
}

static void test_mask_paste_window(void **state)
{
    (void)state;
    const int M = 28, H = 60, W = 70;
    mr_mask_paste_params p = {M, 1, 0.5f, MR_MASK_GT, MR_PASTE_TORCHVISION};
    float mask[28 * 28];
    for (int i = 0; i < M * M; i++) mask[i] = 1.0f;
    void *s = xmalloc(mask_paste_scratch_bytes(M, 1));
    assert_int_equal(mask_paste_scratch_bytes(M, 1), 30 * 30 * sizeof(float));
    float *img = xmalloc(sizeof(float) * H * W);
    uint8_t *bin = xmalloc((size_t)H * W);

    /* box [10,10,38,38]: w_half = 14*30/28 = 15, centre 24 -> [9, 39], w = 31 */
    const float box[4] = {10, 10, 38, 38};
    mr_paste_geom g = mask_paste_geom(M, 1, box, H, W);
    assert_int_equal(g.bx0, 9);
    assert_int_equal(g.w, 31);
    assert_int_equal(g.x1, 40);
    assert_window(mask_paste_window(&p, box, H, W), 9, 9, 31, 31); /* the window is the paste rectangle */
    assert_int_equal(mask_paste_prob_plane(&p, mask, box, H, W, img, s, NULL), MR_OK);
    ASSERT_FEQ(img[24 * W + 24], 1.0f, 1e-6);         /* interior */
    assert_true(img[9 * W + 9] == 0.0f);               /* corner samples the zero padding */
    assert_true(img[10 * W + 10] > 0.5f && img[10 * W + 10] < 1.0f);
    assert_true(img[8 * W + 24] == 0.0f);        /* above the window */
    assert_true(img[24 * W + 40] == 0.0f);       /* right of the window */
    assert_int_equal(mask_paste_binary_plane(&p, mask, box, H, W, bin, s, NULL), MR_OK);
    assert_int_equal(bin[24 * W + 24], 1);
    assert_int_equal(bin[9 * W + 9], 0);
    assert_int_equal(bin[10 * W + 10], 1);

    /* partly outside: only the inside part is written, nothing crashes */
    const float edge[4] = {-20, 50, 20, 90};
    assert_window(mask_paste_window(&p, edge, H, W), 0, 48, 22, 12);
    assert_int_equal(mask_paste_prob_plane(&p, mask, edge, H, W, img, s, NULL), MR_OK);
    ASSERT_FEQ(img[(H - 1) * W + 0], 1.0f, 1e-6); /* window rows 48..59, cols 0..21 */
    /* col 21 is the resized mask's last column: it samples the zero padding */
    assert_true(img[(H - 1) * W + 20] > 0.5f && img[(H - 1) * W + 21] == 0.0f);
    assert_true(img[40 * W + 0] == 0.0f);
    /* wholly outside and degenerate boxes: all zero */
    const float out_box[4] = {-100, -100, -50, -50}, flat[4] = {30, 30, 30, 30}, right[4] = {200, 5, 260, 40};
    const float *cases[3] = {out_box, flat, right};
    for (int c = 0; c < 3; c++) {
        assert_int_equal(mask_paste_prob_plane(&p, mask, cases[c], H, W, img, s, NULL), MR_OK);
        int nz = 0;
        for (int i = 0; i < H * W; i++) nz += img[i] != 0.0f;
        assert_int_equal(nz, c == 1 ? 1 : 0); /* flat box: w = h = 1 pixel at (30,30) */
    }
    assert_window(mask_paste_window(&p, out_box, H, W), 0, 0, 0, 0);
    assert_window(mask_paste_window(&p, flat, H, W), 30, 30, 1, 1);
    assert_window(mask_paste_window(&p, right, H, W), 0, 0, 0, 0);
    /* detectron2's window: [floor(x1) - 1, ceil(x2) + 1) clipped to the image; empty box: none */
    mr_mask_paste_params d2 = p;
    d2.rule = MR_PASTE_DETECTRON2;
    const float d2_box[4] = {10.5f, 20.25f, 30.75f, 40.0f}, d2_all[4] = {0.2f, 0.5f, 69.5f, 59.9f};
    assert_window(mask_paste_window(&d2, d2_box, H, W), 9, 19, 23, 22);
    assert_window(mask_paste_window(&d2, d2_all, H, W), 0, 0, 70, 60);
    assert_window(mask_paste_window(&d2, flat, H, W), 0, 0, 0, 0);
    /* zero-size image */
    assert_int_equal(mask_paste_binary_plane(&p, mask, box, 0, 0, bin, s, NULL), MR_OK);
    /* rules not implemented yet are refused */
    mr_mask_paste_params bad = p;
    bad.rule = (mr_paste_rule)7;
    mr_error err;
    assert_int_equal(mask_paste_prob_plane(&bad, mask, box, H, W, img, s, &err), MR_ERR_UNSUPPORTED);
    free(s);
    free(img);
    free(bin);
}

static void test_mask_paste_threshold_rule(void **state)
{
    (void)state;
    /* padding 0 and a 28-px box: scale 1, the resize is a copy, so a 0.5
     * mask pastes exactly 0.5 and > / >= differ */
    const int M = 28, H = 40, W = 40;
    float mask[28 * 28];
    for (int i = 0; i < M * M; i++) mask[i] = 0.5f;
    mr_mask_paste_params p = {M, 0, 0.5f, MR_MASK_GT, MR_PASTE_TORCHVISION};
    void *s = xmalloc(mask_paste_scratch_bytes(M, 0));
    uint8_t bin[40 * 40];
    float img[40 * 40];
    const float box[4] = {10, 10, 37, 37}; /* [10, 37] -> w = 28 */
    assert_int_equal(mask_paste_prob_plane(&p, mask, box, H, W, img, s, NULL), MR_OK);
    assert_true(img[10 * W + 10] == 0.5f && img[37 * W + 37] == 0.5f && img[38 * W + 38] == 0.0f);
    assert_int_equal(mask_paste_binary_plane(&p, mask, box, H, W, bin, s, NULL), MR_OK);
    int n = 0;
    for (int i = 0; i < H * W; i++) n += bin[i];
    assert_int_equal(n, 0);
    p.cmp = MR_MASK_GE;
    assert_int_equal(mask_paste_binary_plane(&p, mask, box, H, W, bin, s, NULL), MR_OK);
    for (int i = 0; i < H * W; i++) n += bin[i];
    assert_int_equal(n, 28 * 28);
    free(s);
}

/* ---------------------------------------------------------------------- RLE */

static void test_rle_known(void **state)
{
    (void)state;
    /* 2x3 [[0,1,1],[0,0,1]]: column-major 0,0 | 1,0 | 1,1 -> runs 2,1,1,2;
     * string: '2','1','1', then 2 - counts[1] = 1 -> "2111" */
    const uint8_t m[6] = {0, 1, 1, 0, 0, 1};
    uint32_t cnt[7];
    int n;
    assert_int_equal(rle_encode(m, 2, 3, cnt, &n), MR_OK);
    assert_int_equal(n, 4);
    assert_true(cnt[0] == 2 && cnt[1] == 1 && cnt[2] == 1 && cnt[3] == 2);
    char str[64];
    assert_int_equal(rle_to_string(cnt, n, str, sizeof str), 4);
    assert_string_equal(str, "2111");

    /* 1 -> '1', 10 -> ':', 1 -> '1', then the delta 2 - 10 = -8: chunk 24
     * (sign bit 0x10 set), rest -1 -> 'H'. 40 = 0b1_01000: low chunk
     * 8 | 0x20 (more) -> 'X', then 1 -> '1' */
    const uint32_t c2[4] = {1, 10, 1, 2};
    assert_int_equal(rle_to_string(c2, 4, str, sizeof str), 4);
    assert_string_equal(str, "1:1H");
    const uint32_t c3[1] = {40};
    rle_to_string(c3, 1, str, sizeof str);
    assert_string_equal(str, "X1");
    /* truncation is reported like snprintf */
    char small[3];
    assert_int_equal(rle_to_string(c2, 4, small, sizeof small), 4);
    assert_string_equal(small, "1:");

    /* all zero / all one 3x4, 1x1, empty */
    uint8_t z[12] = {0}, o[12];
    memset(o, 1, sizeof o);
    rle_encode(z, 3, 4, cnt, &n);
    assert_int_equal(n, 1);
    assert_true(cnt[0] == 12);
    rle_to_string(cnt, n, str, sizeof str);
    assert_string_equal(str, "<");
    rle_encode(o, 3, 4, cnt, &n);
    assert_int_equal(n, 2);
    assert_true(cnt[0] == 0 && cnt[1] == 12);
    rle_to_string(cnt, n, str, sizeof str);
    assert_string_equal(str, "0<");
    rle_encode(o, 1, 1, cnt, &n);
    assert_true(n == 2 && cnt[0] == 0 && cnt[1] == 1);
    rle_encode(z, 1, 1, cnt, &n);
    assert_true(n == 1 && cnt[0] == 1);
    rle_encode(z, 0, 5, cnt, &n);
    assert_true(n == 1 && cnt[0] == 0);
}

static void test_rle_bad_strings(void **state)
{
    (void)state;
    uint32_t cnt[8];
    int n;
    mr_error err;
    assert_int_equal(rle_from_string("2111", cnt, 8, &n, &err), MR_OK);
    assert_int_equal(n, 4);
    assert_true(cnt[3] == 2);
    assert_int_equal(rle_from_string("", cnt, 8, &n, &err), MR_OK);
    assert_int_equal(n, 0);
    assert_int_equal(rle_from_string("21 1", cnt, 8, &n, &err), MR_ERR_FORMAT);
    assert_int_equal(rle_from_string("2X", cnt, 8, &n, &err), MR_ERR_FORMAT); /* cut off */
    assert_int_equal(rle_from_string("H", cnt, 8, &n, &err), MR_ERR_FORMAT);  /* -8: negative count */
    assert_int_equal(rle_from_string("2111", cnt, 3, &n, &err), MR_ERR_RANGE);
    /* counts must cover the mask exactly */
    uint8_t m[6];
    const uint32_t c[3] = {2, 1, 1};
    assert_int_equal(rle_decode(c, 3, 2, 3, m, &err), MR_ERR_FORMAT);
}

static void test_rle_random_round_trip(void **state)
{
    (void)state;
    unsigned seed = 12345;
    printf("rle round trip seed %u\n", seed);
    srand(seed);
    for (int t = 0; t < 200; t++) {
        int h = 1 + rand() % 40, w = 1 + rand() % 40;
        if (t == 0) h = w = 1;
        int mode = t % 4; /* random, all zero, all one, blobs */
        uint8_t *m = xmalloc((size_t)h * w), *back = xmalloc((size_t)h * w);
        for (int i = 0; i < h * w; i++) {
            int r = rand();
            m[i] = mode == 0 ? r % 2 : mode == 1 ? 0 : mode == 2 ? 1 : (uint8_t)(((i / w) / 5 + (i % w) / 7) % 2);
        }
        uint32_t *cnt = xmalloc(sizeof(uint32_t) * (h * w + 1)), *cnt2 = xmalloc(sizeof(uint32_t) * (h * w + 1));
        int n, n2;
        assert_int_equal(rle_encode(m, h, w, cnt, &n), MR_OK);
        assert_true(n >= 1 && n <= h * w + 1);
        size_t cap = rle_string_max_bytes(n);
        char *str = xmalloc(cap);
        size_t len = rle_to_string(cnt, n, str, cap);
        assert_true(len < cap && strlen(str) == len);
        assert_int_equal(rle_from_string(str, cnt2, h * w + 1, &n2, NULL), MR_OK);
        assert_int_equal(n2, n);
        for (int i = 0; i < n; i++) assert_true(cnt[i] == cnt2[i]);
        assert_int_equal(rle_decode(cnt2, n2, h, w, back, NULL), MR_OK);
        assert_memory_equal(m, back, (size_t)h * w);
        free(m);
        free(back);
        free(cnt);
        free(cnt2);
        free(str);
    }
    /* a count near 2^32 survives the string form */
    const uint32_t big[4] = {4294967295u, 1, 0, 4294967290u};
    char str[64];
    uint32_t back[4];
    int n;
    rle_to_string(big, 4, str, sizeof str);
    assert_int_equal(rle_from_string(str, back, 4, &n, NULL), MR_OK);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) assert_true(back[i] == big[i]);
}

/* A mask held over a window encodes to the counts of its whole plane: held
 * to rle_decode (a plain walk over every pixel) of the counts. */
static void test_rle_window(void **state)
{
    (void)state;
    unsigned seed = 777;
    printf("rle window seed %u\n", seed);
    srand(seed);
    for (int t = 0; t < 300; t++) {
        int h = 1 + rand() % 30, w = 1 + rand() % 30;
        int ww = rand() % (w + 1), wh = rand() % (h + 1);
        int x0 = ww < w ? rand() % (w - ww + 1) : 0, y0 = wh < h ? rand() % (h - wh + 1) : 0;
        int mode = t % 4; /* random, all zero, all one, blobs */
        uint8_t *win = xmalloc((size_t)ww * wh + 1), *plane = xmalloc((size_t)h * w), *back = xmalloc((size_t)h * w);
        for (int i = 0; i < ww * wh; i++)
            win[i] = mode == 0 ? rand() % 2 : mode == 1 ? 0 : mode == 2 ? 1 : (uint8_t)(((i / ww) / 3 + (i % ww) / 4) % 2);
        mask_window_to_plane_u8((mr_mask_window){x0, y0, ww, wh}, win, h, w, plane);
        uint32_t *cnt = xmalloc(sizeof(uint32_t) * (h * w + 1));
        int n;
        assert_int_equal(rle_encode_window(win, x0, y0, ww, wh, h, w, cnt, &n), MR_OK);
        assert_true(n >= 1 && n <= 2 * ww * wh + 1 && n <= h * w + 1); /* rle.h's bound on counts */
        assert_int_equal(rle_decode(cnt, n, h, w, back, NULL), MR_OK);
        assert_memory_equal(back, plane, (size_t)h * w);
        free(win);
        free(plane);
        free(back);
        free(cnt);
    }
    /* the bound is reached: one row, every pixel set, a run between columns */
    uint8_t row[4] = {1, 1, 1, 1};
    uint32_t cnt[31];
    int n;
    assert_int_equal(rle_encode_window(row, 1, 2, 4, 1, 5, 6, cnt, &n), MR_OK);
    assert_int_equal(n, 9);
    assert_true(cnt[0] == 7 && cnt[1] == 1 && cnt[2] == 4 && cnt[8] == 2 + 5);
    /* a window not inside the image is refused; an empty one anywhere is all background */
    assert_int_equal(rle_encode_window(row, 3, 2, 4, 1, 5, 6, cnt, &n), MR_ERR_RANGE);
    assert_int_equal(rle_encode_window(row, -1, 0, 4, 1, 5, 6, cnt, &n), MR_ERR_RANGE);
    assert_int_equal(rle_encode_window(row, 0, 5, 4, 1, 5, 6, cnt, &n), MR_ERR_RANGE);
    assert_int_equal(rle_encode_window(row, 0, 0, -1, 1, 5, 6, cnt, &n), MR_ERR_RANGE);
    assert_int_equal(rle_encode_window(row, 99, 99, 0, 0, 5, 6, cnt, &n), MR_OK);
    assert_true(n == 1 && cnt[0] == 30);
    /* mask_window_fits, which every window reader uses: the last fitting
     * column and row, one past them, and origins whose sums would overflow */
    assert_true(mask_window_fits((mr_mask_window){2, 4, 4, 1}, 5, 6));
    assert_false(mask_window_fits((mr_mask_window){3, 4, 4, 1}, 5, 6));
    assert_false(mask_window_fits((mr_mask_window){2, 5, 4, 1}, 5, 6));
    assert_false(mask_window_fits((mr_mask_window){INT_MAX, 0, 1, 1}, 5, 6));
    assert_false(mask_window_fits((mr_mask_window){0, INT_MAX, 1, INT_MAX}, 5, 6));
    assert_true(mask_window_fits((mr_mask_window){-7, INT_MIN, 0, 3}, 5, 6)); /* empty */
    assert_false(mask_window_fits((mr_mask_window){0, 0, 0, -1}, 5, 6));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_zero_delta),
        cmocka_unit_test(test_decode_shift_scale_clip),
        cmocka_unit_test(test_clip_area_iou),
        cmocka_unit_test(test_anchors_torchvision),
        cmocka_unit_test(test_anchors_detectron_and_shift),
        cmocka_unit_test(test_nms_empty),
        cmocka_unit_test(test_nms_basic_and_ties),
        cmocka_unit_test(test_nms_threshold_is_double_and_degenerate),
        cmocka_unit_test(test_nms_suppress_ge),
        cmocka_unit_test(test_batched_nms),
        cmocka_unit_test(test_nms_large_stable),
        cmocka_unit_test(test_roi_align_empty),
        cmocka_unit_test(test_roi_align_linear),
        cmocka_unit_test(test_roi_align_degenerate_outside),
        cmocka_unit_test(test_level_map),
        cmocka_unit_test(test_proposals_rank_by_logit),
        cmocka_unit_test(test_proposals_selection_equals_sort),
        cmocka_unit_test(test_roi_align_multilevel),
        cmocka_unit_test(test_roi_align_blocked_levels),
        cmocka_unit_test(test_roi_align_quantized_levels),
        cmocka_unit_test(test_mask_paste_window),
        cmocka_unit_test(test_mask_paste_threshold_rule),
        cmocka_unit_test(test_rle_window),
        cmocka_unit_test(test_rle_known),
        cmocka_unit_test(test_rle_bad_strings),
        cmocka_unit_test(test_rle_random_round_trip),
    };
    return cmocka_run_group_tests_name("ops", tests, NULL, NULL);
}
