/* The CUDA backend's layers.
 *
 * Convolutions run on cuDNN in NHWC (filters OHWI, cuDNN's NHWC filter
 * layout), algorithm chosen once per input shape by cuDNN's heuristic
 * (cudnnGetConvolutionForwardAlgorithm_v7), or with MR_CUDA_CONV_FIND=1 by
 * measurement (cudnnFindConvolutionForwardAlgorithmEx, algo_measured), and
 * cached in the layer (strict fp32: FMA math, no FFT or Winograd
 * algorithms). The workspace is planned
 * at load: each conv's init asks cuDNN for the workspace of the algorithm
 * it would choose at the layer's largest input (mr_conv_params max_n/h/w,
 * both orientations) and the plan allocates the largest over all layers;
 * at any other shape the conv takes the best algorithm whose workspace
 * fits (IMPLICIT_GEMM needs none), so the workspace never grows. Two ways
 * to apply the per-channel affine (batchnorm / AffineChannel) and the fused
 * residual/ReLU:
 *
 *  fold_affine = 1 (default): conv_init_affine folds the affine into the
 *    weights and bias (affine_fold.h, as the CPU backend does).
 *    cudnnConvolutionBiasActivationForward computes
 *    y = act(conv(x) + alpha2*z + bias) in one pass. Its constraints: the
 *    activation is RELU or IDENTITY, and IDENTITY is only implemented by
 *    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM. The residual is the
 *    model's output buffer itself (conv3 adds into the stage output in
 *    place), so using it as z means z aliases y; cuDNN does not document
 *    that aliasing as safe, so it is opt-in (MR_CUDA_FUSED_Z=1) and the
 *    default accumulates with cudnnConvolutionForward's beta = 1 (in-place
 *    accumulation, documented) followed by one bias+ReLU pass. Where cuDNN
 *    refuses the fused call for a shape, that shape falls back to the same
 *    two passes.
 *
 *  fold_affine = 0 (--no-fold, Detectron's AffineChannel): conv_init_affine
 *    keeps the unfolded weights W and the affine (scale s, and b*s + t as
 *    the bias); the conv runs without bias and one fused kernel (affine.cu)
 *    applies y = act(conv*s + (b*s + t) (+ residual)), the residual case
 *    going through d_tmp. Convs without a normalisation run as plain convs
 *    plus a bias pass.
 *
 * TF32 tensor-core math is used only when the context asks for it;
 * otherwise cuDNN is held to CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH would allow
 * TF32 on sm_80+).
 *
 * fp16 (--precision fp16): weights are uploaded as halves, the tensors'
 * descriptors are CUDNN_DATA_HALF and the convolution's compute type stays
 * CUDNN_DATA_FLOAT (cuDNN's PSEUDO_HALF configuration: fp16 in and out,
 * fp32 accumulation), on tensor cores (CUDNN_TENSOR_OP_MATH). The fused
 * call takes its bias as halves (d_bias_h); the two-pass form's affine
 * pass reads the float bias. A 1x1 conv whose output is fp32 (the RPN's
 * logits and deltas, the mask logits) is a GEMM (backend_cuda_gemm.c).
 *
 * Linear layers and the 2x2 transposed convolution are in
 * backend_cuda_gemm.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/affine_fold.h"
#include "cuda_internal.h"

/* Largest cuDNN workspace an algorithm may ask for. */
#define CUDA_WS_LIMIT ((size_t)1 << 30)

#define DNN_TRY(call, what)                                                         \
    do {                                                                            \
        cudnnStatus_t s_ = (call);                                                  \
        if (s_ != CUDNN_STATUS_SUCCESS) return cudnn_fail(err, l->name, what, s_);  \
    } while (0)

/* cuDNN's type of the context's feature maps and weights. */
static cudnnDataType_t dnn_type(const cuda_ctx *c) { return c->fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

/* The math every algorithm may use: strict fp32 holds cuDNN to FMA math;
 * TF32 and fp16 allow tensor cores. */
static cudnnMathType_t base_math(const cuda_ctx *c)
{
    if (c->fp16) return CUDNN_TENSOR_OP_MATH;
    return c->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

static mr_status conv_descriptors(const cuda_ctx *c, mr_layer *l, mr_error *err)
{
    const mr_conv_params *p = &l->conv;
    DNN_TRY(cudnnCreateFilterDescriptor(&l->w_desc), "filter descriptor");
    DNN_TRY(cudnnSetFilter4dDescriptor(l->w_desc, dnn_type(c), CUDNN_TENSOR_NHWC, p->cout, p->cin / p->groups,
                                       p->kh, p->kw),
            "filter descriptor");
    DNN_TRY(cudnnCreateConvolutionDescriptor(&l->conv_desc), "convolution descriptor");
    DNN_TRY(cudnnSetConvolution2dDescriptor(l->conv_desc, p->pad, p->pad, p->stride, p->stride, p->dilation,
                                            p->dilation, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), /* accumulate in fp32 */
            "convolution descriptor");
    DNN_TRY(cudnnSetConvolutionGroupCount(l->conv_desc, p->groups), "group count");
    DNN_TRY(cudnnCreateTensorDescriptor(&l->bias_desc), "bias descriptor");
    /* the bias has y's type (fp16: cuDNN's PSEUDO_HALF configuration, fp32 accumulation) */
    DNN_TRY(cudnnSetTensor4dDescriptor(l->bias_desc, CUDNN_TENSOR_NCHW, dnn_type(c), 1, p->cout, 1, 1),
            "bias descriptor");
    /* NaN propagates through the ReLU, as on the CPU. */
    DNN_TRY(cudnnCreateActivationDescriptor(&l->relu_desc), "activation descriptor");
    DNN_TRY(cudnnSetActivationDescriptor(l->relu_desc, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
            "activation descriptor");
    DNN_TRY(cudnnCreateActivationDescriptor(&l->identity_desc), "activation descriptor");
    DNN_TRY(cudnnSetActivationDescriptor(l->identity_desc, CUDNN_ACTIVATION_IDENTITY, CUDNN_PROPAGATE_NAN, 0.0),
            "activation descriptor");
    return MR_OK;
}

static mr_status conv_plan_need(cuda_ctx *c, mr_layer *l, mr_error *err);

/* Both conv inits. scale/shift NULL: a plain conv with bias. Otherwise the
 * affine is folded into W and the bias (affine_fold.h) with fold_affine, or
 * kept apart (d_scale, and d_bias = b*s + t) for the AffineChannel pass. */
static mr_status conv_init(cuda_ctx *c, const char *name, const mr_conv_params *p, const float *w_oihw,
                           const float *bias, const float *scale, const float *shift, mr_layer **out, mr_error *err)
{
    if (p->groups < 1 || p->cin % p->groups || p->cout % p->groups)
        return mr_fail(err, MR_ERR_SHAPE, "%s: %d groups do not divide %d->%d channels", name, p->groups, p->cin,
                       p->cout);
    if (p->kh < 1 || p->kw < 1 || p->stride < 1 || p->dilation < 1 || p->pad < 0)
        return mr_fail(err, MR_ERR_SHAPE, "%s: bad conv geometry (kernel %dx%d, stride %d, pad %d, dilation %d)",
                       name, p->kh, p->kw, p->stride, p->pad, p->dilation);
    int cpg = p->cin / p->groups, K = p->kh * p->kw;
    size_t per_out = (size_t)cpg * (size_t)K, count = per_out * (size_t)p->cout, cout = (size_t)p->cout;
    int fold = scale && c->fold, keep = scale && !c->fold;
    mr_layer *l = cuda_layer_new(CUDA_LAYER_CONV, name);
    /* OHWI weights, then (folding) the folded OIHW weights, then the bias */
    float *ohwi = malloc(sizeof(float) * (count + (fold ? count : 0) + cout + 1));
    if (!l || !ohwi) {
        free(l);
        free(ohwi);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    }
    l->conv = *p;
    float *b = ohwi + count + (fold ? count : 0);
    const float *src = w_oihw;
    if (fold) {
        affine_fold_conv(w_oihw, bias, scale, shift, per_out, p->cout, ohwi + count, b);
        src = ohwi + count;
    } else if (keep) {
        for (int o = 0; o < p->cout; o++) b[o] = affine_fold_bias(bias ? bias[o] : 0.0f, scale[o], shift[o]);
    }
    for (size_t o = 0; o < cout; o++)
        for (int i = 0; i < cpg; i++)
            for (int k = 0; k < K; k++) ohwi[o * per_out + (size_t)k * cpg + i] = src[o * per_out + (size_t)i * K + k];
    mr_status st = cuda_upload_weights(c, name, ohwi, count, &l->d_w, err);
    /* with fp16, cuDNN's fused call takes its bias in y's type: halves too */
    if (st == MR_OK) st = cuda_upload_bias(c, l, scale ? b : bias, p->cout, c->fp16, err);
    if (st == MR_OK && keep) st = cuda_upload_floats(c, name, scale, cout, &l->d_scale, err);
    free(ohwi);
    if (st == MR_OK) st = conv_descriptors(c, l, err);
    if (st == MR_OK) st = conv_plan_need(c, l, err);
    if (st != MR_OK) {
        cuda_layer_free(c, l);
        return st;
    }
    *out = l;
    return MR_OK;
}

mr_status cuda_conv_init(void *vctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                         const float *bias, mr_layer **out, mr_error *err)
{
    return conv_init(vctx, name, p, w_oihw, bias, NULL, NULL, out, err);
}

mr_status cuda_conv_init_affine(void *vctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                                const float *bias, const float *scale, const float *shift, mr_layer **out,
                                mr_error *err)
{
    return conv_init(vctx, name, p, w_oihw, bias, scale, shift, out, err);
}

/* Tries one algorithm: sets its math type and asks for its workspace,
 * which must fit the planned one (before plan: CUDA_WS_LIMIT). */
static int algo_usable(cuda_ctx *c, mr_layer *l, cuda_conv_entry *e, cudnnConvolutionFwdAlgo_t algo,
                       cudnnMathType_t math)
{
    size_t ws = 0, limit = c->planned ? c->ws_size : CUDA_WS_LIMIT;
    if (cudnnSetConvolutionMathType(l->conv_desc, math) != CUDNN_STATUS_SUCCESS) return 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, e->x_desc, l->w_desc, l->conv_desc, e->y_desc, algo, &ws) !=
            CUDNN_STATUS_SUCCESS ||
        ws > limit)
        return 0;
    e->algo = algo;
    e->math = math;
    e->ws_bytes = ws;
    return 1;
}

/* FFT and Winograd transform the operands, which costs fp32 accuracy
 * (errors of 1e-5..1e-4 relative): strict fp32 mode does without them. */
static int algo_inexact(cudnnConvolutionFwdAlgo_t a)
{
    return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}

/* The first of cuDNN's ranked list (the heuristic's or Find's) that this
 * context may use and whose workspace fits: strict fp32 skips FFT and
 * Winograd and holds each to FMA math; else the entry's own math. */
static int first_usable(cuda_ctx *c, mr_layer *l, cuda_conv_entry *e, const cudnnConvolutionFwdAlgoPerf_t *perf,
                        int found)
{
    int strict = !c->tf32 && !c->fp16;
    for (int i = 0; i < found; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (strict && algo_inexact(perf[i].algo)) continue;
        if (algo_usable(c, l, e, perf[i].algo, strict ? CUDNN_FMA_MATH : perf[i].mathType)) return 1;
    }
    return 0;
}

/* Picks the algorithm for this entry (e->fused may be cleared). Strict fp32
 * keeps every algorithm on CUDNN_FMA_MATH and off FFT/Winograd; TF32 and
 * fp16 take the heuristic's choice and math. */
static mr_status choose_algo(cuda_ctx *c, mr_layer *l, cuda_conv_entry *e, mr_error *err)
{
    cudnnMathType_t base = base_math(c);
    if (e->fused && !l->conv.relu) {
        /* IDENTITY activation: only IMPLICIT_PRECOMP_GEMM implements it */
        if (algo_usable(c, l, e, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, base)) return MR_OK;
        e->fused = 0;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    DNN_TRY(cudnnSetConvolutionMathType(l->conv_desc, base), "math type");
    DNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(c->cudnn, e->x_desc, l->w_desc, l->conv_desc, e->y_desc,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
            "algorithm heuristic");
    if (first_usable(c, l, e, perf, found)) return MR_OK;
    /* IMPLICIT_GEMM supports every configuration and needs no workspace. */
    if (algo_usable(c, l, e, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, base)) return MR_OK;
    /* a valid conv this cuDNN cannot run (e.g. a grouped or dilated NHWC
     * fp32 conv on some versions): unsupported, not a failure */
    return mr_fail(err, MR_ERR_UNSUPPORTED,
                   "%s: cuDNN offers no forward algorithm for a [%d,%d,%d,%d] input (%dx%d, stride %d, dilation %d, "
                   "%d groups)",
                   l->name, e->n, e->h, e->w, l->conv.cin, l->conv.kh, l->conv.kw, l->conv.stride, l->conv.dilation,
                   l->conv.groups);
}

/* MR_CUDA_CONV_FIND=1 (bench/NOTES.md section 27): the algorithm measured
 * on this call's own input and weights by cudnnFindConvolutionForwardAlgorithmEx
 * instead of the heuristic's first choice. Only eagerly (Find synchronises,
 * so a capture would fail). The output goes to d_tmp (planned for it at
 * load; grown before plan, as in the op tests), which no op holds across
 * calls, so a residual in y is untouched; the candidates are those the
 * workspace holds. Returns 1 with e's algorithm set, 0 where it did not run
 * or found nothing usable (the heuristic then chooses). Measured choices
 * can differ between runs and contexts (timing noise), so it is not the
 * default. */
static int algo_measured(cuda_ctx *c, mr_layer *l, cuda_conv_entry *e, const mr_tensor *x, const mr_tensor *y)
{
    if (!c->conv_find || c->graph_mode != CUDA_GRAPH_EAGER) return 0;
    if (e->fused && !l->conv.relu) return 0; /* IDENTITY: IMPLICIT_PRECOMP_GEMM only (choose_algo) */
    mr_error ignored = {0};
    if (cuda_reserve(c, (void **)&c->d_tmp, &c->tmp_size, mr_tensor_numel(y) * mr_elem_size(y->dtype), l->name,
                     &ignored) != MR_OK)
        return 0;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    if (cudnnSetConvolutionMathType(l->conv_desc, base_math(c)) != CUDNN_STATUS_SUCCESS ||
        cudnnFindConvolutionForwardAlgorithmEx(c->cudnn, e->x_desc, x->data, l->w_desc, l->d_w, l->conv_desc,
                                               e->y_desc, c->d_tmp, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf,
                                               c->d_ws, c->ws_size) != CUDNN_STATUS_SUCCESS) {
        cudaGetLastError(); /* a refused measurement is not the run's error */
        return 0;
    }
    return first_usable(c, l, e, perf, found); /* fastest first */
}

/* Finds (or builds) the cached state for this input shape. */
static mr_status conv_entry_get(cuda_ctx *c, mr_layer *l, const mr_tensor *x, const mr_tensor *y, int accumulate,
                                cuda_conv_entry **out, mr_error *err)
{
    for (int i = 0; i < CUDA_CONV_CACHE; i++) {
        cuda_conv_entry *e = &l->cache[i];
        if (e->used && e->n == x->n && e->h == x->h && e->w == x->w && e->accumulate == accumulate) {
            *out = e;
            return MR_OK;
        }
    }
    cuda_conv_entry *e = &l->cache[l->next_slot];
    l->next_slot = (l->next_slot + 1) % CUDA_CONV_CACHE;
    cuda_conv_entry_clear(e);
    e->n = x->n;
    e->h = x->h;
    e->w = x->w;
    e->accumulate = accumulate;
    DNN_TRY(cudnnCreateTensorDescriptor(&e->x_desc), "tensor descriptor");
    DNN_TRY(cudnnCreateTensorDescriptor(&e->y_desc), "tensor descriptor");
    DNN_TRY(cudnnSetTensor4dDescriptor(e->x_desc, CUDNN_TENSOR_NHWC, dnn_type(c), x->n, x->c, x->h, x->w),
            "input descriptor");
    DNN_TRY(cudnnSetTensor4dDescriptor(e->y_desc, CUDNN_TENSOR_NHWC, dnn_type(c), y->n, y->c, y->h, y->w),
            "output descriptor");
    e->fused = c->fold && !l->d_scale && (!accumulate || c->fuse_z);
    if (!algo_measured(c, l, e, x, y)) MR_TRY(choose_algo(c, l, e, err));
    e->used = 1;
    *out = e;
    return MR_OK;
}

static mr_status conv_plan_shapes(cuda_ctx *c, mr_layer *l, mr_error *err);

/* At init: the workspace this conv's algorithm needs at its largest input
 * (max_n x max_h x max_w, and transposed), fused and two-pass, and (no-fold
 * with an affine) its largest output for d_tmp; the plan reserves the
 * largest over all layers. Unknown extents (0) plan nothing. */
static mr_status conv_plan_need(cuda_ctx *c, mr_layer *l, mr_error *err)
{
    const mr_conv_params *p = &l->conv;
    if (p->max_n < 1 || p->max_h < 1 || p->max_w < 1) return MR_OK;
    /* the heuristic's own choice, not one capped by an earlier plan (a
     * second model loaded on this context re-plans) */
    int planned = c->planned;
    c->planned = 0;
    mr_status st = conv_plan_shapes(c, l, err);
    c->planned = planned;
    return st;
}

static mr_status conv_plan_shapes(cuda_ctx *c, mr_layer *l, mr_error *err)
{
    const mr_conv_params *p = &l->conv;
    for (int t = 0; t < (p->max_h == p->max_w ? 1 : 2); t++) {
        int h = t ? p->max_w : p->max_h, w = t ? p->max_h : p->max_w;
        int oh = (h + 2 * p->pad - p->dilation * (p->kh - 1) - 1) / p->stride + 1;
        int ow = (w + 2 * p->pad - p->dilation * (p->kw - 1) - 1) / p->stride + 1;
        if (oh < 1 || ow < 1) continue;
        size_t out_elems = (size_t)p->max_n * (size_t)oh * (size_t)ow * (size_t)p->cout;
        if (l->d_scale && sizeof(float) * out_elems > c->need_tmp) c->need_tmp = sizeof(float) * out_elems;
        /* MR_CUDA_CONV_FIND's measurements write their output there (algo_measured) */
        if (c->conv_find && mr_elem_size(cuda_feature_type(c)) * out_elems > c->need_tmp)
            c->need_tmp = mr_elem_size(cuda_feature_type(c)) * out_elems;
        mr_status st = MR_OK;
        for (int fused = c->fold && !l->d_scale; fused >= 0 && st == MR_OK; fused--) {
            cuda_conv_entry e;
            memset(&e, 0, sizeof e);
            e.n = p->max_n;
            e.h = h;
            e.w = w;
            e.fused = fused;
            cudnnStatus_t s = cudnnCreateTensorDescriptor(&e.x_desc);
            if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateTensorDescriptor(&e.y_desc);
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnSetTensor4dDescriptor(e.x_desc, CUDNN_TENSOR_NHWC, dnn_type(c), e.n, p->cin, h, w);
            if (s == CUDNN_STATUS_SUCCESS)
                s = cudnnSetTensor4dDescriptor(e.y_desc, CUDNN_TENSOR_NHWC, dnn_type(c), e.n, p->cout, oh, ow);
            st = s == CUDNN_STATUS_SUCCESS ? choose_algo(c, l, &e, err)
                                           : cudnn_fail(err, l->name, "descriptors at the largest input", s);
            if (st == MR_OK && e.ws_bytes > c->need_ws) c->need_ws = e.ws_bytes;
            cuda_conv_entry_clear(&e);
        }
        MR_TRY(st);
    }
    return MR_OK;
}

/* cudnnConvolutionForward with the entry's algorithm. Until cuDNN has
 * accepted the entry once, a refusal switches it to IMPLICIT_GEMM (which
 * implements every configuration) and retries. */
static mr_status conv_forward(cuda_ctx *c, mr_layer *l, cuda_conv_entry *e, const mr_tensor *x, void *dst,
                              float beta, mr_error *err)
{
    const float alpha = 1.0f;
    for (;;) {
        DNN_TRY(cudnnSetConvolutionMathType(l->conv_desc, e->math), "math type");
        cudnnStatus_t s = cudnnConvolutionForward(c->cudnn, &alpha, e->x_desc, x->data, l->w_desc, l->d_w,
                                                  l->conv_desc, e->algo, c->d_ws, e->ws_bytes, &beta, e->y_desc, dst);
        if (s == CUDNN_STATUS_SUCCESS) {
            e->verified = 1;
            return MR_OK;
        }
        if (e->verified || e->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
            !algo_usable(c, l, e, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, base_math(c)))
            return cudnn_fail(err, l->name, "convolution", s);
        MR_TRY(cuda_reserve(c, &c->d_ws, &c->ws_size, e->ws_bytes, l->name, err));
    }
}

/* The two-pass form: conv (beta = 1 accumulates in place), then one affine
 * pass. Without a scale: y = act(conv + y_old + bias); with one (no-fold):
 * y = act(conv*scale + bias + y_old), the conv going to d_tmp when it must
 * not touch y_old. */
static mr_status conv_two_pass(cuda_ctx *c, mr_layer *l, cuda_conv_entry *e, const mr_tensor *x, mr_tensor *y,
                               int accumulate, mr_error *err)
{
    size_t numel = mr_tensor_numel(y);
    void *dst = y->data;
    const void *residual = NULL;
    float beta = 0.0f;
    if (accumulate && !l->d_scale) {
        beta = 1.0f;
    } else if (accumulate) {
        MR_TRY(cuda_reserve(c, (void **)&c->d_tmp, &c->tmp_size, numel * mr_elem_size(y->dtype), l->name, err));
        dst = c->d_tmp;
        residual = y->data;
    }
    MR_TRY(conv_forward(c, l, e, x, dst, beta, err));
    MR_TRY(cuda_after_launch(c, l->name, err));
    MR_TRY(cuda_affine_launch(c->stream, l->name, y->dtype, y->data, dst, l->d_scale, l->d_bias, residual,
                              numel / (size_t)y->c, y->c, l->conv.relu, err));
    return cuda_after_launch(c, l->name, err);
}

mr_status cuda_conv(void *vctx, mr_layer *l, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err)
{
    cuda_ctx *c = vctx;
    const mr_conv_params *p = &l->conv;
    if (x->c != p->cin || y->c != p->cout || x->n != y->n)
        return mr_fail(err, MR_ERR_SHAPE, "%s: input [%d,%d,%d,%d] / output [%d,%d,%d,%d] do not match %d->%d",
                       l->name, x->n, x->h, x->w, x->c, y->n, y->h, y->w, y->c, p->cin, p->cout);
    int oh = (x->h + 2 * p->pad - p->dilation * (p->kh - 1) - 1) / p->stride + 1;
    int ow = (x->w + 2 * p->pad - p->dilation * (p->kw - 1) - 1) / p->stride + 1;
    if (y->h != oh || y->w != ow)
        return mr_fail(err, MR_ERR_SHAPE, "%s: a %dx%d input gives a %dx%d output, not %dx%d", l->name, x->h, x->w, oh,
                       ow, y->h, y->w);
    if (x->dtype != cuda_feature_type(c))
        return mr_fail(err, MR_ERR_SHAPE, "%s: the input is %s, the context's feature maps are %s", l->name,
                       x->dtype == MR_ELEM_F16 ? "fp16" : "fp32", c->fp16 ? "fp16" : "fp32");
    if (c->graph_mode == CUDA_GRAPH_REPLAYING) return MR_OK; /* the stage's graph runs it */
    if (y->dtype != x->dtype) return cuda_conv1x1_to_f32(c, l, x, y, accumulate, err);
    if (x->n == 0 || oh <= 0 || ow <= 0) return MR_OK;
    cuda_conv_entry *e = NULL;
    MR_TRY(conv_entry_get(c, l, x, y, accumulate, &e, err));
    MR_TRY(cuda_reserve(c, &c->d_ws, &c->ws_size, e->ws_bytes, l->name, err));
    if (!e->fused) return conv_two_pass(c, l, e, x, y, accumulate, err);
    float alpha1 = 1.0f, alpha2 = accumulate ? 1.0f : 0.0f;
    DNN_TRY(cudnnSetConvolutionMathType(l->conv_desc, e->math), "math type");
    cudnnStatus_t s = cudnnConvolutionBiasActivationForward(
        c->cudnn, &alpha1, e->x_desc, x->data, l->w_desc, l->d_w, l->conv_desc, e->algo, c->d_ws, e->ws_bytes,
        &alpha2, e->y_desc, y->data, l->bias_desc, c->fp16 ? l->d_bias_h : (void *)l->d_bias,
        p->relu ? l->relu_desc : l->identity_desc, e->y_desc,
        y->data);
    if (s != CUDNN_STATUS_SUCCESS && !e->verified) {
        /* refused for this shape (NOT_SUPPORTED, or a parameter combination
         * cuDNN rejects): from now on it takes the two-pass form */
        e->fused = 0;
        MR_TRY(choose_algo(c, l, e, err));
        MR_TRY(cuda_reserve(c, &c->d_ws, &c->ws_size, e->ws_bytes, l->name, err));
        return conv_two_pass(c, l, e, x, y, accumulate, err);
    }
    if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(err, l->name, "fused convolution", s);
    e->verified = 1;
    return cuda_after_launch(c, l->name, err);
}
