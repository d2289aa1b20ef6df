/* Every op of the backend interface (backend.h, mr_backend_i), run through
 * the backend table on every backend of this build, after ggml's
 * test-backend-ops: one runner (run_op) takes each (backend, op) pair of
 * g_backends x g_ops and runs every row of the op's case table through the
 * op's case function. A case table is a list of parameter sets, sweeps
 * written out as rows (g_pre_rows); adding an op adds a case function, a
 * table and a row of g_ops, never a loop of its own. Each (backend, op)
 * prints its case and check counts (a case may make several checks: the
 * op against the reference, and against the CPU backend).
 *
 * The dense ops (conv, linear, deconv2x2, max_pool, upsample_nearest) are
 * compared with naive references written here (direct loops over NHWC
 * activations and PyTorch weight layouts, double accumulation) by
 * normalised error ||got - ref|| / ||ref|| against a per-op tolerance. The
 * detection ops have their own parity tests against torchvision
 * (tests/parity/test_ops_torchvision.py); here each runs on an empty and a
 * small non-empty case and is checked for shapes, counts, ranges and NaN.
 *
 * Any NaN fails. Outputs are pre-filled with garbage (ops must not rely on
 * buffer_alloc's zeroing) and followed by guard values that must survive.
 * Inputs come from a small xorshift generator with a fixed seed, printed at
 * the start (MR_TEST_SEED=<n> to try another). A backend or op that is not
 * available prints a SKIP line and is reported by cmocka as skipped. */
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
#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "ops/image_preprocess.h"
#include "ref_ops.h"

#define DEFAULT_SEED 0x6d61736b52434e4eull

/* Tolerances, by normalised error. Max pooling and nearest upsampling copy
 * values, so they must match exactly. */
#define TOL_CONV 1e-5
#define TOL_LINEAR 1e-5
#define TOL_DECONV 1e-5
/* GroupNorm against a double reference: the statistics' float rounding
 * (the GPU's Welford sums) is all that differs. */
#define TOL_GROUP_NORM 1e-5
#define TOL_EXACT 0.0
#define TOL_SIGMOID 1e-6
#define TOL_ROI_CONST 1e-6
/* A GPU backend against the CPU backend on the same inputs (the detection
 * ops share their per-element math, so only float ulps may differ). */
#define TOL_VS_CPU 1e-6

#define GUARD 16
#define GUARD_VALUE -7777.25f

/* ------------------------------------------------------------------ random */

static uint64_t g_seed = DEFAULT_SEED, g_rng;

static void rng_reset(void) { g_rng = g_seed ? g_seed : 1; }

static uint64_t rng_next(void)
{
    /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static float rng_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rng_next() >> 40) / 16777216.0);
}

static void fill_uniform(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform(lo, hi);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

static float *fmalloc(size_t count) { return xmalloc(count * sizeof(float)); }

/* ---------------------------------------------------------------- backends */

typedef struct {
    const char *name;
    /* Fills `why` and returns non-zero when the backend cannot be made. */
    int (*create)(mr_backend *be, char *why, size_t why_len);
    /* The convolutions' tolerance on this backend: 0 for TOL_CONV (fp32);
     * a reduced-precision backend states its own. */
    double conv_tol;
} backend_desc;

/* The CPU backend with each channel block of its layout between
 * convolutions (nChw8c, nChw16c), whatever this CPU would choose: both
 * paths are tested on every machine. */
static int open_cpu(const mr_backend_params *p, mr_backend *be, char *why, size_t why_len)
{
    mr_error err = {0};
    if (backend_open("cpu", p, be, &err) == MR_OK) return 0;
    snprintf(why, why_len, "backend_open cpu failed: %s", err.msg);
    return 1;
}

static int create_cpu_block(mr_backend *be, char *why, size_t why_len, int block)
{
    return open_cpu(&(mr_backend_params){.threads = 2, .cpu_block = block}, be, why, why_len);
}

static int create_cpu(mr_backend *be, char *why, size_t why_len) { return create_cpu_block(be, why, why_len, 0); }

/* The CPU backend at --precision bf16: every conv of the cases computes in
 * bf16 (no case asks for keep_fp32); the other ops are fp32. Skipped, with
 * the backend's reason, on a CPU without AVX512_BF16 or AMX. */
static int create_cpu_bf16(mr_backend *be, char *why, size_t why_len)
{
    return open_cpu(&(mr_backend_params){.threads = 2, .precision = MR_PRECISION_BF16}, be, why, why_len);
}
/* The CPU backend at --precision int8: every conv, linear layer and deconv
 * of the cases computes in int8, its inputs (uniform in [-1, 1]) quantized
 * with the clip range 1 the cases give (conv_params, case_linear,
 * case_deconv2x2). Needs no particular instruction set (oneDNN has int8
 * kernels down to AVX2; without VNNI the 3x3 stride-1 convs stay fp32
 * Winograd). */
static int create_cpu_int8(mr_backend *be, char *why, size_t why_len)
{
    return open_cpu(&(mr_backend_params){.threads = 2, .precision = MR_PRECISION_INT8}, be, why, why_len);
}
static int create_cpu8(mr_backend *be, char *why, size_t why_len) { return create_cpu_block(be, why, why_len, 8); }
static int create_cpu16(mr_backend *be, char *why, size_t why_len) { return create_cpu_block(be, why, why_len, 16); }

/* The CUDA backend, when this build has it (CUDA=1): strict fp32 so the
 * dense ops meet the same tolerances as the CPU, once with the batchnorm
 * folded (cuDNN's fused conv + bias + ReLU) and once not (conv, then the
 * AffineChannel kernel). Without a GPU every CUDA case is skipped, visibly,
 * with the CUDA runtime's reason. */
static int create_cuda_fold(mr_backend *be, char *why, size_t why_len, int fold)
{
#ifdef MR_HAVE_CUDA
    mr_error err = {0};
    mr_backend_params p = {.precision = MR_PRECISION_FP32, .no_fold = !fold};
    if (backend_open("cuda", &p, be, &err) == MR_OK) return 0;
    snprintf(why, why_len, "no GPU (%s)", err.msg);
    return 1;
#else
    (void)be;
    (void)fold;
    snprintf(why, why_len, "no CUDA backend in this build");
    return 1;
#endif
}

static int create_cuda(mr_backend *be, char *why, size_t why_len) { return create_cuda_fold(be, why, why_len, 1); }

static int create_cuda_nofold(mr_backend *be, char *why, size_t why_len)
{
    return create_cuda_fold(be, why, why_len, 0);
}

/* bf16 inputs and weights carry 8 bits of mantissa (relative rounding
 * error up to 2^-9 each), summed in fp32: the normalised error of a conv is
 * a few 1e-3 (measured: up to 1.9e-3 over these cases, AMX); 1e-2 leaves room
 * and still fails a wrong layout, weight or post-op (errors of order 1). */
#define TOL_CONV_BF16 1e-2
/* int8: inputs in 255 steps of the [-1, 1] range, weights in 127 (63 for a
 * u8 input without VNNI) per output channel, s32 sums: a normalised error
 * of under 1e-2 (measured: up to 5.4e-3 over these cases with AMX, 9.9e-3 with
 * oneDNN capped at AVX2); 3e-2 still fails
 * a wrong scale, bias or layout (errors of order 1). */
#define TOL_CONV_INT8 3e-2

static const backend_desc g_backends[] = {
    {"cpu-block8", create_cpu8, 0},
    {"cpu-block16", create_cpu16, 0},
    {"cpu-bf16", create_cpu_bf16, TOL_CONV_BF16},
    {"cpu-int8", create_cpu_int8, TOL_CONV_INT8},
    {"cuda", create_cuda, 0},
    {"cuda-nofold", create_cuda_nofold, 0},
};

/* ------------------------------------------------------- fixture and tally */

/* For a backend other than the CPU, the CPU backend as the reference of the
 * detection ops (its memory is host memory: host arrays are its tensors).
 * Returns 0 for the CPU backend itself. */
static int cpu_reference(const char *backend_name, mr_backend *ref)
{
    char why[MR_ERROR_MSG_LEN + 64];
    return strncmp(backend_name, "cpu", 3) != 0 && create_cpu(ref, why, sizeof why) == 0;
}

typedef struct fixture fixture;

typedef struct {
    int cases, fails, skips;
} tally;

/* One op of the case table: the function that runs one case of it on the
 * fixture's backend, and its cases (n_cases rows of case_size bytes, each a
 * parameter set; sweeps are written out as rows). Adding an op adds a row
 * here and its case table, never a loop. */
typedef struct {
    const char *name;
    void (*run_case)(fixture *f, tally *t, const void *params);
    const void *cases;
    size_t case_size, n_cases;
} op_desc;

struct fixture {
    const backend_desc *bd;
    const op_desc *op;
    mr_backend be;
    int created;
    char why[MR_ERROR_MSG_LEN + 64];
    char test_name[64];
};

/* An op missing from the backend's table is skipped, visibly. */
#define NEED(f, fn)                                                                              \
    do {                                                                                         \
        if (!(f)->be.i->fn) {                                                                    \
            printf("SKIP %s: %s: the backend has no " #fn "\n", (f)->bd->name, (f)->op->name);   \
            skip();                                                                              \
        }                                                                                        \
    } while (0)

static void label_case(const fixture *f, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void label_case(const fixture *f, char *out, size_t len, const char *fmt, ...)
{
    int k = snprintf(out, len, "[%s] %s ", f->bd->name, f->op->name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + k, len - (size_t)k, fmt, ap);
    va_end(ap);
}

/* Counts a case whose op returned s; prints SKIP for MR_ERR_UNSUPPORTED
 * and FAIL for any other error. Returns 1 when the results can be checked. */
static int status_ok(tally *t, const char *label, mr_status s, const mr_error *err)
{
    if (s == MR_OK) return 1;
    t->cases++;
    if (s == MR_ERR_UNSUPPORTED) {
        printf("  %-72s SKIP (%s)\n", label, err->msg);
        t->skips++;
    } else {
        printf("  %-72s FAIL: %s: %s\n", label, mr_status_name(s), err->msg);
        t->fails++;
    }
    return 0;
}

static void report(tally *t, const char *label, int ok, const char *detail)
{
    t->cases++;
    if (!ok) t->fails++;
    printf("  %-72s %s%s%s\n", label, ok ? "OK" : "FAIL", detail[0] ? "  " : "", detail);
}

static void check_close(tally *t, const char *label, const float *got, const float *ref, size_t n, double tol,
                        int guard_ok)
{
    double e = norm_err(got, ref, n);
    char detail[96];
    snprintf(detail, sizeof detail, "err %.2e (tol %.0e)%s", e, tol, guard_ok ? "" : ", output guard overwritten");
    report(t, label, e <= tol && guard_ok, detail);
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* ----------------------------------------------------- device buffer helpers */

static float *dev_alloc(fixture *f, size_t count)
{
    void *p = NULL;
    mr_error err = {0};
    mr_status s = f->be.i->buffer_alloc(f->be.ctx, count * sizeof(float), &p, &err);
    if (s != MR_OK) fail_msg("buffer_alloc(%zu floats): %s", count, err.msg);
    return p;
}

static void dev_put(fixture *f, float *d, const float *h, size_t count)
{
    mr_error err = {0};
    if (count && f->be.i->copy_to_device(f->be.ctx, d, h, count * sizeof(float), &err) != MR_OK)
        fail_msg("copy_to_device: %s", err.msg);
}

static void dev_get(fixture *f, float *h, const float *d, size_t count)
{
    mr_error err = {0};
    if (f->be.i->sync(f->be.ctx, &err) != MR_OK) fail_msg("sync: %s", err.msg);
    if (count && f->be.i->copy_to_host(f->be.ctx, h, d, count * sizeof(float), &err) != MR_OK)
        fail_msg("copy_to_host: %s", err.msg);
}

static float *dev_upload(fixture *f, const float *h, size_t count)
{
    float *d = dev_alloc(f, count);
    dev_put(f, d, h, count);
    return d;
}

/* An output of `count` floats, pre-filled from init (garbage values when
 * init is NULL) and followed by GUARD sentinels. */
static float *dev_output(fixture *f, const float *init, size_t count)
{
    float *h = fmalloc(count + GUARD);
    if (init)
        memcpy(h, init, count * sizeof(float));
    else
        fill_uniform(h, count, -100.0f, 100.0f);
    for (int i = 0; i < GUARD; i++) h[count + (size_t)i] = GUARD_VALUE;
    float *d = dev_upload(f, h, count + GUARD);
    free(h);
    return d;
}

static int guard_intact(fixture *f, const float *d, size_t count)
{
    float g[GUARD];
    dev_get(f, g, d + count, GUARD);
    for (int i = 0; i < GUARD; i++)
        if (g[i] != GUARD_VALUE) return 0;
    return 1;
}

static void dev_free(fixture *f, void *d) { f->be.i->buffer_free(f->be.ctx, d); }

/* -------------------------------------------------------------------- conv */

typedef struct {
    int n, h, w, cin, cout;
    int k, stride, pad, dilation, groups;
    int relu, accumulate;
} conv_case;

/* PyTorch's output size (floor mode). */
static int conv_out(int in, int k, int stride, int pad, int dilation)
{
    return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

static mr_conv_params conv_params(const conv_case *c)
{
    /* largest input unknown; the backend's precision; the inputs' int8
     * clip range (they are uniform in [-1, 1]) */
    mr_conv_params p = {c->cin, c->cout, c->k, c->k, c->stride, c->pad, c->dilation, c->groups, c->relu,
                        0, 0, 0, 0, 1.0f, 1, 0.0f, 0, 0, 0.0f};
    return p;
}

/* Random weights (scaled by 1/sqrt(fan-in)) and bias for p. */
static void conv_weights(const mr_conv_params *p, float **w, float **b)
{
    size_t fan_in = (size_t)(p->cin / p->groups) * (size_t)p->kh * (size_t)p->kw;
    size_t count = (size_t)p->cout * fan_in;
    float s = 1.0f / sqrtf((float)fan_in);
    *w = fmalloc(count);
    *b = fmalloc((size_t)p->cout);
    fill_uniform(*w, count, -s, s);
    fill_uniform(*b, (size_t)p->cout, -0.5f, 0.5f);
}

/* Runs layer (prepared from p, w, b) on a random [n,h,w,cin] input. y is
 * pre-filled with random values: the residual when accumulating, garbage
 * the op must overwrite otherwise. */
static void conv_check(fixture *f, tally *t, mr_layer *layer, const mr_conv_params *p, const float *w,
                       const float *b, int n, int h, int wd, int accumulate)
{
    int oh = conv_out(h, p->kh, p->stride, p->pad, p->dilation);
    int ow = conv_out(wd, p->kw, p->stride, p->pad, p->dilation);
    size_t xs = (size_t)n * h * wd * p->cin, ys = (size_t)n * oh * ow * p->cout;
    float *hx = fmalloc(xs), *hy0 = fmalloc(ys), *hy = fmalloc(ys), *ref = fmalloc(ys);
    fill_uniform(hx, xs, -1.0f, 1.0f);
    fill_uniform(hy0, ys, -1.0f, 1.0f);
    float *dx = dev_upload(f, hx, xs), *dy = dev_output(f, hy0, ys);
    mr_tensor tx = mr_tensor_make(dx, n, h, wd, p->cin), ty = mr_tensor_make(dy, n, oh, ow, p->cout);
    char label[200];
    label_case(f, label, sizeof label, "k%d s%d p%d d%d g%d %s%s N=%d %dx%dx%d->%dx%dx%d", p->kh, p->stride, p->pad,
               p->dilation, p->groups, p->relu ? "relu " : "", accumulate ? "acc " : "", n, h, wd, p->cin, oh, ow,
               p->cout);
    mr_error err = {0};
    mr_status s = f->be.i->conv(f->be.ctx, layer, &tx, &ty, accumulate, &err);
    if (status_ok(t, label, s, &err)) {
        dev_get(f, hy, dy, ys);
        ref_conv(p, n, h, wd, oh, ow, hx, w, b, accumulate, hy0, ref);
        check_close(t, label, hy, ref, ys, f->bd->conv_tol ? f->bd->conv_tol : TOL_CONV, guard_intact(f, dy, ys));
    }
    dev_free(f, dx);
    dev_free(f, dy);
    free(hx);
    free(hy0);
    free(hy);
    free(ref);
}

static const conv_case g_conv_cases[] = {
    /*  n   h   w  cin cout  k  s  p  d  g relu acc */
    {1, 13, 19, 16, 32, 1, 1, 0, 1, 1, 0, 0},  /* 1x1 */
    {3, 13, 19, 64, 16, 1, 2, 0, 1, 1, 0, 0},  /* 1x1 stride 2 (ResNet downsample) */
    {1, 13, 19, 64, 16, 1, 1, 0, 1, 1, 1, 0},
    {1, 7, 5, 3, 8, 3, 1, 1, 1, 1, 1, 0},      /* 3x3 */
    {3, 13, 19, 16, 32, 3, 2, 1, 1, 1, 1, 0},  /* 3x3 stride 2 */
    {1, 7, 5, 16, 32, 3, 2, 1, 1, 1, 0, 0},
    {1, 7, 5, 16, 32, 3, 1, 0, 1, 1, 0, 0},    /* pad 0 */
    {1, 13, 19, 3, 8, 7, 2, 3, 1, 1, 1, 0},    /* 7x7 stride 2 pad 3 (ResNet stem) */
    {3, 7, 5, 16, 32, 7, 1, 3, 1, 1, 0, 0},
    {1, 1, 1, 16, 32, 3, 1, 1, 1, 1, 1, 0},    /* 1x1 spatial */
    {3, 1, 1, 3, 8, 7, 2, 3, 1, 1, 0, 0},
    {1, 13, 19, 16, 32, 3, 1, 2, 2, 1, 1, 0},  /* dilation 2 */
    {3, 13, 19, 16, 16, 3, 2, 2, 2, 1, 0, 0},
    {1, 13, 19, 16, 32, 3, 1, 1, 1, 2, 1, 0},  /* groups 2 */
    {3, 13, 19, 64, 16, 1, 1, 0, 1, 1, 1, 1},  /* residual sum + relu (bottleneck conv3) */
    {1, 13, 19, 16, 32, 3, 1, 1, 1, 1, 0, 1},  /* residual sum, no relu */
    {3, 7, 5, 3, 8, 3, 2, 1, 1, 1, 1, 1},
    {0, 13, 19, 16, 32, 3, 1, 1, 1, 1, 1, 0},  /* N = 0: a no-op */
    {0, 13, 19, 64, 16, 1, 1, 0, 1, 1, 1, 1},
};

static void case_conv(fixture *f, tally *t, const void *params)
{
    NEED(f, conv_init);
    NEED(f, conv);
    const conv_case *c = params;
    mr_conv_params p = conv_params(c);
    float *w, *b;
    conv_weights(&p, &w, &b);
    mr_layer *layer = NULL;
    mr_error err = {0};
    char label[96];
    label_case(f, label, sizeof label, "init k%d s%d %d->%d", c->k, c->stride, c->cin, c->cout);
    if (status_ok(t, label, f->be.i->conv_init(f->be.ctx, "test.conv", &p, w, b, &layer, &err), &err)) {
        conv_check(f, t, layer, &p, w, b, c->n, c->h, c->w, c->accumulate);
        f->be.i->layer_free(f->be.ctx, layer);
    }
    free(w);
    free(b);
}

/* One layer run on a sequence of input shapes: a backend that caches
 * per-shape primitives (or reorders weights on first use) must give the same
 * results when the shape changes, changes back, and after more shapes than
 * a small cache holds. A case is a layer; the sequence is every case's. */
static const conv_case g_conv_shape_layers[] = {
    {0, 0, 0, 16, 32, 3, 1, 1, 1, 1, 1, 0},
    {0, 0, 0, 64, 16, 1, 2, 0, 1, 1, 0, 0},
};

/* n, h, w, accumulate */
static const int g_conv_shape_seq[][4] = {
    {1, 13, 19, 0}, {1, 7, 5, 0}, {1, 13, 19, 0}, {1, 13, 19, 1}, {3, 13, 19, 0}, {1, 7, 5, 1},
    {1, 5, 4, 0},   {1, 6, 5, 0}, {1, 7, 6, 0},   {1, 8, 7, 0},   {1, 9, 8, 0},   {1, 10, 9, 0},
    {1, 11, 10, 0}, {1, 12, 11, 0}, {1, 13, 19, 0}, {1, 7, 5, 1}, {0, 7, 5, 0},   {1, 13, 19, 1},
};

static void case_conv_shapes(fixture *f, tally *t, const void *params)
{
    NEED(f, conv_init);
    NEED(f, conv);
    mr_conv_params p = conv_params(params);
    float *w, *b;
    conv_weights(&p, &w, &b);
    mr_layer *layer = NULL;
    mr_error err = {0};
    char label[96];
    label_case(f, label, sizeof label, "init k%d s%d %d->%d", p.kh, p.stride, p.cin, p.cout);
    if (status_ok(t, label, f->be.i->conv_init(f->be.ctx, "test.conv_shapes", &p, w, b, &layer, &err), &err)) {
        for (size_t i = 0; i < sizeof g_conv_shape_seq / sizeof g_conv_shape_seq[0]; i++) {
            const int *q = g_conv_shape_seq[i];
            conv_check(f, t, layer, &p, w, b, q[0], q[1], q[2], q[3]);
        }
        f->be.i->layer_free(f->be.ctx, layer);
    }
    free(w);
    free(b);
}

/* ------------------------------------------------------------------ linear */

typedef struct {
    int n, h, w, c; /* input [n,h,w,c], in = h*w*c */
    int out, relu;
} linear_case;

static const linear_case g_linear_cases[] = {
    {0, 7, 7, 4, 33, 1},   /* n = 0 */
    {1, 1, 1, 64, 10, 0},  /* n = 1 */
    {1, 7, 7, 4, 33, 1},
    {37, 7, 7, 4, 33, 0},  /* input [n,h,w,c] flattened (the box head's fc6) */
    {37, 7, 7, 4, 33, 1},
    /* in = 240, not 256: Debian's oneDNN 2.6 sgemm reads past its own
     * packing buffer when K is a multiple of 256 (a valgrind error inside
     * libdnnl, not in the engine), which would fail the valgrind run */
    {37, 1, 1, 240, 91, 1},
    {37, 3, 5, 7, 12, 0},
};

static void case_linear(fixture *f, tally *t, const void *params)
{
    NEED(f, linear_init);
    NEED(f, linear);
    const linear_case *c = params;
    int in = c->h * c->w * c->c;
    mr_linear_params p = {in, c->out, c->relu, 0, 1.0f, 1}; /* the inputs' int8 range, as conv_params */
    size_t xs = (size_t)c->n * in, ys = (size_t)c->n * c->out, ws = (size_t)c->out * in;
    float *w = fmalloc(ws), *b = fmalloc((size_t)c->out), *hx = fmalloc(xs), *hy = fmalloc(ys), *ref = fmalloc(ys);
    float s = 1.0f / sqrtf((float)in);
    fill_uniform(w, ws, -s, s);
    fill_uniform(b, (size_t)c->out, -0.5f, 0.5f);
    fill_uniform(hx, xs, -1.0f, 1.0f);
    char label[160];
    label_case(f, label, sizeof label, "%s[%d,%d,%d,%d] x [%d,%d]^T", c->relu ? "relu " : "", c->n, c->h, c->w,
               c->c, c->out, in);
    mr_layer *layer = NULL;
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->linear_init(f->be.ctx, "test.linear", &p, w, b, &layer, &err), &err)) {
        float *dx = dev_upload(f, hx, xs), *dy = dev_output(f, NULL, ys);
        mr_tensor tx = mr_tensor_make(dx, c->n, c->h, c->w, c->c), ty = mr_tensor_make(dy, c->n, 1, 1, c->out);
        if (status_ok(t, label, f->be.i->linear(f->be.ctx, layer, &tx, &ty, &err), &err)) {
            dev_get(f, hy, dy, ys);
            ref_linear(&p, c->n, hx, w, b, ref);
            check_close(t, label, hy, ref, ys, f->bd->conv_tol ? f->bd->conv_tol : TOL_LINEAR, guard_intact(f, dy, ys));
        }
        dev_free(f, dx);
        dev_free(f, dy);
        f->be.i->layer_free(f->be.ctx, layer);
    }
    free(w);
    free(b);
    free(hx);
    free(hy);
    free(ref);
}

/* --------------------------------------------------------------- deconv2x2 */

typedef struct {
    int n, h, w, cin, cout, relu;
} deconv_case;

static const deconv_case g_deconv_cases[] = {
    {0, 7, 5, 16, 8, 1},   /* N = 0 */
    {2, 7, 5, 16, 8, 1},   /* odd sizes */
    {1, 14, 14, 32, 16, 1}, /* the mask head's shape, scaled down */
    {2, 13, 19, 3, 5, 1},
    {2, 1, 1, 8, 4, 0},
    {11, 14, 14, 16, 8, 1}, /* 2156 input pixels: the CPU's 980-row chunks, the last one short */
    {6, 13, 17, 8, 24, 0},
};

static void case_deconv2x2(fixture *f, tally *t, const void *params)
{
    NEED(f, deconv2x2_init);
    NEED(f, deconv2x2);
    const deconv_case *c = params;
    mr_deconv2x2_params p = {c->cin, c->cout, c->relu, 0, 0, 0, 0, 1.0f, 1}; /* int8 range as conv_params */
    size_t ws = (size_t)c->cin * c->cout * 4, xs = (size_t)c->n * c->h * c->w * c->cin;
    size_t ys = (size_t)c->n * 4 * c->h * c->w * c->cout;
    float *w = fmalloc(ws), *b = fmalloc((size_t)c->cout), *hx = fmalloc(xs), *hy = fmalloc(ys), *ref = fmalloc(ys);
    float s = 1.0f / sqrtf((float)c->cin);
    fill_uniform(w, ws, -s, s);
    fill_uniform(b, (size_t)c->cout, -0.5f, 0.5f);
    fill_uniform(hx, xs, -1.0f, 1.0f);
    char label[160];
    label_case(f, label, sizeof label, "%sN=%d %dx%dx%d->%dx%dx%d", c->relu ? "relu " : "", c->n, c->h, c->w,
               c->cin, 2 * c->h, 2 * c->w, c->cout);
    mr_layer *layer = NULL;
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->deconv2x2_init(f->be.ctx, "test.deconv", &p, w, b, &layer, &err), &err)) {
        float *dx = dev_upload(f, hx, xs), *dy = dev_output(f, NULL, ys);
        mr_tensor tx = mr_tensor_make(dx, c->n, c->h, c->w, c->cin);
        mr_tensor ty = mr_tensor_make(dy, c->n, 2 * c->h, 2 * c->w, c->cout);
        if (status_ok(t, label, f->be.i->deconv2x2(f->be.ctx, layer, &tx, &ty, &err), &err)) {
            dev_get(f, hy, dy, ys);
            ref_deconv2x2(&p, c->n, c->h, c->w, hx, w, b, ref);
            check_close(t, label, hy, ref, ys, f->bd->conv_tol ? f->bd->conv_tol : TOL_DECONV, guard_intact(f, dy, ys));
        }
        dev_free(f, dx);
        dev_free(f, dy);
        f->be.i->layer_free(f->be.ctx, layer);
    }
    free(w);
    free(b);
    free(hx);
    free(hy);
    free(ref);
}

/* -------------------------------------------------------------- group_norm */

typedef struct {
    int n, h, w, c, groups;
    int relu, accumulate;
    float offset;  /* inputs uniform in [offset - 1, offset + 1]: a mean far from 0 */
    int in_place;  /* y is x (without accumulate) */
    int from_conv; /* x (and the residual) written by a 1x1 conv first: the CPU backend holds them blocked */
} gn_case;

static const gn_case g_gn_cases[] = {
    /*  n    h    w    c   G relu acc  off  inpl conv */
    {1, 1, 1, 32, 32, 0, 0, 0.0f, 0, 0},     /* one value a group: var 0, y = beta */
    {3, 1, 1, 256, 32, 1, 0, 0.0f, 0, 0},
    {3, 1, 1, 64, 8, 0, 1, 0.0f, 0, 0},
    {1, 7, 7, 32, 32, 0, 0, 0.0f, 0, 0},     /* one channel a group */
    {3, 7, 7, 32, 32, 1, 1, 0.0f, 0, 0},
    {1, 7, 7, 256, 32, 1, 0, 0.0f, 0, 0},    /* detectron2's GN(32, 256) */
    {3, 7, 7, 256, 32, 0, 1, 0.0f, 0, 0},
    {1, 7, 7, 64, 8, 1, 1, 0.0f, 0, 0},
    {3, 7, 7, 64, 8, 0, 0, 0.0f, 0, 0},
    {1, 13, 17, 32, 32, 1, 0, 0.0f, 0, 0},
    {3, 13, 17, 256, 32, 1, 1, 0.0f, 0, 0},  /* a bottleneck's last norm: residual + relu */
    {1, 13, 17, 256, 32, 0, 0, 0.0f, 0, 0},
    {3, 13, 17, 64, 8, 0, 1, 0.0f, 0, 0},
    {1, 13, 17, 64, 8, 1, 0, 0.0f, 0, 0},
    {1, 13, 17, 64, 1, 0, 0, 0.0f, 0, 0},    /* one group: all channels */
    {3, 13, 17, 48, 48, 1, 0, 0.0f, 0, 0},   /* one channel each, 48 not a power of two */
    {3, 7, 7, 80, 10, 1, 1, 0.0f, 0, 0},     /* 10 groups of 8: the CPU's runs of groups, the last one short */
    {1, 7, 7, 200, 2, 0, 1, 0.0f, 0, 0},     /* groups of 100 channels: wider than the CPU's 64 lanes */
    {1, 13, 17, 64, 8, 0, 0, 100.0f, 0, 0},  /* mean 100, std 0.58 */
    {3, 13, 17, 256, 32, 1, 0, 0.0f, 1, 0},  /* in place */
    {1, 7, 7, 64, 8, 0, 0, -3.0f, 1, 0},
    {3, 13, 17, 256, 32, 1, 1, 0.0f, 0, 1},  /* after a conv: blocked input and residual on the CPU */
    {1, 7, 7, 64, 8, 0, 0, 0.0f, 0, 1},
    {1, 13, 17, 64, 8, 1, 0, 0.0f, 1, 1},    /* after a conv, in place */
    {0, 13, 17, 256, 32, 1, 1, 0.0f, 0, 0},  /* N = 0: a no-op */
    {1, 200, 336, 256, 32, 1, 0, 4.0f, 0, 0}, /* res2 at 800x1344: 537,600 values a group, mean 4 */
};

/* A 1x1 C -> C conv of the host values h into a new device tensor
 * [n,hh,w,c] (guard after it); *ref receives its double reference, which
 * replaces h as what the group norm sees. NULL when the conv failed (counted). */
static float *gn_conv_input(fixture *f, tally *t, const char *label, mr_layer *conv, const mr_conv_params *cp,
                            const float *cw, const float *cb, const float *h, int n, int hh, int w, float *ref)
{
    size_t count = (size_t)n * hh * w * cp->cin;
    float *src = dev_upload(f, h, count), *d = dev_output(f, NULL, count);
    mr_tensor ts = mr_tensor_make(src, n, hh, w, cp->cin), td = mr_tensor_make(d, n, hh, w, cp->cout);
    mr_error err = {0};
    mr_status s = f->be.i->conv(f->be.ctx, conv, &ts, &td, 0, &err);
    dev_free(f, src);
    if (!status_ok(t, label, s, &err)) {
        dev_free(f, d);
        return NULL;
    }
    ref_conv(cp, n, hh, w, hh, w, h, cw, cb, 0, NULL, ref);
    return d;
}

/* The case's input and output on the device: uploaded, or (from_conv)
 * written by a 1x1 conv, whose double reference then replaces hx (and hy0)
 * as what the norm sees. Returns 0 when a conv failed (counted). */
static int gn_operands(fixture *f, tally *t, const char *label, const gn_case *c, mr_layer *conv,
                       const mr_conv_params *cp, const float *cw, const float *cb, float *hx, float *hy0, float **dx,
                       float **dy)
{
    size_t xs = (size_t)c->n * c->h * c->w * c->c;
    *dx = *dy = NULL;
    if (!c->from_conv) {
        *dx = c->in_place ? dev_output(f, hx, xs) : dev_upload(f, hx, xs);
        *dy = c->in_place ? *dx : dev_output(f, hy0, xs);
        return 1;
    }
    float *tmp = fmalloc(xs);
    *dx = gn_conv_input(f, t, label, conv, cp, cw, cb, hx, c->n, c->h, c->w, tmp);
    memcpy(hx, tmp, xs * sizeof(float));
    if (*dx && c->accumulate) {
        *dy = gn_conv_input(f, t, label, conv, cp, cw, cb, hy0, c->n, c->h, c->w, tmp);
        memcpy(hy0, tmp, xs * sizeof(float));
    } else if (*dx) {
        *dy = c->in_place ? *dx : dev_output(f, NULL, xs);
    }
    free(tmp);
    return *dx && *dy;
}

static void case_group_norm(fixture *f, tally *t, const void *params)
{
    NEED(f, group_norm_init);
    NEED(f, group_norm);
    const gn_case *c = params;
    mr_group_norm_params p = {c->c, c->groups, 1e-5f, c->relu};
    /* the conv's int8 clip range: its inputs are within |offset| + 1 */
    mr_conv_params cp = {c->c, c->c, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, fabsf(c->offset) + 1.0f, 1, 0.0f, 0, 0, 0.0f};
    size_t xs = (size_t)c->n * c->h * c->w * c->c;
    float *gamma = fmalloc((size_t)c->c), *beta = fmalloc((size_t)c->c);
    float *hx = fmalloc(xs), *hy0 = fmalloc(xs), *hy = fmalloc(xs), *ref = fmalloc(xs), *cw = NULL, *cb = NULL;
    fill_uniform(gamma, (size_t)c->c, 0.5f, 1.5f);
    fill_uniform(beta, (size_t)c->c, -0.5f, 0.5f);
    fill_uniform(hx, xs, c->offset - 1.0f, c->offset + 1.0f);
    fill_uniform(hy0, xs, -1.0f, 1.0f);
    char label[200];
    label_case(f, label, sizeof label, "N=%d %dx%dx%d G%d %s%s%s%s%s", c->n, c->h, c->w, c->c, c->groups,
               c->relu ? "relu " : "", c->accumulate ? "acc " : "", c->in_place ? "in place " : "",
               c->from_conv ? "after conv " : "", c->offset != 0.0f ? "offset mean" : "");
    mr_layer *layer = NULL, *conv = NULL;
    mr_error err = {0};
    int ready = status_ok(t, label, f->be.i->group_norm_init(f->be.ctx, "test.gn", &p, gamma, beta, &layer, &err),
                          &err);
    if (ready && c->from_conv) {
        conv_weights(&cp, &cw, &cb);
        ready = status_ok(t, label, f->be.i->conv_init(f->be.ctx, "test.gn.conv", &cp, cw, cb, &conv, &err), &err);
    }
    float *dx = NULL, *dy = NULL;
    if (ready && gn_operands(f, t, label, c, conv, &cp, cw, cb, hx, hy0, &dx, &dy)) {
        /* after a conv, the conv's own error (bf16) carries over into the normalised map */
        double tol = c->from_conv && f->bd->conv_tol ? f->bd->conv_tol : TOL_GROUP_NORM;
        mr_tensor tx = mr_tensor_make(dx, c->n, c->h, c->w, c->c), ty = mr_tensor_make(dy, c->n, c->h, c->w, c->c);
        if (status_ok(t, label, f->be.i->group_norm(f->be.ctx, layer, &tx, &ty, c->accumulate, &err), &err)) {
            dev_get(f, hy, dy, xs);
            ref_group_norm(&p, c->n, c->h, c->w, hx, gamma, beta, c->accumulate, hy0, ref);
            check_close(t, label, hy, ref, xs, tol, guard_intact(f, dy, xs));
        }
    }
    if (dx) dev_free(f, dx);
    if (dy && dy != dx) dev_free(f, dy);
    if (conv) f->be.i->layer_free(f->be.ctx, conv);
    if (layer) f->be.i->layer_free(f->be.ctx, layer);
    free(cw);
    free(cb);
    free(gamma);
    free(beta);
    free(hx);
    free(hy0);
    free(hy);
    free(ref);
}

/* ---------------------------------------------------------------- max_pool */

typedef struct {
    int n, h, w, c;
    int kernel, stride, pad;
    int negative; /* all inputs < 0: a padded tap taken as 0 would win */
    int nans;     /* every 37th input NaN: it must win its windows, as in PyTorch */
} pool_case;

static const pool_case g_pool_cases[] = {
    {2, 13, 19, 8, 3, 2, 1, 0, 0}, /* ResNet stem */
    {2, 13, 19, 8, 3, 2, 1, 1, 0},
    {1, 11, 14, 64, 3, 2, 1, 0, 0}, /* the stem's 64 channels, 8 at a time */
    {1, 11, 14, 24, 3, 2, 1, 1, 1},
    {1, 9, 6, 5, 3, 2, 1, 0, 1},
    {1, 7, 5, 3, 3, 2, 1, 1, 0},
    {1, 2, 2, 4, 3, 2, 1, 1, 0},
    {1, 1, 1, 4, 3, 2, 1, 1, 0},
    {2, 13, 19, 8, 1, 2, 0, 0, 0}, /* FPN P6 */
    {1, 7, 5, 3, 1, 2, 0, 1, 0},
    {1, 1, 1, 4, 1, 2, 0, 1, 0},
    {0, 13, 19, 8, 3, 2, 1, 0, 0}, /* N = 0 */
};

static void case_max_pool(fixture *f, tally *t, const void *params)
{
    NEED(f, max_pool);
    const pool_case *c = params;
    mr_pool_params p = {c->kernel, c->stride, c->pad};
    int oh = (c->h + 2 * c->pad - c->kernel) / c->stride + 1, ow = (c->w + 2 * c->pad - c->kernel) / c->stride + 1;
    size_t xs = (size_t)c->n * c->h * c->w * c->c, ys = (size_t)c->n * oh * ow * c->c;
    float *hx = fmalloc(xs), *hy = fmalloc(ys), *ref = fmalloc(ys);
    fill_uniform(hx, xs, c->negative ? -2.0f : -1.0f, c->negative ? -1.0f : 1.0f);
    for (size_t k = 0; c->nans && k < xs; k += 37) hx[k] = NAN;
    ref_max_pool(&p, c->n, c->h, c->w, c->c, hx, oh, ow, ref);
    float *dx = dev_upload(f, hx, xs), *dy = dev_output(f, NULL, ys);
    mr_tensor tx = mr_tensor_make(dx, c->n, c->h, c->w, c->c), ty = mr_tensor_make(dy, c->n, oh, ow, c->c);
    char label[160];
    label_case(f, label, sizeof label, "k%d s%d p%d %s%sN=%d %dx%dx%d->%dx%d", c->kernel, c->stride, c->pad,
               c->negative ? "all<0 " : "", c->nans ? "NaNs " : "", c->n, c->h, c->w, c->c, oh, ow);
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->max_pool(f->be.ctx, &p, &tx, &ty, &err), &err)) {
        dev_get(f, hy, dy, ys);
        /* NaN where the reference has NaN, then the rest compared (NaN set to 0 in both) */
        size_t nan_wrong = 0, nan_count = 0;
        for (size_t k = 0; k < ys; k++) {
            nan_count += ref[k] != ref[k];
            nan_wrong += (hy[k] != hy[k]) != (ref[k] != ref[k]);
            if (ref[k] != ref[k]) ref[k] = 0.0f;
            if (hy[k] != hy[k]) hy[k] = 0.0f;
        }
        if (c->nans || nan_wrong) {
            char detail[96];
            snprintf(detail, sizeof detail, "%zu of %zu NaN outputs, %zu misplaced", nan_count, ys, nan_wrong);
            report(t, label, nan_count > 0 && nan_wrong == 0, detail);
        }
        check_close(t, label, hy, ref, ys, TOL_EXACT, guard_intact(f, dy, ys));
    }
    dev_free(f, dx);
    dev_free(f, dy);
    free(hx);
    free(hy);
    free(ref);
}

/* -------------------------------------------------------- upsample_nearest */

typedef struct {
    int n, ih, iw, oh, ow, c;
} upsample_case;

static const upsample_case g_upsample_cases[] = {
    {2, 5, 7, 10, 14, 4},  /* exact 2x (FPN top-down) */
    {2, 13, 19, 26, 38, 8},
    {1, 1, 1, 2, 2, 3},
    {1, 5, 7, 13, 19, 3},  /* non-integer ratio */
    {1, 1, 1, 3, 5, 2},
    {1, 13, 19, 5, 7, 3},  /* downsizing: the same rule */
    {1, 5, 7, 5, 7, 2},    /* identity */
    {0, 5, 7, 10, 14, 4},  /* N = 0 */
};

static void case_upsample_nearest(fixture *f, tally *t, const void *params)
{
    NEED(f, upsample_nearest);
    const upsample_case *c = params;
    size_t xs = (size_t)c->n * c->ih * c->iw * c->c, ys = (size_t)c->n * c->oh * c->ow * c->c;
    float *hx = fmalloc(xs), *hy = fmalloc(ys), *ref = fmalloc(ys);
    fill_uniform(hx, xs, -1.0f, 1.0f);
    ref_upsample_nearest(c->n, c->ih, c->iw, c->oh, c->ow, c->c, hx, ref);
    float *dx = dev_upload(f, hx, xs), *dy = dev_output(f, NULL, ys);
    mr_tensor tx = mr_tensor_make(dx, c->n, c->ih, c->iw, c->c), ty = mr_tensor_make(dy, c->n, c->oh, c->ow, c->c);
    char label[160];
    label_case(f, label, sizeof label, "N=%d %dx%dx%d->%dx%d", c->n, c->ih, c->iw, c->c, c->oh, c->ow);
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->upsample_nearest(f->be.ctx, &tx, &ty, &err), &err)) {
        dev_get(f, hy, dy, ys);
        check_close(t, label, hy, ref, ys, TOL_EXACT, guard_intact(f, dy, ys));
    }
    dev_free(f, dx);
    dev_free(f, dy);
    free(hx);
    free(hy);
    free(ref);
}

/* --------------------------------------------------------------- roi_align */

#define ROI_LEVELS 4 /* P2..P5 */
#define ROI_C 4
#define ROI_IMG 128

/* A non-CPU backend's RoIAlign output hy against the CPU backend's on the
 * same host maps and rois. */
static void compare_roi_align_with_cpu(fixture *f, tally *t, const char *label, const mr_roi_align_params *p,
                                       const mr_level_map *map, float *const *h_levels, const float *rois, int n,
                                       const float *hy)
{
    mr_backend ref;
    if (!cpu_reference(f->bd->name, &ref)) return;
    mr_tensor levels[ROI_LEVELS];
    const mr_tensor *lv[ROI_LEVELS];
    for (int l = 0; l < ROI_LEVELS; l++) {
        int s = ROI_IMG >> (l + 2);
        levels[l] = mr_tensor_make(h_levels[l], 1, s, s, ROI_C);
        lv[l] = &levels[l];
    }
    size_t ys = (size_t)n * p->out_h * p->out_w * ROI_C;
    float *want = fmalloc(ys);
    mr_tensor tr = mr_tensor_make((float *)rois, n, 1, 1, 4), ty = mr_tensor_make(want, n, p->out_h, p->out_w, ROI_C);
    mr_error err = {0};
    char l2[200];
    snprintf(l2, sizeof l2, "%s vs cpu", label);
    if (status_ok(t, l2, ref.i->roi_align(ref.ctx, p, map, lv, &tr, &ty, &err), &err))
        check_close(t, l2, hy, want, ys, TOL_VS_CPU, 1);
    free(want);
    ref.i->destroy(ref.ctx);
}

static const float g_roi_boxes[] = {
    10, 12, 50, 40,         /* inside (P2) */
    0, 0, 128, 128,         /* the whole image (P3) */
    30.5f, 20.25f, 31.5f, 21.25f, /* sub-pixel */
    40, 40, 40, 60,         /* zero width */
    60, 50, 20, 10,         /* x2 < x1, y2 < y1 */
    -300, -300, 500, 500,   /* larger than the image (P5), mostly outside */
    900, 900, 1000, 1000,   /* wholly outside the image: all zero */
};
#define ROI_BOXES ((int)(sizeof g_roi_boxes / sizeof g_roi_boxes[0] / 4))
#define ROI_INSIDE 3  /* the first boxes, whose every sample is in the image */
#define ROI_OUTSIDE 6 /* the box wholly outside */

enum { ROI_NONE, ROI_SOME, ROI_WRONG_OUTPUT };

typedef struct {
    mr_roi_align_params p;
    int constant; /* 1: every map 0.75, so every in-image sample is 0.75; 0: random maps */
    int rois;     /* ROI_NONE, ROI_SOME (all boxes on random maps, the inside ones on constant maps), or
                     ROI_WRONG_OUTPUT: an output of the wrong C, which must be refused */
} roi_case;

/* torchvision and Detectron's 7x7, sampling 2; detectron2's 14x14, aligned, adaptive sampling. */
#define ROI_TV {7, 7, 2, 0, 1.0f}
#define ROI_D2 {14, 14, 0, 1, 1.0f}
static const roi_case g_roi_cases[] = {
    {ROI_TV, 0, ROI_NONE}, {ROI_TV, 0, ROI_SOME}, {ROI_D2, 0, ROI_NONE}, {ROI_D2, 0, ROI_SOME},
    {ROI_TV, 1, ROI_NONE}, {ROI_TV, 1, ROI_SOME}, {ROI_D2, 1, ROI_NONE}, {ROI_D2, 1, ROI_SOME},
    {ROI_TV, 0, ROI_WRONG_OUTPUT},
};

static void case_roi_align(fixture *f, tally *t, const void *params)
{
    NEED(f, roi_align);
    const roi_case *c = params;
    const mr_roi_align_params *p = &c->p;
    const mr_level_map map = {2, 5, 224, 4, 1e-6f, 0, 0};

    float *d_levels[ROI_LEVELS], *h_levels[ROI_LEVELS];
    mr_tensor levels[ROI_LEVELS];
    const mr_tensor *lv[ROI_LEVELS];
    for (int l = 0; l < ROI_LEVELS; l++) {
        int s = ROI_IMG >> (l + 2);
        size_t count = (size_t)s * s * ROI_C;
        h_levels[l] = fmalloc(count);
        if (c->constant)
            for (size_t k = 0; k < count; k++) h_levels[l][k] = 0.75f;
        else
            fill_uniform(h_levels[l], count, -1.0f, 1.0f);
        d_levels[l] = dev_upload(f, h_levels[l], count);
        levels[l] = mr_tensor_make(d_levels[l], 1, s, s, ROI_C);
        lv[l] = &levels[l];
    }
    float *d_rois = dev_upload(f, g_roi_boxes, 4 * (size_t)ROI_BOXES);
    char label[160];
    mr_error err = {0};

    if (c->rois == ROI_WRONG_OUTPUT) {
        float *dy = dev_alloc(f, (size_t)ROI_BOXES * p->out_h * p->out_w * (ROI_C + 1));
        mr_tensor tr = mr_tensor_make(d_rois, ROI_BOXES, 1, 1, 4);
        mr_tensor ty = mr_tensor_make(dy, ROI_BOXES, p->out_h, p->out_w, ROI_C + 1);
        mr_status s = f->be.i->roi_align(f->be.ctx, p, &map, lv, &tr, &ty, &err);
        label_case(f, label, sizeof label, "output with the wrong C -> %s", mr_status_name(s));
        report(t, label, s == MR_ERR_SHAPE, s == MR_ERR_SHAPE ? err.msg : "expected a shape error");
        dev_free(f, dy);
    } else {
        int n = c->rois == ROI_NONE ? 0 : c->constant ? ROI_INSIDE : ROI_BOXES;
        size_t per = (size_t)p->out_h * p->out_w * ROI_C, ys = (size_t)n * per;
        float *dy = dev_output(f, NULL, ys), *hy = fmalloc(ys);
        mr_tensor tr = mr_tensor_make(d_rois, n, 1, 1, 4), ty = mr_tensor_make(dy, n, p->out_h, p->out_w, ROI_C);
        label_case(f, label, sizeof label, "%dx%d sr%d aligned%d %s maps, %d rois", p->out_h, p->out_w,
                   p->sampling_ratio, p->aligned, c->constant ? "constant" : "random", n);
        if (status_ok(t, label, f->be.i->roi_align(f->be.ctx, p, &map, lv, &tr, &ty, &err), &err)) {
            dev_get(f, hy, dy, ys);
            int shape_ok = ty.n == n && ty.h == p->out_h && ty.w == p->out_w && ty.c == ROI_C;
            if (c->constant) {
                float *ref = fmalloc(ys);
                for (size_t k = 0; k < ys; k++) ref[k] = 0.75f;
                check_close(t, label, hy, ref, ys, TOL_ROI_CONST, shape_ok && guard_intact(f, dy, ys));
                free(ref);
            } else {
                compare_roi_align_with_cpu(f, t, label, p, &map, h_levels, g_roi_boxes, n, hy);
                int zero_outside = 1;
                if (n > ROI_OUTSIDE)
                    for (size_t k = 0; k < per; k++) zero_outside &= hy[(size_t)ROI_OUTSIDE * per + k] == 0.0f;
                char detail[96];
                snprintf(detail, sizeof detail, "%s%s%s", all_finite(hy, ys) ? "finite" : "NaN/inf in output",
                         zero_outside ? "" : ", roi outside the image not zero",
                         guard_intact(f, dy, ys) ? "" : ", output guard overwritten");
                report(t, label, shape_ok && all_finite(hy, ys) && zero_outside && guard_intact(f, dy, ys), detail);
            }
        }
        dev_free(f, dy);
        free(hy);
    }

    dev_free(f, d_rois);
    for (int l = 0; l < ROI_LEVELS; l++) {
        dev_free(f, d_levels[l]);
        free(h_levels[l]);
    }
}

/* ----------------------------------------------------------- rpn_proposals */

/* Checks n boxes [n,4] and scores [n] (descending, in [lo, 1]) in the image. */
static int boxes_scores_ok(const float *boxes, const float *scores, int n, float img_h, float img_w, float lo)
{
    for (int i = 0; i < n; i++) {
        const float *b = boxes + 4 * (size_t)i;
        if (!all_finite(b, 4) || !isfinite(scores[i])) return 0;
        if (!(b[0] >= 0 && b[0] <= b[2] && b[2] <= img_w && b[1] >= 0 && b[1] <= b[3] && b[3] <= img_h)) return 0;
        if (!(scores[i] >= lo && scores[i] <= 1.0f)) return 0;
        if (i > 0 && scores[i] > scores[i - 1]) return 0;
    }
    return 1;
}

#define RPN_LEVELS 2
#define RPN_A 3
#define RPN_CAP 200

/* grid (per level), score threshold, pre-NMS top-N per level, expect
 * proposals. The NMS works on 64-box words: the last case's 300 boxes
 * per level span five, so the GPU's multi-word path runs too. */
typedef struct {
    int grid[RPN_LEVELS];
    float score_thresh;
    int pre_nms_top_n;
    int expect_some;
    const char *what;
} rpn_case;

static const rpn_case g_rpn_cases[] = {
    {{8, 4}, 0.0f, 50, 1, "8x8 + 4x4 grids"},
    {{8, 4}, 1.01f, 50, 0, "every score under the threshold"},
    {{0, 0}, 0.0f, 50, 0, "empty grids"},
    {{16, 12}, 0.0f, 300, 1, "16x16 + 12x12 grids, 300 per level"},
};

static void case_rpn_proposals(fixture *f, tally *t, const void *params)
{
    NEED(f, rpn_proposals);
    const rpn_case *c = params;
    static const float ratios[3] = {0.5f, 1.0f, 2.0f};
    float cell[RPN_LEVELS][RPN_A * 4];
    mr_proposal_params p;
    memset(&p, 0, sizeof p);
    p.num_levels = RPN_LEVELS;
    p.num_anchors = RPN_A;
    for (int l = 0; l < RPN_LEVELS; l++) {
        float size = (float)(32 << l);
        assert_int_equal(anchors_cell(&size, 1, ratios, 3, 1, cell[l]), RPN_A);
        p.cell_anchors[l] = cell[l];
        p.stride_h[l] = p.stride_w[l] = (float)(8 << l);
    }
    p.offset = 0.0f;
    p.post_nms_top_n = RPN_CAP;
    p.post_nms_per_level = 0;
    p.nms_thresh = 0.7;
    p.min_size = 1e-3f;
    p.coder = (mr_box_coder){{1, 1, 1, 1}, 4.135166556742356f, 0, 0};
    p.img_h = p.img_w = 64.0f;
    float *dlog[RPN_LEVELS], *ddel[RPN_LEVELS], *hlog[RPN_LEVELS], *hdel[RPN_LEVELS];
    mr_tensor tlog[RPN_LEVELS], tdel[RPN_LEVELS];
    const mr_tensor *plog[RPN_LEVELS], *pdel[RPN_LEVELS];
    for (int l = 0; l < RPN_LEVELS; l++) {
        int g = c->grid[l];
        size_t cnt = (size_t)g * g * RPN_A;
        p.grid_h[l] = p.grid_w[l] = g;
        float *hl = fmalloc(cnt), *hd = fmalloc(4 * cnt);
        fill_uniform(hl, cnt, -4.0f, 4.0f);
        fill_uniform(hd, 4 * cnt, -0.5f, 0.5f);
        dlog[l] = dev_upload(f, hl, cnt);
        ddel[l] = dev_upload(f, hd, 4 * cnt);
        tlog[l] = mr_tensor_make(dlog[l], 1, g, g, RPN_A);
        tdel[l] = mr_tensor_make(ddel[l], 1, g, g, 4 * RPN_A);
        plog[l] = &tlog[l];
        pdel[l] = &tdel[l];
        hlog[l] = hl;
        hdel[l] = hd;
    }
    p.score_thresh = c->score_thresh;
    p.pre_nms_top_n = c->pre_nms_top_n;
    float *db = dev_output(f, NULL, 4 * RPN_CAP), *ds = dev_output(f, NULL, RPN_CAP);
    mr_tensor tb = mr_tensor_make(db, RPN_CAP, 1, 1, 4), ts = mr_tensor_make(ds, RPN_CAP, 1, 1, 1);
    char label[160];
    label_case(f, label, sizeof label, "%s", c->what);
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->rpn_proposals(f->be.ctx, &p, plog, pdel, &tb, &ts, &err), &err)) {
        float hb[4 * RPN_CAP], hs[RPN_CAP];
        int n = tb.n;
        int count_ok = n == ts.n && n >= 0 && n <= RPN_CAP && (c->expect_some ? n > 0 : n == 0);
        if (count_ok) {
            dev_get(f, hb, db, 4 * (size_t)n);
            dev_get(f, hs, ds, (size_t)n);
        }
        int values_ok = count_ok && boxes_scores_ok(hb, hs, n, p.img_h, p.img_w, p.score_thresh);
        int guards = guard_intact(f, db, 4 * RPN_CAP) && guard_intact(f, ds, RPN_CAP);
        char detail[128];
        snprintf(detail, sizeof detail, "%d proposals (boxes n %d, scores n %d)%s%s", n, tb.n, ts.n,
                 count_ok && !values_ok ? ", bad box/score/order" : "", guards ? "" : ", output guard overwritten");
        report(t, label, count_ok && values_ok && guards, detail);
        mr_backend ref;
        if (count_ok && cpu_reference(f->bd->name, &ref)) {
            /* the same inputs through the CPU backend: same count, same rows */
            mr_tensor rl[RPN_LEVELS], rd[RPN_LEVELS];
            const mr_tensor *prl[RPN_LEVELS], *prd[RPN_LEVELS];
            for (int l = 0; l < RPN_LEVELS; l++) {
                rl[l] = tlog[l];
                rd[l] = tdel[l];
                rl[l].data = hlog[l];
                rd[l].data = hdel[l];
                prl[l] = &rl[l];
                prd[l] = &rd[l];
            }
            float wb[4 * RPN_CAP], ws[RPN_CAP];
            mr_tensor rb = mr_tensor_make(wb, RPN_CAP, 1, 1, 4), rs = mr_tensor_make(ws, RPN_CAP, 1, 1, 1);
            char l2[200];
            snprintf(l2, sizeof l2, "%s vs cpu", label);
            if (status_ok(t, l2, ref.i->rpn_proposals(ref.ctx, &p, prl, prd, &rb, &rs, &err), &err)) {
                if (rb.n != n) {
                    snprintf(detail, sizeof detail, "%d proposals, the CPU %d", n, rb.n);
                    report(t, l2, 0, detail);
                } else {
                    check_close(t, l2, hb, wb, 4 * (size_t)n, TOL_VS_CPU, 1);
                    check_close(t, l2, hs, ws, (size_t)n, TOL_VS_CPU, 1);
                }
            }
            ref.i->destroy(ref.ctx);
        }
    }
    dev_free(f, db);
    dev_free(f, ds);
    for (int l = 0; l < RPN_LEVELS; l++) {
        dev_free(f, dlog[l]);
        dev_free(f, ddel[l]);
        free(hlog[l]);
        free(hdel[l]);
    }
}

/* ---------------------------------------------------------- box_detections */

#define BOX_K 5
#define BOX_CAP 100

typedef struct {
    int n;
    float score_thresh;
    int expect_some;
    const char *what;
    int agnostic, max_dets;
    int class_agnostic; /* deltas [n,4] for every class; checked against the class-specific
                           path given those 4 deltas copied to every class */
} box_case;

static const box_case g_box_cases[] = {
    {24, 0.05f, 1, "24 rois", 0, BOX_CAP, 0},
    {0, 0.05f, 0, "0 rois", 0, BOX_CAP, 0},
    {24, 1.0f, 0, "every score under the threshold", 0, BOX_CAP, 0},
    {300, 0.05f, 1, "300 rois (NMS groups over 64 boxes)", 0, BOX_CAP, 0},
    {24, 0.05f, 1, "24 rois, agnostic NMS", 1, BOX_CAP, 0},
    {0, 0.05f, 0, "0 rois, agnostic NMS", 1, BOX_CAP, 0},
    {300, 0.05f, 1, "300 rois, agnostic NMS (survivors over 64)", 1, BOX_CAP, 0},
    {300, 0.05f, 1, "300 rois, agnostic NMS cut at 10 detections", 1, 10, 0},
    {24, 0.05f, 1, "24 rois, class-agnostic regression", 0, BOX_CAP, 1},
    {300, 0.05f, 1, "300 rois, class-agnostic regression", 0, BOX_CAP, 1},
};

static void case_box_detections(fixture *f, tally *t, const void *params)
{
    NEED(f, box_detections);
    const box_case *c = params;
    mr_box_post_params p;
    memset(&p, 0, sizeof p);
    p.num_classes = BOX_K;
    p.coder = (mr_box_coder){{10, 10, 5, 5}, 4.135166556742356f, 0, 0};
    p.img_h = p.img_w = 64.0f;
    p.nms_thresh = 0.5;
    p.min_size = 1e-2f;
    p.max_dets = BOX_CAP;
    p.keep_ties = 0;
    p.out_capacity = BOX_CAP;
    int n = c->n;
    p.class_agnostic = c->class_agnostic;
    const int cols = box_post_delta_cols(BOX_K, c->class_agnostic);
    float *hr = fmalloc(4 * (size_t)n), *hl = fmalloc((size_t)n * BOX_K), *hd = fmalloc((size_t)n * 4 * BOX_K);
    for (int r = 0; r < n; r++) {
        float x = rng_uniform(0, 50), y = rng_uniform(0, 50);
        hr[4 * r + 0] = x;
        hr[4 * r + 1] = y;
        hr[4 * r + 2] = x + rng_uniform(2, 30);
        hr[4 * r + 3] = y + rng_uniform(2, 30);
    }
    fill_uniform(hl, (size_t)n * BOX_K, -3.0f, 3.0f);
    fill_uniform(hd, (size_t)n * (size_t)cols, -1.0f, 1.0f);
    float *dr = dev_upload(f, hr, 4 * (size_t)n), *dl = dev_upload(f, hl, (size_t)n * BOX_K);
    float *dd = dev_upload(f, hd, (size_t)n * (size_t)cols);
    float *db = dev_output(f, NULL, 4 * BOX_CAP), *ds = dev_output(f, NULL, BOX_CAP);
    float *dlab = dev_output(f, NULL, BOX_CAP);
    mr_tensor tr = mr_tensor_make(dr, n, 1, 1, 4), tl = mr_tensor_make(dl, n, 1, 1, BOX_K);
    mr_tensor td = mr_tensor_make(dd, n, 1, 1, cols);
    mr_tensor tb = mr_tensor_make(db, BOX_CAP, 1, 1, 4), ts = mr_tensor_make(ds, BOX_CAP, 1, 1, 1);
    mr_tensor tlab = mr_tensor_make(dlab, BOX_CAP, 1, 1, 1);
    p.score_thresh = c->score_thresh;
    p.agnostic_nms = c->agnostic;
    p.agnostic_nms_thresh = 0.3;
    p.max_dets = p.out_capacity = c->max_dets;
    char label[160];
    label_case(f, label, sizeof label, "%s, %d classes", c->what, BOX_K);
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->box_detections(f->be.ctx, &p, &tr, &tl, &td, &tb, &ts, &tlab, &err), &err)) {
        int d = tb.n;
        int count_ok = d == ts.n && d == tlab.n && d >= 0 && d <= p.max_dets &&
                       (c->expect_some ? d > 0 : d == 0);
        float hb[4 * BOX_CAP], hs[BOX_CAP], hlab[BOX_CAP];
        int values_ok = count_ok;
        if (count_ok) {
            dev_get(f, hb, db, 4 * (size_t)d);
            dev_get(f, hs, ds, (size_t)d);
            dev_get(f, hlab, dlab, (size_t)d);
            values_ok = boxes_scores_ok(hb, hs, d, p.img_h, p.img_w, p.score_thresh);
            for (int i = 0; i < d; i++)
                values_ok &= hs[i] > p.score_thresh && hlab[i] >= 1.0f && hlab[i] <= (float)(BOX_K - 1) &&
                             hlab[i] == floorf(hlab[i]);
        }
        int guards = guard_intact(f, db, 4 * BOX_CAP) && guard_intact(f, ds, BOX_CAP) &&
                     guard_intact(f, dlab, BOX_CAP);
        char detail[128];
        snprintf(detail, sizeof detail, "%d detections (n %d/%d/%d)%s%s", d, tb.n, ts.n, tlab.n,
                 count_ok && !values_ok ? ", bad box/score/label/order" : "",
                 guards ? "" : ", output guard overwritten");
        report(t, label, count_ok && values_ok && guards, detail);
        mr_backend ref;
        if (count_ok && cpu_reference(f->bd->name, &ref)) {
            /* the same inputs through the CPU backend: same count, same rows */
            float wb[4 * BOX_CAP], ws[BOX_CAP], wl[BOX_CAP];
            mr_tensor rr = mr_tensor_make(hr, n, 1, 1, 4), rl = mr_tensor_make(hl, n, 1, 1, BOX_K);
            mr_tensor rd = mr_tensor_make(hd, n, 1, 1, cols), rb = mr_tensor_make(wb, BOX_CAP, 1, 1, 4);
            mr_tensor rs = mr_tensor_make(ws, BOX_CAP, 1, 1, 1), rlab = mr_tensor_make(wl, BOX_CAP, 1, 1, 1);
            char l2[200];
            snprintf(l2, sizeof l2, "%s vs cpu", label);
            if (status_ok(t, l2, ref.i->box_detections(ref.ctx, &p, &rr, &rl, &rd, &rb, &rs, &rlab, &err), &err)) {
                if (rb.n != d) {
                    snprintf(detail, sizeof detail, "%d detections, the CPU %d", d, rb.n);
                    report(t, l2, 0, detail);
                } else {
                    check_close(t, l2, hb, wb, 4 * (size_t)d, TOL_VS_CPU, 1);
                    check_close(t, l2, hs, ws, (size_t)d, TOL_VS_CPU, 1);
                    check_close(t, l2, hlab, wl, (size_t)d, TOL_EXACT, 1);
                }
            }
            ref.i->destroy(ref.ctx);
        }
        if (count_ok && c->class_agnostic) {
            /* one regression for every class = the class-specific path, on the same
             * backend, with those 4 deltas in every class's columns (detectron2 and
             * mmdetection expand the agnostic box to every class alike) */
            float *wide = fmalloc((size_t)n * 4 * BOX_K), wb[4 * BOX_CAP], ws[BOX_CAP], wl[BOX_CAP];
            for (int r = 0; r < n; r++)
                for (int k = 0; k < BOX_K; k++) memcpy(wide + ((size_t)r * BOX_K + k) * 4, hd + 4 * (size_t)r, 16);
            mr_box_post_params q = p;
            q.class_agnostic = 0;
            float *dw = dev_upload(f, wide, (size_t)n * 4 * BOX_K);
            mr_tensor tw = mr_tensor_make(dw, n, 1, 1, 4 * BOX_K), ob = tb, os = ts, ol = tlab;
            char l2[200];
            snprintf(l2, sizeof l2, "%s vs the class-specific path", label);
            if (status_ok(t, l2, f->be.i->box_detections(f->be.ctx, &q, &tr, &tl, &tw, &ob, &os, &ol, &err), &err)) {
                if (ob.n != d) {
                    snprintf(detail, sizeof detail, "%d detections, class-specific %d", d, ob.n);
                    report(t, l2, 0, detail);
                } else {
                    dev_get(f, wb, db, 4 * (size_t)d);
                    dev_get(f, ws, ds, (size_t)d);
                    dev_get(f, wl, dlab, (size_t)d);
                    check_close(t, l2, hb, wb, 4 * (size_t)d, TOL_EXACT, 1);
                    check_close(t, l2, hs, ws, (size_t)d, TOL_EXACT, 1);
                    check_close(t, l2, hlab, wl, (size_t)d, TOL_EXACT, 1);
                }
            }
            dev_free(f, dw);
            free(wide);
        }
    }
    dev_free(f, dr);
    dev_free(f, dl);
    dev_free(f, dd);
    dev_free(f, db);
    dev_free(f, ds);
    dev_free(f, dlab);
    free(hr);
    free(hl);
    free(hd);
}

/* -------------------------------------------------------------- mask_probs */

static void case_mask_probs(fixture *f, tally *t, const void *params)
{
    NEED(f, mask_probs);
    /* detections; negative: a one-channel (class-agnostic) predictor, whose one
     * channel is every label's mask */
    const int d = abs(*(const int *)params), K = *(const int *)params < 0 ? 1 : 4;
    enum { M = 5 };
    static const float labels[3] = {1, 3, 0};
    size_t ls = (size_t)d * M * M * K, ps = (size_t)d * M * M;
    float *hl = fmalloc(ls), *hp = fmalloc(ps), *ref = fmalloc(ps);
    fill_uniform(hl, ls, -6.0f, 6.0f);
    for (int i = 0; i < d; i++)
        for (int k = 0; k < M * M; k++)
            ref[(size_t)i * M * M + k] = (float)(1.0 / (1.0 + exp(-(double)hl[((size_t)i * M * M + k) * K +
                                                                              (size_t)(K == 1 ? 0 : labels[i])])));
    float *dl = dev_upload(f, hl, ls), *dlab = dev_upload(f, labels, (size_t)d), *dp = dev_output(f, NULL, ps);
    mr_tensor tl = mr_tensor_make(dl, d, M, M, K), tlab = mr_tensor_make(dlab, d, 1, 1, 1);
    mr_tensor tp = mr_tensor_make(dp, d, M, M, 1);
    char label[160];
    label_case(f, label, sizeof label, "%d detections, %dx%d masks, %d classes", d, M, M, K);
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->mask_probs(f->be.ctx, &tl, &tlab, &tp, &err), &err)) {
        dev_get(f, hp, dp, ps);
        check_close(t, label, hp, ref, ps, TOL_SIGMOID, guard_intact(f, dp, ps));
    }
    dev_free(f, dl);
    dev_free(f, dlab);
    dev_free(f, dp);
    free(hl);
    free(hp);
    free(ref);
}

/* -------------------------------------------------------- mask_class_probs */

/* Against a double-precision 1x1 convolution of every class, then the
 * labelled class's sigmoid; C = 20 is not a multiple of a vector. A label
 * outside 0..K-1 (or NaN) must be refused. */
static void case_mask_class_probs(fixture *f, tally *t, const void *params)
{
    NEED(f, mask_class_probs);
    /* detections; negative: one (class-agnostic) channel for every label */
    const int d = abs(*(const int *)params), K = *(const int *)params < 0 ? 1 : 4;
    enum { M = 5, C = 20, KMAX = 4 };
    static const float labels[3] = {1, 3, 0};
    float *hw = fmalloc((size_t)K * C), hb[KMAX];
    fill_uniform(hw, (size_t)K * C, -0.5f, 0.5f);
    fill_uniform(hb, K, -1.0f, 1.0f);
    float *dw = dev_upload(f, hw, (size_t)K * C), *db = dev_upload(f, hb, K);
    mr_tensor tw = mr_tensor_make(dw, K, 1, 1, C), tb = mr_tensor_make(db, K, 1, 1, 1);
    size_t xs = (size_t)d * M * M * C, ps = (size_t)d * M * M;
    float *hx = fmalloc(xs), *hp = fmalloc(ps), *ref = fmalloc(ps);
    fill_uniform(hx, xs, -2.0f, 2.0f);
    for (int i = 0; i < d; i++)
        for (int k = 0; k < M * M; k++) {
            double logits[KMAX];
            for (int cls = 0; cls < K; cls++) {
                logits[cls] = hb[cls];
                for (int c = 0; c < C; c++)
                    logits[cls] += (double)hx[((size_t)i * M * M + k) * C + c] * hw[(size_t)cls * C + c];
            }
            ref[(size_t)i * M * M + k] = (float)(1.0 / (1.0 + exp(-logits[K == 1 ? 0 : (int)labels[i]])));
        }
    float *dx = dev_upload(f, hx, xs), *dlab = dev_upload(f, labels, (size_t)d), *dp = dev_output(f, NULL, ps);
    mr_tensor tx = mr_tensor_make(dx, d, M, M, C), tlab = mr_tensor_make(dlab, d, 1, 1, 1);
    mr_tensor tp = mr_tensor_make(dp, d, M, M, 1);
    char label[160];
    label_case(f, label, sizeof label, "%d detections, %dx%d, %d channels, %d classes", d, M, M, C, K);
    mr_error err = {0};
    if (status_ok(t, label, f->be.i->mask_class_probs(f->be.ctx, &tx, &tw, &tb, &tlab, &tp, &err), &err)) {
        dev_get(f, hp, dp, ps);
        check_close(t, label, hp, ref, ps, TOL_SIGMOID, guard_intact(f, dp, ps));
    }
    if (d) {
        /* a label past the classes can only be told with one channel per class */
        const float bad[2] = {NAN, (float)K};
        for (int b = 0; b < (K == 1 ? 1 : 2); b++) {
            float bl[3] = {labels[0], labels[1], bad[b]};
            float *dbad = dev_upload(f, bl, 3);
            mr_tensor tbad = mr_tensor_make(dbad, d, 1, 1, 1);
            label_case(f, label, sizeof label, "label %g refused", (double)bad[b]);
            mr_status s = f->be.i->mask_class_probs(f->be.ctx, &tx, &tw, &tb, &tbad, &tp, &err);
            report(t, label, s == MR_ERR_RANGE, s == MR_ERR_RANGE ? err.msg : "expected a range error");
            dev_free(f, dbad);
        }
    }
    dev_free(f, dx);
    dev_free(f, dlab);
    dev_free(f, dp);
    free(hx);
    free(hp);
    free(ref);
    dev_free(f, dw);
    dev_free(f, db);
    free(hw);
}

/* -------------------------------------------------------------- mask_paste */

#define PASTE_M 5
#define PASTE_H 30
#define PASTE_W 40

#define PASTE_GUARD 64 /* bytes / floats past the packed windows that must stay untouched */

/* The backend's packed windows (backend.h) spread over whole planes, with
 * a check that nothing was written past them. */
static int unpack_windows(const mr_mask_window *win, int d, const uint8_t *pk, const float *psoft, uint8_t *bin,
                          float *soft)
{
    size_t at = 0, plane = (size_t)PASTE_H * PASTE_W;
    for (int i = 0; i < d; i++) {
        mask_window_to_plane_u8(win[i], pk + at, PASTE_H, PASTE_W, bin + (size_t)i * plane);
        if (soft) mask_window_to_plane_f32(win[i], psoft + at, PASTE_H, PASTE_W, soft + (size_t)i * plane);
        at += mask_window_pixels(win[i]);
    }
    int intact = 1;
    for (size_t k = at; k < at + PASTE_GUARD; k++) intact &= pk[k] == 0xAB && (!psoft || isnan(psoft[k]));
    return intact;
}

static const float g_paste_boxes[] = {
    5, 4, 25, 20,       /* inside */
    -10, -5, 15, 12,    /* across the top-left corner */
    30, 20, 45, 35,     /* across the bottom-right corner */
    20, 10, 20, 10,     /* a point */
    100, 100, 120, 120, /* wholly outside: nothing pasted */
};
/* Cases: no detections, and one per box. */
static const int g_paste_counts[] = {0, (int)(sizeof g_paste_boxes / sizeof g_paste_boxes[0] / 4)};

static void case_mask_paste(fixture *f, tally *t, const void *params)
{
    NEED(f, mask_paste);
    const int d = *(const int *)params; /* detections */
    const float *boxes = g_paste_boxes;
    const int outside = 4;
    const mr_mask_paste_params p = {PASTE_M, 1, 0.5f, MR_MASK_GT, MR_PASTE_TORCHVISION};
    const size_t plane = (size_t)PASTE_H * PASTE_W, mplane = (size_t)PASTE_M * PASTE_M;
    mr_mask_window win[8];
    size_t total = 0;
    for (int i = 0; i < d; i++) {
        win[i] = mask_paste_window(&p, boxes + 4 * i, PASTE_H, PASTE_W);
        total += mask_window_pixels(win[i]);
    }
    float *hp = fmalloc((size_t)d * mplane);
    fill_uniform(hp, (size_t)d * mplane, 0.0f, 1.0f);
    float *dp = dev_upload(f, hp, (size_t)d * mplane), *db = dev_upload(f, boxes, 4 * (size_t)d);
    mr_tensor tp = mr_tensor_make(dp, d, PASTE_M, PASTE_M, 1), tb = mr_tensor_make(db, d, 1, 1, 4);
    uint8_t *pk = xmalloc(total + PASTE_GUARD), *pk2 = xmalloc(total + PASTE_GUARD);
    float *psoft = fmalloc(total + PASTE_GUARD);
    uint8_t *bin = xmalloc((size_t)(d ? d : 1) * plane), *bin2 = xmalloc((size_t)(d ? d : 1) * plane);
    float *soft = fmalloc((size_t)d * plane);
    memset(pk, 0xAB, total + PASTE_GUARD);
    memset(pk2, 0xAB, total + PASTE_GUARD);
    for (size_t k = 0; k < total + PASTE_GUARD; k++) psoft[k] = NAN;
    char label[160];
    label_case(f, label, sizeof label, "%d detections, %dx%d masks into %dx%d", d, PASTE_M, PASTE_M, PASTE_H,
               PASTE_W);
    mr_error err = {0};
    mr_status s = f->be.i->mask_paste(f->be.ctx, &p, &tp, &tb, PASTE_H, PASTE_W, win, pk, psoft, &err);
    if (status_ok(t, label, s, &err) &&
        status_ok(t, label, f->be.i->mask_paste(f->be.ctx, &p, &tp, &tb, PASTE_H, PASTE_W, win, pk2, NULL, &err),
                  &err)) {
        int intact = unpack_windows(win, d, pk, psoft, bin, soft) & unpack_windows(win, d, pk2, NULL, bin2, NULL);
        int finite = all_finite(soft, (size_t)d * plane), binary = 1, agree = 1, window = 1, any = 0;
        float scale = (float)(PASTE_M + 2) / (float)PASTE_M;
        for (int i = 0; i < d; i++) {
            const float *b = boxes + 4 * i;
            float xc = (b[0] + b[2]) * 0.5f, yc = (b[1] + b[3]) * 0.5f;
            float wh = (b[2] - b[0]) * 0.5f * scale, hh = (b[3] - b[1]) * 0.5f * scale;
            for (int y = 0; y < PASTE_H; y++)
                for (int x = 0; x < PASTE_W; x++) {
                    size_t o = (size_t)i * plane + (size_t)y * PASTE_W + x;
                    float v = soft[o];
                    binary &= bin[o] <= 1;
                    agree &= bin[o] == (v > p.threshold) && bin2[o] == bin[o];
                    finite &= v >= 0.0f && v <= 1.0f;
                    /* nothing outside the expanded box (a pixel of slack) */
                    int far = x < xc - wh - 1.0f || x > xc + wh + 1.0f || y < yc - hh - 1.0f || y > yc + hh + 1.0f;
                    if (far || i == outside) window &= v == 0.0f && bin[o] == 0;
                    any |= bin[o];
                }
        }
        int ok = intact && finite && binary && agree && window && (d == 0 || any);
        char detail[200];
        snprintf(detail, sizeof detail, "%s%s%s%s%s%s", finite ? "finite, in [0,1]" : "NaN or out of [0,1]",
                 binary ? "" : ", binary mask not 0/1", agree ? "" : ", binary != (prob > threshold)",
                 window ? "" : ", pixels set outside the box", d == 0 || any ? "" : ", nothing pasted",
                 intact ? "" : ", written past the windows");
        report(t, label, ok, detail);
        mr_backend ref;
        if (cpu_reference(f->bd->name, &ref)) {
            /* the same masks and boxes pasted by the CPU backend */
            uint8_t *wpk = xmalloc(total + PASTE_GUARD), *wbin = xmalloc((size_t)(d ? d : 1) * plane);
            float *wpsoft = fmalloc(total + PASTE_GUARD), *wsoft = fmalloc((size_t)d * plane);
            memset(wpk, 0xAB, total + PASTE_GUARD);
            for (size_t k = 0; k < total + PASTE_GUARD; k++) wpsoft[k] = NAN;
            mr_tensor rp = mr_tensor_make(hp, d, PASTE_M, PASTE_M, 1);
            mr_tensor rb = mr_tensor_make((float *)boxes, d, 1, 1, 4);
            char l2[200];
            snprintf(l2, sizeof l2, "%s vs cpu", label);
            if (status_ok(t, l2, ref.i->mask_paste(ref.ctx, &p, &rp, &rb, PASTE_H, PASTE_W, win, wpk, wpsoft, &err),
                          &err)) {
                unpack_windows(win, d, wpk, wpsoft, wbin, wsoft);
                check_close(t, l2, soft, wsoft, (size_t)d * plane, TOL_VS_CPU, 1);
                size_t differ = 0;
                for (size_t k = 0; k < (size_t)d * plane; k++) differ += bin[k] != wbin[k];
                snprintf(detail, sizeof detail, "%zu binary pixels differ", differ);
                report(t, l2, differ == 0, detail);
            }
            free(wpk);
            free(wbin);
            free(wpsoft);
            free(wsoft);
            ref.i->destroy(ref.ctx);
        }
    }
    dev_free(f, dp);
    dev_free(f, db);
    free(hp);
    free(pk);
    free(pk2);
    free(psoft);
    free(bin);
    free(bin2);
    free(soft);
}

/* ------------------------------------------------------------- error paths */

/* A call that must fail with MR_ERR_SHAPE and name the layer. */
static void expect_shape_error(fixture *f, tally *t, const char *what, mr_status s, const mr_error *err,
                               const char *name)
{
    char label[160];
    label_case(f, label, sizeof label, "%s", what);
    int ok = s == MR_ERR_SHAPE && strstr(err->msg, name) != NULL;
    char detail[MR_ERROR_MSG_LEN + 64];
    snprintf(detail, sizeof detail, "%s: \"%s\"", mr_status_name(s), s == MR_OK ? "" : err->msg);
    report(t, label, ok, detail);
}

static void case_errors(fixture *f, tally *t, const void *params)
{
    (void)params;
    NEED(f, conv_init);
    NEED(f, conv);
    const char *name = "backbone.res3.0.conv2";
    mr_conv_params p = {16, 32, 3, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1.0f, 1, 0.0f, 0, 0, 0.0f};
    float *w, *b;
    conv_weights(&p, &w, &b);
    mr_layer *layer = NULL;
    mr_error err = {0};
    mr_status s = f->be.i->conv_init(f->be.ctx, name, &p, w, b, &layer, &err);
    if (!status_ok(t, "[errors] conv_init", s, &err)) {
        free(w);
        free(b);
        return;
    }
    float *dx = dev_alloc(f, 2 * 7 * 5 * 32), *dy = dev_alloc(f, 2 * 7 * 5 * 64);
    mr_tensor x = mr_tensor_make(dx, 1, 7, 5, 16), y = mr_tensor_make(dy, 1, 7, 5, 32);
    mr_tensor bad_x = mr_tensor_make(dx, 1, 7, 5, 8), bad_y = mr_tensor_make(dy, 1, 7, 5, 64);
    mr_tensor bad_n = mr_tensor_make(dy, 2, 7, 5, 32);

    memset(&err, 0, sizeof err);
    s = f->be.i->conv(f->be.ctx, layer, &bad_x, &y, 0, &err);
    expect_shape_error(f, t, "conv 16->32 given 8 input channels", s, &err, name);
    memset(&err, 0, sizeof err);
    s = f->be.i->conv(f->be.ctx, layer, &x, &bad_y, 0, &err);
    expect_shape_error(f, t, "conv 16->32 given 64 output channels", s, &err, name);
    memset(&err, 0, sizeof err);
    s = f->be.i->conv(f->be.ctx, layer, &x, &bad_n, 1, &err);
    expect_shape_error(f, t, "conv with input N=1, output N=2", s, &err, name);
    f->be.i->layer_free(f->be.ctx, layer);

    mr_conv_params pg = p;
    pg.groups = 3;
    layer = NULL;
    memset(&err, 0, sizeof err);
    s = f->be.i->conv_init(f->be.ctx, name, &pg, w, b, &layer, &err);
    expect_shape_error(f, t, "conv_init 16->32 in 3 groups", s, &err, name);
    if (s == MR_OK) f->be.i->layer_free(f->be.ctx, layer);

    if (f->be.i->linear_init && f->be.i->linear) {
        const char *lname = "roi_heads.box_head.fc6";
        mr_linear_params lp = {16, 8, 1, 0, 1.0f, 1};
        layer = NULL;
        memset(&err, 0, sizeof err);
        if (status_ok(t, "[errors] linear_init", f->be.i->linear_init(f->be.ctx, lname, &lp, w, b, &layer, &err),
                      &err)) {
            mr_tensor lx = mr_tensor_make(dx, 2, 1, 3, 5), ly = mr_tensor_make(dy, 2, 1, 1, 8);
            memset(&err, 0, sizeof err);
            s = f->be.i->linear(f->be.ctx, layer, &lx, &ly, &err);
            expect_shape_error(f, t, "linear 16->8 given [2,1,3,5]", s, &err, lname);
            f->be.i->layer_free(f->be.ctx, layer);
        }
    } else {
        printf("  SKIP %s: errors: the backend has no linear\n", f->bd->name);
        t->cases++;
        t->skips++;
    }
    if (f->be.i->deconv2x2_init && f->be.i->deconv2x2) {
        const char *dname = "roi_heads.mask_predictor.conv5_mask";
        mr_deconv2x2_params dp = {16, 8, 1, 0, 0, 0, 0, 1.0f, 1};
        layer = NULL;
        memset(&err, 0, sizeof err);
        if (status_ok(t, "[errors] deconv2x2_init",
                      f->be.i->deconv2x2_init(f->be.ctx, dname, &dp, w, b, &layer, &err), &err)) {
            mr_tensor dx4 = mr_tensor_make(dx, 1, 3, 3, 16), dy4 = mr_tensor_make(dy, 1, 6, 5, 8);
            memset(&err, 0, sizeof err);
            s = f->be.i->deconv2x2(f->be.ctx, layer, &dx4, &dy4, &err);
            expect_shape_error(f, t, "deconv2x2 3x3 -> 6x5", s, &err, dname);
            f->be.i->layer_free(f->be.ctx, layer);
        }
    } else {
        printf("  SKIP %s: errors: the backend has no deconv2x2\n", f->bd->name);
        t->cases++;
        t->skips++;
    }
    if (f->be.i->group_norm_init && f->be.i->group_norm) {
        const char *gname = "backbone.res2.0.conv1.norm";
        mr_group_norm_params bad = {30, 4, 1e-5f, 0}, gp = {32, 8, 1e-5f, 1};
        layer = NULL;
        memset(&err, 0, sizeof err);
        s = f->be.i->group_norm_init(f->be.ctx, gname, &bad, w, b, &layer, &err);
        expect_shape_error(f, t, "group_norm_init of 30 channels in 4 groups", s, &err, gname);
        if (s == MR_OK) f->be.i->layer_free(f->be.ctx, layer);
        layer = NULL;
        memset(&err, 0, sizeof err);
        if (status_ok(t, "[errors] group_norm_init", f->be.i->group_norm_init(f->be.ctx, gname, &gp, w, b, &layer,
                                                                               &err), &err)) {
            mr_tensor gx = mr_tensor_make(dx, 1, 7, 5, 32), gy = mr_tensor_make(dy, 1, 7, 5, 32);
            mr_tensor g16 = mr_tensor_make(dx, 1, 7, 5, 16), gshort = mr_tensor_make(dy, 1, 7, 4, 32);
            mr_tensor gpart = mr_tensor_make(dx + 32, 1, 7, 5, 32);
            memset(&err, 0, sizeof err);
            s = f->be.i->group_norm(f->be.ctx, layer, &g16, &gy, 0, &err);
            expect_shape_error(f, t, "group_norm of 32 channels given 16", s, &err, gname);
            memset(&err, 0, sizeof err);
            s = f->be.i->group_norm(f->be.ctx, layer, &gx, &gshort, 0, &err);
            expect_shape_error(f, t, "group_norm 7x5 -> 7x4", s, &err, gname);
            memset(&err, 0, sizeof err);
            s = f->be.i->group_norm(f->be.ctx, layer, &gx, &gx, 1, &err);
            expect_shape_error(f, t, "group_norm adding into its own input", s, &err, gname);
            memset(&err, 0, sizeof err);
            s = f->be.i->group_norm(f->be.ctx, layer, &gx, &gpart, 0, &err);
            expect_shape_error(f, t, "group_norm into a part of its input", s, &err, gname);
            f->be.i->layer_free(f->be.ctx, layer);
        }
    } else {
        printf("  SKIP %s: errors: the backend has no group_norm\n", f->bd->name);
        t->cases++;
        t->skips++;
    }
    dev_free(f, dx);
    dev_free(f, dy);
    free(w);
    free(b);
}

/* -------------------------------------------------------------- preprocess */

/* The network input from a uint8 image through the table, for each resize
 * method, channel order and pixel scale, against image_preprocess on the
 * host (itself checked against torchvision and Pillow in tests/parity),
 * bit for bit. Cases: upscale, downscale, unchanged size, a one-row image,
 * odd padding; a large one, larger than the CUDA backend's image buffer
 * (4096x4096 pixels), which takes its host fallback; half the size. */
typedef struct {
    int h, w, min_size, max_size, divisibility;
    int all_methods; /* 0: torch_bilinear only (the large case) */
} pre_case;

static const pre_case g_pre_cases[] = {
    {37, 53, 64, 100, 32, 1},   {120, 90, 48, 80, 16, 1}, {32, 48, 32, 48, 1, 1},
    {1, 9, 4, 40, 8, 1},        {61, 47, 47, 61, 5, 1},   {4200, 4100, 800, 1333, 32, 0},
    {64, 96, 32, 48, 8, 1}, /* exactly half on both axes (OpenCV's INTER_AREA switch) */
};

/* The sweep: every image case through each resize method and both
 * normalisations; the large one through torch_bilinear with torchvision's. */
typedef struct {
    int image;   /* index into g_pre_cases */
    int method;  /* 0 torch_bilinear, 1 pil_bilinear, 2 cv2_linear, 3 cv2_linear_uint8 */
    int variant; /* 0: torchvision's RGB, 1/255; 1: Detectron's BGR, 0..255 means, scale 1 */
} pre_row;

#define PRE_SWEEP(i) {i, 0, 0}, {i, 0, 1}, {i, 1, 0}, {i, 1, 1}, {i, 2, 0}, {i, 2, 1}, {i, 3, 0}, {i, 3, 1}
static const pre_row g_pre_rows[] = {PRE_SWEEP(0), PRE_SWEEP(1), PRE_SWEEP(2), PRE_SWEEP(3),
                                     PRE_SWEEP(4), {5, 0, 0},    PRE_SWEEP(6)};

static void case_preprocess(fixture *f, tally *t, const void *params)
{
    NEED(f, preprocess);
    const pre_row *row = params;
    const pre_case *pc = &g_pre_cases[row->image];
    const int m = row->method, variant = row->variant;
    static const mr_resize_method methods[] = {MR_RESIZE_TORCH_BILINEAR, MR_RESIZE_PIL_BILINEAR,
                                               MR_RESIZE_CV2_LINEAR, MR_RESIZE_CV2_LINEAR_UINT8};
    static const char *const method_names[] = {"torch_bilinear", "pil_bilinear", "cv2_linear", "cv2_linear_uint8"};
    /* The rounding rule of each method's zoo (resize rules do not matter here). */
    static const mr_resize_rounding roundings[] = {MR_RESIZE_FLOOR, MR_RESIZE_DETECTRON2, MR_RESIZE_ROUND,
                                                   MR_RESIZE_MMDET};
    mr_image img = {xmalloc((size_t)pc->h * (size_t)pc->w * 3), pc->h, pc->w, 0};
    for (size_t i = 0; i < (size_t)pc->h * (size_t)pc->w * 3; i++) img.pixels[i] = (uint8_t)(rng_next() >> 24);
    const mr_input_config cfg = {
        .channel_order = variant ? MR_CHANNELS_BGR : MR_CHANNELS_RGB,
        .pixel_scale = variant ? 1.0f : 1.0f / 255.0f,
        .pixel_mean = {variant ? 102.9801f : 0.485f, variant ? 115.9465f : 0.456f, variant ? 122.7717f : 0.406f},
        .pixel_std = {variant ? 1.0f : 0.229f, variant ? 1.0f : 0.224f, variant ? 1.0f : 0.225f},
        .min_size = pc->min_size,
        .max_size = pc->max_size,
        .resize_rounding = roundings[m],
        .resize_method = methods[m],
        .size_divisibility = pc->divisibility,
        .max_image_side = 20000,
    };
    char label[160];
    label_case(f, label, sizeof label, "%s %s %dx%d -> min %d max %d /%d", method_names[m], variant ? "BGR" : "RGB",
               pc->h, pc->w, pc->min_size, pc->max_size, pc->divisibility);
    mr_input_geometry g;
    mr_error err = {0};
    if (status_ok(t, label, image_geometry(&cfg, pc->h, pc->w, &g, &err), &err)) {
        const size_t n = (size_t)g.padded_h * (size_t)g.padded_w * 3;
        float *ref = fmalloc(n), *got = fmalloc(n);
        void *scratch = xmalloc(image_preprocess_scratch_bytes(&g) + 64);
        mr_tensor tr = mr_tensor_make(ref, 1, g.padded_h, g.padded_w, 3);
        image_preprocess(&cfg, &img, &g, scratch, &tr);
        float *d = dev_output(f, NULL, n);
        mr_tensor td = mr_tensor_make(d, 1, g.padded_h, g.padded_w, 3);
        if (status_ok(t, label, f->be.i->preprocess(f->be.ctx, &cfg, &img, &g, &td, &err), &err)) {
            dev_get(f, got, d, n);
            size_t diff = 0;
            for (size_t i = 0; i < n; i++) diff += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
            char detail[96];
            snprintf(detail, sizeof detail, "%zu of %zu values differ in their bits%s", diff, n,
                     guard_intact(f, d, n) ? "" : ", output guard overwritten");
            report(t, label, diff == 0 && guard_intact(f, d, n), detail);
        }
        dev_free(f, d);
        free(scratch);
        free(ref);
        free(got);
    }
    free(img.pixels);
}

/* ------------------------------------------------------------------ driver */

/* A table and its row count and size. */
#define CASES(table) (table), sizeof(table)[0], sizeof(table) / sizeof(table)[0]

/* detections: none, three with labels 1, 3, 0, and those three on one (class-agnostic) channel */
static const int g_mask_counts[] = {0, 3, -3};
static const int g_one_case[] = {0};       /* the error paths: one case of several checks */

static const op_desc g_ops[] = {
    {"conv", case_conv, CASES(g_conv_cases)},
    {"conv_shapes", case_conv_shapes, CASES(g_conv_shape_layers)},
    {"linear", case_linear, CASES(g_linear_cases)},
    {"deconv2x2", case_deconv2x2, CASES(g_deconv_cases)},
    {"group_norm", case_group_norm, CASES(g_gn_cases)},
    {"max_pool", case_max_pool, CASES(g_pool_cases)},
    {"upsample_nearest", case_upsample_nearest, CASES(g_upsample_cases)},
    {"roi_align", case_roi_align, CASES(g_roi_cases)},
    {"rpn_proposals", case_rpn_proposals, CASES(g_rpn_cases)},
    {"box_detections", case_box_detections, CASES(g_box_cases)},
    {"mask_probs", case_mask_probs, CASES(g_mask_counts)},
    {"mask_class_probs", case_mask_class_probs, CASES(g_mask_counts)},
    {"mask_paste", case_mask_paste, CASES(g_paste_counts)},
    {"preprocess", case_preprocess, CASES(g_pre_rows)},
    {"errors", case_errors, CASES(g_one_case)},
};

#define N_BACKENDS (sizeof g_backends / sizeof g_backends[0])
#define N_OPS (sizeof g_ops / sizeof g_ops[0])

static int setup(void **state)
{
    fixture *f = *state;
    memset(&f->be, 0, sizeof f->be);
    f->created = f->bd->create(&f->be, f->why, sizeof f->why) == 0;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->created) f->be.i->destroy(f->be.ctx);
    f->created = 0;
    return 0;
}

static void run_op(void **state)
{
    fixture *f = *state;
    if (!f->created) {
        printf("SKIP %s: %s (%s)\n", f->bd->name, f->why, f->op->name);
        skip();
    }
    /* The generic runner: every case of the op, in table order, from one
     * seed per (backend, op), so a backend sees the inputs the CPU sees. */
    rng_reset();
    tally t = {0, 0, 0};
    for (size_t i = 0; i < f->op->n_cases; i++)
        f->op->run_case(f, &t, (const char *)f->op->cases + i * f->op->case_size);
    printf("  %s %s: %zu cases, %d checks, %d failed, %d skipped\n", f->bd->name, f->op->name, f->op->n_cases,
           t.cases, t.fails, t.skips);
    if (t.fails) fail_msg("%s %s: %d of %d checks failed", f->bd->name, f->op->name, t.fails, t.cases);
    if (t.skips == t.cases) skip();
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with cmocka's */
    const char *env = getenv("MR_TEST_SEED");
    if (env && *env) g_seed = strtoull(env, NULL, 0);
    printf("test_backend_ops: seed 0x%016llx (set MR_TEST_SEED to change)\n", (unsigned long long)g_seed);

    static fixture fx[N_BACKENDS * N_OPS];
    static struct CMUnitTest tests[N_BACKENDS * N_OPS];
    for (size_t b = 0; b < N_BACKENDS; b++)
        for (size_t o = 0; o < N_OPS; o++) {
            fixture *f = &fx[b * N_OPS + o];
            f->bd = &g_backends[b];
            f->op = &g_ops[o];
            snprintf(f->test_name, sizeof f->test_name, "%s/%s", f->bd->name, f->op->name);
            tests[b * N_OPS + o] = (struct CMUnitTest){f->test_name, run_op, setup, teardown, f};
        }
    return cmocka_run_group_tests_name("backend_ops", tests, NULL, NULL);
}
