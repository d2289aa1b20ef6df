/* The CUDA backend's replayable stages (backend.h replayable,
 * cuda/backend_cuda_graph.c): a small stage (3x3 conv + ReLU, max pool,
 * GroupNorm + ReLU in place, 1x1 conv accumulating into its output,
 * nearest upsample) run through
 * `replayable` on new input data each time gives bit for bit what the same
 * ops give issued one by one, on the first run (op by op), the second
 * (captured) and later ones (replayed). That the later runs are replays is
 * shown by handing `replayable` a stage with other weights under the same
 * name and key: the recorded graph runs, not the new ops. A new key is a
 * new graph. A stage that cannot be captured runs op by op. Without a GPU
 * every test is skipped, visibly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#ifdef MR_HAVE_CUDA
#include "backend/backend_registry.h"
#endif

enum { H = 24, W = 36, CIN = 8, CMID = 16 };

typedef struct {
    mr_backend be;
    mr_layer *conv_a, *conv_b, *conv_other, *norm;
    mr_tensor x, t, u, v, up;
    float *v0; /* v's contents before each run (the accumulated residual) */
} stage;

static uint64_t g_rng = 0x67726170u;

static float rnd(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)((double)((g_rng * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0) * 2.0f - 1.0f;
}

static float *randoms(size_t n)
{
    float *x = malloc(sizeof(float) * n);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = rnd();
    return x;
}

static mr_tensor dev(stage *s, int h, int w, int c)
{
    void *d = NULL;
    mr_error err = {0};
    assert_int_equal(s->be.i->buffer_alloc(s->be.ctx, sizeof(float) * (size_t)h * w * c, &d, &err), MR_OK);
    return mr_tensor_make(d, 1, h, w, c);
}

static void put(stage *s, mr_tensor *t, const float *h)
{
    mr_error err = {0};
    assert_int_equal(s->be.i->copy_to_device(s->be.ctx, t->data, h, sizeof(float) * mr_tensor_numel(t), &err), MR_OK);
}

static float *get(stage *s, const mr_tensor *t)
{
    mr_error err = {0};
    float *h = malloc(sizeof(float) * mr_tensor_numel(t));
    assert_non_null(h);
    assert_int_equal(s->be.i->sync(s->be.ctx, &err), MR_OK);
    assert_int_equal(s->be.i->copy_to_host(s->be.ctx, h, t->data, sizeof(float) * mr_tensor_numel(t), &err), MR_OK);
    return h;
}

static mr_layer *conv_layer(stage *s, int cin, int cout, int k, int relu)
{
    mr_conv_params p = {cin, cout, k, k, 1, k / 2, 1, 1, relu, 1, H, W, 0, 0.0f, 0, 0.0f, 0, 0, 0.0f};
    float *w = randoms((size_t)cout * cin * k * k), *b = randoms((size_t)cout);
    for (size_t i = 0; i < (size_t)cout * cin * k * k; i++) w[i] *= 0.3f;
    mr_layer *l = NULL;
    mr_error err = {0};
    if (s->be.i->conv_init(s->be.ctx, "graph.conv", &p, w, b, &l, &err) != MR_OK) fail_msg("%s", err.msg);
    free(w);
    free(b);
    return l;
}

/* The stage's ops; arg: the stage, with conv_b swapped for conv_other when asked. */
static int g_use_other;
static mr_status stage_ops(void *arg, mr_error *err)
{
    stage *s = arg;
    const mr_backend_i *b = s->be.i;
    mr_pool_params pool = {3, 2, 1};
    MR_TRY(b->conv(s->be.ctx, s->conv_a, &s->x, &s->t, 0, err));
    MR_TRY(b->max_pool(s->be.ctx, &pool, &s->t, &s->u, err));
    MR_TRY(b->group_norm(s->be.ctx, s->norm, &s->u, &s->u, 0, err));
    MR_TRY(b->conv(s->be.ctx, g_use_other ? s->conv_other : s->conv_b, &s->u, &s->v, 1, err));
    return b->upsample_nearest(s->be.ctx, &s->v, &s->up, err);
}

static int setup(void **state)
{
    *state = NULL;
#ifdef MR_HAVE_CUDA
    static stage s;
    mr_error err = {0};
    mr_backend_params p = {.precision = MR_PRECISION_FP32};
    if (backend_open("cuda", &p, &s.be, &err) != MR_OK) {
        printf("SKIP test_cuda_graphs: no GPU (%s)\n", err.msg);
        return 0;
    }
    if (!s.be.i->replayable) {
        printf("SKIP test_cuda_graphs: the backend has no replayable\n");
        return 0;
    }
    s.conv_a = conv_layer(&s, CIN, CMID, 3, 1);
    s.conv_b = conv_layer(&s, CMID, CMID, 1, 0);
    s.conv_other = conv_layer(&s, CMID, CMID, 1, 0);
    mr_group_norm_params gp = {CMID, 4, 1e-5f, 1};
    float *gamma = randoms(CMID), *beta = randoms(CMID);
    if (s.be.i->group_norm_init(s.be.ctx, "graph.norm", &gp, gamma, beta, &s.norm, &err) != MR_OK)
        fail_msg("%s", err.msg);
    free(gamma);
    free(beta);
    /* graphs need a planned context (its scratch fixed) */
    mr_backend_plan plan = {H, W, 5, 3, {0}, 100, 50, 0, 50, 10, 3, 28, 1, 256};
    for (int l = 0; l < 5; l++) plan.level_anchors[l] = 3 * (H >> l) * (W >> l) + 3;
    if (s.be.i->plan(s.be.ctx, &plan, &err) != MR_OK) fail_msg("plan: %s", err.msg);
    int ph = (H - 1) / 2 + 1, pw = (W - 1) / 2 + 1;
    s.x = dev(&s, H, W, CIN);
    s.t = dev(&s, H, W, CMID);
    s.u = dev(&s, ph, pw, CMID);
    s.v = dev(&s, ph, pw, CMID);
    s.up = dev(&s, H, W, CMID);
    s.v0 = randoms(mr_tensor_numel(&s.v));
    *state = &s;
#else
    printf("SKIP test_cuda_graphs: no CUDA backend in this build\n");
#endif
    return 0;
}

static int teardown(void **state)
{
    stage *s = *state;
    if (!s) return 0;
    mr_tensor *ts[] = {&s->x, &s->t, &s->u, &s->v, &s->up};
    for (size_t i = 0; i < 5; i++) s->be.i->buffer_free(s->be.ctx, ts[i]->data);
    s->be.i->layer_free(s->be.ctx, s->conv_a);
    s->be.i->layer_free(s->be.ctx, s->conv_b);
    s->be.i->layer_free(s->be.ctx, s->conv_other);
    s->be.i->layer_free(s->be.ctx, s->norm);
    free(s->v0);
    s->be.i->destroy(s->be.ctx);
    return 0;
}

/* One run on input x: op by op (replay = 0) or through replayable (name, key).
 * Returns the upsampled output. */
static float *run(stage *s, const float *x, int replay, const char *name, uint64_t key)
{
    mr_error err = {0};
    put(s, &s->x, x);
    put(s, &s->v, s->v0);
    mr_status st = replay ? s->be.i->replayable(s->be.ctx, name, key, stage_ops, s, &err) : stage_ops(s, &err);
    if (st != MR_OK) fail_msg("stage: %s", err.msg);
    return get(s, &s->up);
}

static void expect_same(const float *a, const float *b, const char *what)
{
    size_t n = (size_t)H * W * CMID;
    if (memcmp(a, b, sizeof(float) * n) != 0) {
        size_t i = 0;
        while (i < n && a[i] == b[i]) i++;
        fail_msg("%s: differs at %zu: %g against %g", what, i, (double)a[i], (double)b[i]);
    }
    printf("  %s: identical\n", what);
}

static void test_replay_matches_op_by_op(void **state)
{
    if (!*state) skip();
    stage *s = *state;
    g_use_other = 0;
    for (int i = 0; i < 5; i++) {
        float *x = randoms((size_t)H * W * CIN);
        float *ref = run(s, x, 0, NULL, 0), *got = run(s, x, 1, "graph.stage", 7);
        char what[64];
        snprintf(what, sizeof what, "run %d (%s)", i + 1, i == 0 ? "op by op" : i == 1 ? "captured" : "replayed");
        expect_same(got, ref, what);
        free(x);
        free(ref);
        free(got);
    }
}

static void test_later_runs_are_replays(void **state)
{
    if (!*state) skip();
    stage *s = *state;
    float *x = randoms((size_t)H * W * CIN);
    g_use_other = 0;
    float *ref_b = run(s, x, 0, NULL, 0);
    g_use_other = 1;
    float *ref_other = run(s, x, 0, NULL, 0);
    /* key 7's graph (from the test above, or made now) was recorded with conv_b */
    g_use_other = 0;
    free(run(s, x, 1, "graph.stage", 7));
    free(run(s, x, 1, "graph.stage", 7));
    g_use_other = 1;
    float *replayed = run(s, x, 1, "graph.stage", 7);
    expect_same(replayed, ref_b, "same name and key, other weights: the recorded graph ran");
    /* a new key starts op by op: the new weights */
    float *fresh = run(s, x, 1, "graph.stage", 8);
    expect_same(fresh, ref_other, "a new key: op by op");
    g_use_other = 0;
    free(x);
    free(ref_b);
    free(ref_other);
    free(replayed);
    free(fresh);
}

/* A stage that reads back to the host cannot be captured (the copy is
 * refused during capture): the capture is dropped, nothing of it ran, the
 * run goes op by op, and so do all later runs of that stage (they follow
 * new weights, unlike a replay). */
static mr_status stage_with_copy(void *arg, mr_error *err)
{
    stage *s = arg;
    float probe[4];
    MR_TRY(stage_ops(s, err));
    return s->be.i->copy_to_host(s->be.ctx, probe, s->up.data, sizeof probe, err);
}

static void test_uncapturable_stage_runs_op_by_op(void **state)
{
    if (!*state) skip();
    stage *s = *state;
    float *x = randoms((size_t)H * W * CIN);
    g_use_other = 1;
    float *ref_other = run(s, x, 0, NULL, 0);
    g_use_other = 0;
    for (int i = 0; i < 4; i++) {
        mr_error err = {0};
        put(s, &s->x, x);
        put(s, &s->v, s->v0);
        g_use_other = i == 3;
        if (s->be.i->replayable(s->be.ctx, "graph.copy", 3, stage_with_copy, s, &err) != MR_OK)
            fail_msg("run %d: %s", i + 1, err.msg);
    }
    g_use_other = 0;
    float *got = get(s, &s->up);
    expect_same(got, ref_other, "a stage with a host copy, 4th run with other weights: op by op");
    free(x);
    free(ref_other);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_matches_op_by_op),
        cmocka_unit_test(test_later_runs_are_replays),
        cmocka_unit_test(test_uncapturable_stage_runs_op_by_op),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
