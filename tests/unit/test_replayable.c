/* The model's side of mr_backend_i.replayable (backend.h), on the CPU: the
 * CUDA backend's graphs rely on it, and this part can be checked without a
 * GPU. The CPU backend wrapped in a table whose replayable records each
 * call and runs fn, and whose other ops fail the test when called inside
 * fn unless backend.h allows them there (conv, group_norm, max_pool,
 * upsample_nearest). With the shipped shapes model on two example scenes:
 *   - model_detect calls replayable for exactly backbone, fpn and rpn_head,
 *     in that order, each with the padded input size as key;
 *   - inside, only the allowed ops run, and the stage does run ops;
 *   - the detections equal those of the plain CPU backend, bit for bit.
 * And the same table saying it keeps counts on the device (backend.h,
 * counts_on_device; the CPU's ops still set n on the host, which the
 * contract allows), with stage marks on the host clock: model_detect then
 * calls replayable for "forward", keyed by the padded input size, with
 * the three stages nested inside in order; inside it nothing waits for or
 * copies to or from the host (sync, copy_to_host, copy_to_device), every
 * stage is marked, and the detections are again the plain backend's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "core/config.h"
#include "io/image.h"
#include "ops/image_preprocess.h"
#include "model/model.h"

#define CONFIG "configs/mask_rcnn_R-101-FPN_shapes.json"
#define WEIGHTS "models/shapes_r101_narrow.safetensors"

/* The wrapped backend's state: the CPU table it forwards to, and the record. */
static mr_backend g_cpu;
static int g_inside;          /* inside a replayable fn */
static int g_inside_ops;      /* allowed ops run inside */
static const char *g_forbidden; /* the first op called inside that must not be */
static char g_names[8][16];
static uint64_t g_keys[8];
static int g_calls;
static int g_counts_on_device; /* the second test: the whole forward pass as one unit */
static int g_marks;

static void note_op(const char *op, int allowed)
{
    if (!g_inside) return;
    /* inside "forward" every op may run, but nothing that waits for or copies to or from the host */
    if (g_counts_on_device)
        allowed = strcmp(op, "sync") != 0 && strcmp(op, "copy_to_host") != 0 && strcmp(op, "copy_to_device") != 0;
    if (allowed)
        g_inside_ops++;
    else if (!g_forbidden)
        g_forbidden = op;
}

static mr_status w_replayable(void *ctx, const char *name, uint64_t key, mr_status (*fn)(void *, mr_error *),
                              void *arg, mr_error *err)
{
    (void)ctx;
    if (g_calls < 8) {
        snprintf(g_names[g_calls], sizeof g_names[0], "%s", name);
        g_keys[g_calls] = key;
    }
    g_calls++;
    int outer = !g_inside;
    g_inside = 1;
    mr_status st = fn(arg, err);
    if (outer) g_inside = 0;
    return st;
}

static int w_counts_on_device(void *ctx)
{
    (void)ctx;
    return g_counts_on_device;
}

static mr_status w_stage_mark(void *ctx, int mark, mr_error *err)
{
    (void)ctx;
    (void)err;
    if (mark == g_marks) g_marks++; /* counts marks made in order */
    return MR_OK;
}

static mr_status w_stage_seconds(void *ctx, int marks, double *seconds, mr_error *err)
{
    (void)ctx;
    (void)err;
    for (int k = 0; k + 1 < marks; k++) seconds[k] = 0.0;
    return MR_OK;
}

/* Each op: note it, then forward to the CPU backend. */
static mr_status w_conv(void *c, mr_layer *l, const mr_tensor *x, mr_tensor *y, int acc, mr_error *e)
{
    note_op("conv", 1);
    return g_cpu.i->conv(c, l, x, y, acc, e);
}
static mr_status w_group_norm(void *c, mr_layer *l, const mr_tensor *x, mr_tensor *y, int acc, mr_error *e)
{
    note_op("group_norm", 1);
    return g_cpu.i->group_norm(c, l, x, y, acc, e);
}
static mr_status w_max_pool(void *c, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, mr_error *e)
{
    note_op("max_pool", 1);
    return g_cpu.i->max_pool(c, p, x, y, e);
}
static mr_status w_upsample(void *c, const mr_tensor *x, mr_tensor *y, mr_error *e)
{
    note_op("upsample_nearest", 1);
    return g_cpu.i->upsample_nearest(c, x, y, e);
}
static mr_status w_linear(void *c, mr_layer *l, const mr_tensor *x, mr_tensor *y, mr_error *e)
{
    note_op("linear", 0);
    return g_cpu.i->linear(c, l, x, y, e);
}
static mr_status w_deconv(void *c, mr_layer *l, const mr_tensor *x, mr_tensor *y, mr_error *e)
{
    note_op("deconv2x2", 0);
    return g_cpu.i->deconv2x2(c, l, x, y, e);
}
static mr_status w_roi_align(void *c, const mr_roi_align_params *p, const mr_level_map *m,
                             const mr_tensor *const *lv, const mr_tensor *r, mr_tensor *o, mr_error *e)
{
    note_op("roi_align", 0);
    return g_cpu.i->roi_align(c, p, m, lv, r, o, e);
}
static mr_status w_rpn(void *c, const mr_proposal_params *p, const mr_tensor *const *lg, const mr_tensor *const *dl,
                       mr_tensor *b, mr_tensor *s, mr_error *e)
{
    note_op("rpn_proposals", 0);
    return g_cpu.i->rpn_proposals(c, p, lg, dl, b, s, e);
}
static mr_status w_box(void *c, const mr_box_post_params *p, const mr_tensor *r, const mr_tensor *lg,
                       const mr_tensor *dl, mr_tensor *b, mr_tensor *s, mr_tensor *l, mr_error *e)
{
    note_op("box_detections", 0);
    return g_cpu.i->box_detections(c, p, r, lg, dl, b, s, l, e);
}
static mr_status w_mask_probs(void *c, const mr_tensor *lg, const mr_tensor *l, mr_tensor *p, mr_error *e)
{
    note_op("mask_probs", 0);
    return g_cpu.i->mask_probs(c, lg, l, p, e);
}
static mr_status w_mask_class_probs(void *c, const mr_tensor *x, const mr_tensor *w, const mr_tensor *b,
                                    const mr_tensor *l, mr_tensor *p, mr_error *e)
{
    note_op("mask_class_probs", 0);
    return g_cpu.i->mask_class_probs(c, x, w, b, l, p, e);
}
static mr_status w_paste(void *c, const mr_mask_paste_params *p, const mr_tensor *pr, const mr_tensor *b, int h, int w,
                         const mr_mask_window *win, uint8_t *m, float *s, mr_error *e)
{
    note_op("mask_paste", 0);
    return g_cpu.i->mask_paste(c, p, pr, b, h, w, win, m, s, e);
}
static mr_status w_preprocess(void *c, const mr_input_config *cfg, const mr_image *img, const mr_input_geometry *g,
                              mr_tensor *in, mr_error *e)
{
    note_op("preprocess", 0);
    return g_cpu.i->preprocess(c, cfg, img, g, in, e);
}
static mr_status w_to_host(void *c, void *d, const void *s, size_t n, mr_error *e)
{
    note_op("copy_to_host", 0);
    return g_cpu.i->copy_to_host(c, d, s, n, e);
}
static mr_status w_to_device(void *c, void *d, const void *s, size_t n, mr_error *e)
{
    note_op("copy_to_device", 0);
    return g_cpu.i->copy_to_device(c, d, s, n, e);
}
static mr_status w_sync(void *c, mr_error *e)
{
    note_op("sync", 0);
    return g_cpu.i->sync(c, e);
}

static mr_backend wrapped(void)
{
    static mr_backend_i t;
    t = *g_cpu.i;
    t.replayable = w_replayable;
    t.conv = w_conv;
    t.group_norm = w_group_norm;
    t.max_pool = w_max_pool;
    t.upsample_nearest = w_upsample;
    t.linear = w_linear;
    t.deconv2x2 = w_deconv;
    t.roi_align = w_roi_align;
    t.rpn_proposals = w_rpn;
    t.box_detections = w_box;
    t.mask_probs = w_mask_probs;
    if (g_cpu.i->mask_class_probs) t.mask_class_probs = w_mask_class_probs;
    t.mask_paste = w_paste;
    t.preprocess = w_preprocess;
    t.copy_to_host = w_to_host;
    t.copy_to_device = w_to_device;
    t.sync = w_sync;
    if (g_counts_on_device) {
        t.counts_on_device = w_counts_on_device;
        t.stage_mark = w_stage_mark;
        t.stage_seconds = w_stage_seconds;
    }
    mr_backend b = {&t, g_cpu.ctx};
    return b;
}

static void expect_same_results(const mr_result *a, const mr_result *b)
{
    assert_int_equal(a->count, b->count);
    for (int i = 0; i < a->count; i++) {
        const mr_detection *x = &a->dets[i], *y = &b->dets[i];
        assert_memory_equal(x->box, y->box, sizeof x->box);
        assert_true(x->score == y->score && x->class_id == y->class_id);
        assert_memory_equal(&x->mask_win, &y->mask_win, sizeof x->mask_win);
        assert_memory_equal(x->mask, y->mask, (size_t)x->mask_win.w * (size_t)x->mask_win.h);
    }
}

static void run_scenes(int counts_on_device)
{
    g_counts_on_device = counts_on_device;
    static mr_config cfg;
    mr_error err = {0};
    if (config_load(&cfg, CONFIG, &err) != MR_OK) fail_msg("%s", err.msg);
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2}, &g_cpu, &err), MR_OK);
    mr_model *plain = NULL, *wrap = NULL;
    if (model_load(&plain, &cfg, WEIGHTS, g_cpu, NULL, &err) != MR_OK) fail_msg("%s", err.msg);
    if (model_load(&wrap, &cfg, WEIGHTS, wrapped(), NULL, &err) != MR_OK) fail_msg("%s", err.msg);
    const char *scenes[] = {"examples/shapes/scene_1.png", "examples/shapes/scene_2.png"};
    for (int k = 0; k < 2; k++) {
        mr_image img = {0};
        if (image_load(scenes[k], cfg.input.max_image_side, &img, &err) != MR_OK) fail_msg("%s", err.msg);
        mr_input_geometry geo;
        assert_int_equal(image_geometry(&cfg.input, img.h, img.w, &geo, &err), MR_OK);
        mr_result ref, got;
        assert_int_equal(model_detect(plain, &img, &ref, NULL, &err), MR_OK);
        g_calls = g_inside_ops = g_marks = 0;
        g_forbidden = NULL;
        assert_int_equal(model_detect(wrap, &img, &got, NULL, &err), MR_OK);
        printf("  %s: %d replayable units, %d ops inside, %d detections, %d marks\n", scenes[k], g_calls,
               g_inside_ops, got.count, g_marks);
        if (g_forbidden) fail_msg("%s was called inside a replayable stage", g_forbidden);
        const char *want[4] = {"forward", "backbone", "fpn", "rpn_head"};
        uint64_t key = (uint64_t)(uint32_t)geo.padded_h << 32 | (uint32_t)geo.padded_w;
        int first = counts_on_device ? 0 : 1;
        assert_int_equal(g_calls, 4 - first);
        for (int i = first; i < 4; i++) {
            assert_string_equal(g_names[i - first], want[i]);
            assert_true(g_keys[i - first] == key);
        }
        if (counts_on_device) assert_int_equal(g_marks, MR_STAGE_MARKS); /* every stage marked, in order */
        assert_true(g_inside_ops > 100); /* 104 convs in the backbone alone */
        assert_true(ref.count > 0);
        expect_same_results(&ref, &got);
        result_free(&ref);
        result_free(&got);
        image_free(&img);
    }
    model_free(plain);
    model_free(wrap);
    g_cpu.i->destroy(g_cpu.ctx);
}

static void test_model_calls_replayable_as_documented(void **state)
{
    (void)state;
    run_scenes(0);
}

static void test_whole_pass_is_one_unit_with_counts_on_device(void **state)
{
    (void)state;
    run_scenes(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_calls_replayable_as_documented),
        cmocka_unit_test(test_whole_pass_is_one_unit_with_counts_on_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
