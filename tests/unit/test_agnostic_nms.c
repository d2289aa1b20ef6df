/* The box head's class-agnostic NMS (box_head.agnostic_nms): box_post_select
 * with agnostic_nms, nms_ordered_cpu, and the tile algorithm of the CUDA
 * backend's ordered_kernel (cuda/nms.cu) emulated here in C with the same
 * nms.h functions, against a reference written in this file.
 *
 * The reference is independent of engine/nms.c: its own sort and IoU
 * (torchvision's formula written out), a greedy NMS per class, then a
 * greedy NMS over all the survivors regardless of class (what
 * torchvision.ops.nms does on the per-class survivors), then the max_dets
 * cut. Cases: hand-built boxes whose outcome is written down (a box of
 * another class on the same object goes; a box suppressed within its class
 * stays gone even when the box that suppressed it goes too; the threshold
 * decides), then random boxes on an integer grid. The seed is fixed and
 * printed. The config key's default (the file's nms_thresh) is checked too. */
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
#include "core/config.h"
#include "ops/nms.h"

#define SEED 20260126u
#define MAX_N 200

static uint32_t rng_state;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* ------------------------------------------------------------ reference */

static float ref_iou(const float *a, const float *b)
{
    float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    float w = fminf(a[2], b[2]) - fmaxf(a[0], b[0]), h = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    w = w > 0 ? w : 0;
    h = h > 0 ? h : 0;
    float inter = w * h;
    return inter / (area_a + area_b - inter);
}

static const float *g_scores;

/* descending score, ties by index (scores here are distinct) */
static int by_score(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    if (g_scores[a] != g_scores[b]) return g_scores[a] > g_scores[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* Greedy NMS over idx[0..n) (any order); returns the kept, by descending score. */
static int ref_greedy(const float *boxes, const float *scores, int *idx, int n, double thr)
{
    g_scores = scores;
    qsort(idx, (size_t)n, sizeof *idx, by_score);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int ok = 1;
        for (int k = 0; k < kept && ok; k++)
            if ((double)ref_iou(boxes + 4 * idx[k], boxes + 4 * idx[i]) > thr) ok = 0;
        if (ok) idx[kept++] = idx[i];
    }
    return kept;
}

/* Per-class NMS, then (agnostic) NMS over all survivors, then the best max_dets. */
static int reference(const float *boxes, const float *scores, const int *groups, int n, double thr, int agnostic,
                     double agn_thr, int max_dets, int *out)
{
    int survivors = 0, idx[MAX_N];
    for (int g = 0; g < 16; g++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (groups[i] == g) idx[m++] = i;
        m = ref_greedy(boxes, scores, idx, m, thr);
        memcpy(out + survivors, idx, sizeof(int) * (size_t)m);
        survivors += m;
    }
    if (agnostic) survivors = ref_greedy(boxes, scores, out, survivors, agn_thr);
    g_scores = scores;
    qsort(out, (size_t)survivors, sizeof *out, by_score);
    return survivors < max_dets ? survivors : max_dets;
}

/* ------------------------------------------------------------ under test */

static mr_box_post_params params(double thr, int agnostic, double agn_thr, int max_dets)
{
    mr_box_post_params p;
    memset(&p, 0, sizeof p);
    p.num_classes = 16;
    p.nms_thresh = thr;
    p.agnostic_nms = agnostic;
    p.agnostic_nms_thresh = agn_thr;
    p.max_dets = max_dets;
    p.out_capacity = max_dets;
    return p;
}

/* box_post_select; returns D and the candidates chosen (by box and score). */
static int run_select(const mr_box_post_params *p, const float *boxes, const float *scores, const int *groups, int n,
                      int *chosen)
{
    static float ob[4 * MAX_N], os[MAX_N], ol[MAX_N];
    static int keep[MAX_N];
    void *scratch = malloc(nms_scratch_bytes(n) + 16);
    int d = box_post_select(p, boxes, scores, groups, n, ob, os, ol, keep, scratch);
    free(scratch);
    for (int i = 0; i < d; i++) {
        chosen[i] = -1;
        for (int c = 0; c < n; c++)
            if (scores[c] == os[i] && memcmp(boxes + 4 * c, ob + 4 * i, 4 * sizeof(float)) == 0 &&
                (float)groups[c] == ol[i])
                chosen[i] = c;
    }
    return d;
}

/* cuda/nms.cu's ordered_kernel in C: tiles of 64 of `order`, each box tested
 * against the kept so far (nms_any_suppresses), the tile's mask rows
 * (nms_mask_word), the tile decided in order (nms_block_keep); stops at cap. */
static int emulate_ordered_kernel(const float *boxes, const int *order, int n, int cap, double thr, int *keep)
{
    float thr_f = nms_float_threshold(thr, 0), kept_boxes[4 * MAX_N], kept_areas[MAX_N];
    int nk = 0;
    for (int base = 0; base < n && nk < cap; base += 64) {
        int count = n - base < 64 ? n - base : 64, sup[64];
        float cols[64 * 4], areas[64];
        uint64_t rows[64];
        for (int t = 0; t < count; t++) {
            memcpy(cols + 4 * t, boxes + 4 * order[base + t], 4 * sizeof(float));
            areas[t] = box_area(cols + 4 * t, 0);
            sup[t] = nms_any_suppresses(kept_boxes, kept_areas, nk, cols + 4 * t, areas[t], thr_f, 0);
        }
        for (int t = 0; t < count; t++) rows[t] = nms_mask_word(cols + 4 * t, areas[t], cols, areas, t + 1, count, thr_f, 0);
        uint64_t removed = 0;
        for (int r = 0; r < count; r++)
            if (sup[r]) removed |= (uint64_t)1 << r;
        uint64_t kb = nms_block_keep(removed, rows, 1, count);
        for (int r = 0; r < count && nk < cap; r++) {
            if (!((kb >> r) & 1)) continue;
            keep[nk] = order[base + r];
            memcpy(kept_boxes + 4 * nk, cols + 4 * r, 4 * sizeof(float));
            kept_areas[nk++] = areas[r];
        }
    }
    return nk;
}

/* ------------------------------------------------------------ tests */

/*  A cls 1 [0,0,10,10] 0.9; B cls 2 [3,0,13,10] 0.8, IoU(A,B) = 70/130 = 0.538;
 *  C cls 2 [5,0,15,10] 0.7, IoU(B,C) = 0.667 (gone within class 2), IoU(A,C) = 0.333;
 *  D cls 3 [30,30,40,40] 0.6; E cls 1, D's box, 0.4; F cls 3 [50,50,60,60] 0.5. */
static const float hb[6][4] = {{0, 0, 10, 10}, {3, 0, 13, 10}, {5, 0, 15, 10},
                               {30, 30, 40, 40}, {30, 30, 40, 40}, {50, 50, 60, 60}};
static const float hs[6] = {0.9f, 0.8f, 0.7f, 0.6f, 0.4f, 0.5f};
static const int hg[6] = {1, 2, 2, 3, 1, 3};
enum { A, B, C, D, E, F };

static void expect(const mr_box_post_params *p, const int *want, int nwant)
{
    int got[MAX_N];
    int d = run_select(p, &hb[0][0], hs, hg, 6, got);
    assert_int_equal(d, nwant);
    for (int i = 0; i < d; i++) assert_int_equal(got[i], want[i]);
    int ref[MAX_N];
    assert_int_equal(reference(&hb[0][0], hs, hg, 6, p->nms_thresh, p->agnostic_nms, p->agnostic_nms_thresh,
                               p->max_dets, ref),
                     nwant);
    for (int i = 0; i < nwant; i++) assert_int_equal(ref[i], want[i]);
}

static void test_hand_built(void **state)
{
    (void)state;
    mr_box_post_params p = params(0.5, 0, 0.5, 100);
    expect(&p, (int[]){A, B, D, F, E}, 5); /* per class only: C goes (class 2, under B) */
    p = params(0.5, 1, 0.5, 100);
    expect(&p, (int[]){A, D, F}, 3); /* B under A, E under D; C stays gone */
    p = params(0.5, 1, 0.6, 100);
    expect(&p, (int[]){A, B, D, F}, 4); /* 0.538 is not above 0.6: B stays */
    p = params(0.5, 1, 0.5, 2);
    expect(&p, (int[]){A, D}, 2); /* max_dets after the agnostic pass */
    p = params(0.7, 1, 0.5, 100);
    expect(&p, (int[]){A, C, D, F}, 4); /* C survives class 2 at 0.7; B goes under A, so C (0.333 with A) stays */
}

static void test_random_against_reference(void **state)
{
    (void)state;
    rng_state = SEED;
    printf("seed %u\n", SEED);
    static float boxes[4 * MAX_N], scores[MAX_N];
    static int groups[MAX_N], got[MAX_N], ref[MAX_N];
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + (int)(rng() % MAX_N), classes = 1 + (int)(rng() % 5);
        for (int i = 0; i < n; i++) {
            float x = (float)(rng() % 40), y = (float)(rng() % 40);
            boxes[4 * i + 0] = x;
            boxes[4 * i + 1] = y;
            boxes[4 * i + 2] = x + 1 + (float)(rng() % 20);
            boxes[4 * i + 3] = y + 1 + (float)(rng() % 20);
            groups[i] = 1 + (int)(rng() % (uint32_t)classes);
            scores[i] = (float)(i + 1) / (float)(n + 1);
        }
        for (int i = n - 1; i > 0; i--) { /* distinct scores in random order */
            int j = (int)(rng() % (uint32_t)(i + 1));
            float t = scores[i];
            scores[i] = scores[j];
            scores[j] = t;
        }
        double thr = (trial % 3) ? 0.5 : 0.3, agn = (trial % 4) ? thr : 0.7;
        int max_dets = (trial % 5) ? 100 : 7;
        mr_box_post_params p = params(thr, 1, agn, max_dets);
        int d = run_select(&p, boxes, scores, groups, n, got);
        int r = reference(boxes, scores, groups, n, thr, 1, agn, max_dets, ref);
        assert_int_equal(d, r);
        for (int i = 0; i < d; i++) assert_int_equal(got[i], ref[i]);

        /* the GPU's tile algorithm over the per-class survivors, capped at max_dets */
        int keep[MAX_N], order[MAX_N], ek[MAX_N];
        void *scratch = malloc(nms_scratch_bytes(n) + 16);
        int kept = batched_nms_cpu(boxes, scores, groups, n, thr, 0, order, scratch);
        int all = nms_ordered_cpu(boxes, order, kept, agn, 0, keep, scratch);
        free(scratch);
        int e = emulate_ordered_kernel(boxes, order, kept, max_dets, agn, ek);
        assert_int_equal(e, all < max_dets ? all : max_dets);
        for (int i = 0; i < e; i++) assert_int_equal(ek[i], keep[i]);
        for (int i = 0; i < e; i++) assert_int_equal(ek[i], ref[i]);
    }
}

/* nms_ordered_cpu keeps the given order (no sort) and may write over it. */
static void test_ordered_in_place(void **state)
{
    (void)state;
    float boxes[4][4] = {{0, 0, 10, 10}, {1, 0, 11, 10}, {20, 0, 30, 10}, {21, 0, 31, 10}};
    int order[4] = {3, 1, 0, 2}; /* visits 3 before 2 and 1 before 0, whatever the scores */
    void *scratch = malloc(nms_scratch_bytes(4));
    int k = nms_ordered_cpu(&boxes[0][0], order, 4, 0.5, 0, order, scratch);
    free(scratch);
    assert_int_equal(k, 2);
    assert_int_equal(order[0], 3);
    assert_int_equal(order[1], 1);
}

/* box_head.agnostic_nms_thresh: absent, it follows the file's nms_thresh. */
static void test_config_default(void **state)
{
    (void)state;
    mr_config cfg;
    mr_error err = {0};
    assert_int_equal(config_parse(&cfg, "{}", "t", &err), MR_OK);
    assert_int_equal(cfg.box_head.agnostic_nms, 0);
    assert_true(cfg.box_head.agnostic_nms_thresh == 0.5);
    assert_int_equal(config_parse(&cfg, "{\"box_head\": {\"nms_thresh\": 0.3, \"agnostic_nms\": true}}", "t", &err),
                     MR_OK);
    assert_int_equal(cfg.box_head.agnostic_nms, 1);
    assert_true(cfg.box_head.agnostic_nms_thresh == 0.3);
    assert_int_equal(config_parse(&cfg, "{\"box_head\": {\"nms_thresh\": 0.3, \"agnostic_nms_thresh\": 0.8}}", "t",
                                  &err),
                     MR_OK);
    assert_true(cfg.box_head.agnostic_nms_thresh == 0.8);
    assert_int_equal(config_parse(&cfg, "{\"box_head\": {\"agnostic_nms_thresh\": 1.5}}", "t", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "box_head.agnostic_nms_thresh"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_built),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_ordered_in_place),
        cmocka_unit_test(test_config_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
