/* The CUDA emulator's cuDNN (tests/emu/README.md): the legacy convolution
 * API the backend calls (cuda/backend_cuda_layers.c), as plain loops.
 *
 * It checks what cuDNN checks, so the backend's descriptors, workspace and
 * fallbacks are exercised: descriptor shapes against each other (input
 * channels = filter channels x groups, the output extent the convolution
 * gives), data types (FLOAT, or HALF with FLOAT compute: cuDNN's
 * PSEUDO_HALF), a workspace at least as large as the algorithm asks for,
 * every operand inside one cudaMalloc allocation, and the fused call's
 * documented limits: RELU or IDENTITY, IDENTITY only with
 * IMPLICIT_PRECOMP_GEMM, a bias of y's type. MR_EMU_CUDNN_REFUSE_FUSED=1
 * makes every fused call NOT_SUPPORTED, to exercise the two-pass fallback.
 *
 * Arithmetic: im2col and oneDNN's sgemm in fixed tiles (emu_sgemm; fp32 accumulation); fp32 operands are rounded to TF32 first
 * when the math type allows tensor cores (DEFAULT or TENSOR_OP on sm_80+,
 * as cuDNN does), halves are read exactly and the result rounded once. */
#include <cudnn.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "emu_internal.h"

struct cudnnContext {
    cudaStream_t stream;
};

struct cudnnTensorStruct {
    int set;
    cudnnTensorFormat_t format;
    cudnnDataType_t type;
    int n, c, h, w;
};

struct cudnnFilterStruct {
    int set;
    cudnnTensorFormat_t format;
    cudnnDataType_t type;
    int k, c, h, w;
};

struct cudnnConvolutionStruct {
    int set;
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};

struct cudnnActivationStruct {
    cudnnActivationMode_t mode;
};

namespace {

size_t elem_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_HALF ? 2 : 4; }
size_t tensor_elems(const cudnnTensorStruct *t) { return (size_t)t->n * t->c * t->h * t->w; }
size_t filter_elems(const cudnnFilterStruct *f) { return (size_t)f->k * f->c * f->h * f->w; }

/* Element (n, c, h, w)'s offset in either layout. */
size_t at(cudnnTensorFormat_t f, int C, int H, int W, int n, int c, int h, int w)
{
    if (f == CUDNN_TENSOR_NHWC) return (((size_t)n * H + h) * W + w) * C + c;
    return (((size_t)n * C + c) * H + h) * W + w;
}

float load(cudnnDataType_t t, const void *p, size_t i)
{
    if (t == CUDNN_DATA_HALF) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

void store(cudnnDataType_t t, void *p, size_t i, float v)
{
    if (t == CUDNN_DATA_HALF) ((__half *)p)[i] = __float2half_rn(v);
    else ((float *)p)[i] = v;
}

int uses_tf32(const cudnnConvolutionStruct *c, cudnnDataType_t data)
{
    return data == CUDNN_DATA_FLOAT && c->math != CUDNN_FMA_MATH && emu_device_sm() >= 80;
}

/* The checks every forward call shares; the output extent it must have. */
cudnnStatus_t check_geometry(const cudnnTensorStruct *x, const cudnnFilterStruct *w, const cudnnConvolutionStruct *c,
                             const cudnnTensorStruct *y)
{
    if (!x || !w || !c || !y || !x->set || !w->set || !c->set || !y->set) return CUDNN_STATUS_BAD_PARAM;
    if (x->type != w->type || x->type != y->type) return CUDNN_STATUS_BAD_PARAM;
    if (x->type == CUDNN_DATA_FLOAT && c->compute != CUDNN_DATA_FLOAT) return CUDNN_STATUS_BAD_PARAM;
    if (c->mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_NOT_SUPPORTED; /* not emulated */
    if (x->c != w->c * c->groups || w->k % c->groups || x->n != y->n || y->c != w->k) return CUDNN_STATUS_BAD_PARAM;
    int oh = (x->h + 2 * c->pad_h - c->dil_h * (w->h - 1) - 1) / c->stride_h + 1;
    int ow = (x->w + 2 * c->pad_w - c->dil_w * (w->w - 1) - 1) / c->stride_w + 1;
    if (oh != y->h || ow != y->w) return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

size_t workspace_of(const cudnnTensorStruct *x, const cudnnFilterStruct *w, const cudnnTensorStruct *y,
                    cudnnConvolutionFwdAlgo_t algo)
{
    size_t e = elem_bytes(x->type);
    switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return 0;
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return 4 * (size_t)w->h * w->w * w->c + 256;
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return e * (size_t)y->n * y->h * y->w * w->c * w->h * w->w;
    default: return e * (tensor_elems(x) + tensor_elems(y)) * 2;
    }
}

int algo_emulated(cudnnConvolutionFwdAlgo_t a)
{
    return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}

/* One forward call's operands, as the stream will run them. */
struct conv_work : emu_body {
    cudnnTensorStruct x, y, z;
    cudnnFilterStruct w;
    cudnnConvolutionStruct c;
    const void *xp, *wp, *zp, *bias;
    void *yp;
    float alpha1, alpha2; /* conv scale; z scale (beta for the unfused call, z = y) */
    int relu, has_bias;
    void run() override
    {
        const int G = c.groups, kpg = w.k / G, cpg = w.c, R = w.h, S = w.w;
        const int tf32 = uses_tf32(&c, x.type);
        /* the filter as [k][r][s][c] floats, the input as NHWC floats */
        std::vector<float> wf(filter_elems(&w)), xf(tensor_elems(&x));
        for (int k = 0; k < w.k; k++)
            for (int r = 0; r < R; r++)
                for (int s = 0; s < S; s++)
                    for (int ci = 0; ci < cpg; ci++) {
                        float v = load(w.type, wp, at(w.format, cpg, R, S, k, ci, r, s));
                        wf[(((size_t)k * R + r) * S + s) * cpg + ci] = tf32 ? emu_tf32(v) : v;
                    }
        for (int n = 0; n < x.n; n++)
            for (int h = 0; h < x.h; h++)
                for (int ww = 0; ww < x.w; ww++)
                    for (int ci = 0; ci < x.c; ci++) {
                        float v = load(x.type, xp, at(x.format, x.c, x.h, x.w, n, ci, h, ww));
                        xf[at(CUDNN_TENSOR_NHWC, x.c, x.h, x.w, n, ci, h, ww)] = tf32 ? emu_tf32(v) : v;
                    }
        /* per group: im2col of a chunk of output pixels, times the
         * group's filters (oneDNN's sgemm), then the epilogue */
        const int RSC = R * S * cpg;
        const long long pixels = (long long)y.n * y.h * y.w, chunk = 2048;
        std::vector<float> col((size_t)chunk * RSC), acc((size_t)chunk * kpg);
        for (int g = 0; g < G; g++)
            for (long long p0 = 0; p0 < pixels; p0 += chunk) {
                const long long np = pixels - p0 < chunk ? pixels - p0 : chunk;
                for (long long q = 0; q < np; q++) {
                    const long long pix = p0 + q;
                    const int n = (int)(pix / ((long long)y.h * y.w)), oh = (int)(pix / y.w % y.h);
                    const int ow = (int)(pix % y.w);
                    float *cr = &col[(size_t)q * RSC];
                    for (int r = 0; r < R; r++)
                        for (int s = 0; s < S; s++, cr += cpg) {
                            const int ih = oh * c.stride_h - c.pad_h + r * c.dil_h;
                            const int iw = ow * c.stride_w - c.pad_w + s * c.dil_w;
                            if (ih < 0 || ih >= x.h || iw < 0 || iw >= x.w) {
                                memset(cr, 0, sizeof(float) * cpg);
                                continue;
                            }
                            memcpy(cr, &xf[at(CUDNN_TENSOR_NHWC, x.c, x.h, x.w, n, g * cpg, ih, iw)],
                                   sizeof(float) * cpg);
                        }
                }
                emu_sgemm('N', 'T', np, kpg, RSC, col.data(), RSC, &wf[(size_t)g * kpg * RSC], RSC, acc.data(), kpg);
                for (long long q = 0; q < np; q++) {
                    const long long pix = p0 + q;
                    const int n = (int)(pix / ((long long)y.h * y.w)), oh = (int)(pix / y.w % y.h);
                    const int ow = (int)(pix % y.w);
                    for (int kk = 0; kk < kpg; kk++) {
                        const int k = g * kpg + kk;
                        float v = alpha1 * acc[(size_t)q * kpg + kk];
                        if (alpha2 != 0.0f) v += alpha2 * load(z.type, zp, at(z.format, z.c, z.h, z.w, n, k, oh, ow));
                        if (has_bias) v += load(y.type, bias, (size_t)k);
                        if (relu && v < 0.0f) v = 0.0f;
                        store(y.type, yp, at(y.format, y.c, y.h, y.w, n, k, oh, ow), v);
                    }
                }
            }
    }
};

cudnnStatus_t check_operands(const conv_work &wk, size_t ws_need, const void *ws, size_t ws_size)
{
    const size_t e = elem_bytes(wk.x.type);
    if (ws_size < ws_need) {
        emu_report("cuDNN: a workspace of %zu bytes for an algorithm that needs %zu", ws_size, ws_need);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (emu_check_device_range(wk.xp, e * tensor_elems(&wk.x), "cuDNN conv input") != cudaSuccess ||
        emu_check_device_range(wk.wp, e * filter_elems(&wk.w), "cuDNN conv filter") != cudaSuccess ||
        emu_check_device_range(wk.yp, e * tensor_elems(&wk.y), "cuDNN conv output") != cudaSuccess ||
        (ws_need && emu_check_device_range(ws, ws_need, "cuDNN workspace") != cudaSuccess))
        return CUDNN_STATUS_EXECUTION_FAILED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t submit(cudnnHandle_t h, conv_work *w)
{
    cudaError_t e = emu_submit(h->stream, "cuDNN convolution", std::shared_ptr<emu_body>(w));
    return e == cudaSuccess ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED;
}

/* A descriptor's life: value-initialised, deleted. */
template <typename T> cudnnStatus_t make(T **d)
{
    *d = new T();
    return CUDNN_STATUS_SUCCESS;
}

template <typename T> cudnnStatus_t destroy(T *d)
{
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

/* What a 4-d tensor or filter descriptor may hold here. */
cudnnStatus_t check_4d(cudnnTensorFormat_t f, cudnnDataType_t t, int a, int b, int c, int d)
{
    if (a <= 0 || b <= 0 || c <= 0 || d <= 0) return CUDNN_STATUS_BAD_PARAM;
    if (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC) return CUDNN_STATUS_NOT_SUPPORTED;
    if (t != CUDNN_DATA_FLOAT && t != CUDNN_DATA_HALF) return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    *h = new cudnnContext();
    (*h)->stream = nullptr;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    delete h;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

const char *cudnnGetErrorString(cudnnStatus_t s)
{
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS (emulated)";
    }
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) { return make(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) { return make(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { return destroy(d); }

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w)
{
    cudnnStatus_t s = check_4d(f, t, n, c, h, w);
    if (s == CUDNN_STATUS_SUCCESS) *d = cudnnTensorStruct{1, f, t, n, c, h, w};
    return s;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w)
{
    cudnnStatus_t s = check_4d(f, t, k, c, h, w);
    if (s == CUDNN_STATUS_SUCCESS) *d = cudnnFilterStruct{1, f, t, k, c, h, w};
    return s;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    *d = new cudnnConvolutionStruct();
    (*d)->groups = 1;
    (*d)->math = CUDNN_DEFAULT_MATH;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { return destroy(d); }

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute)
{
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0) return CUDNN_STATUS_BAD_PARAM;
    d->set = 1;
    d->pad_h = pad_h, d->pad_w = pad_w, d->stride_h = u, d->stride_w = v, d->dil_h = dil_h, d->dil_w = dil_w;
    d->mode = mode;
    d->compute = compute;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups)
{
    if (groups < 1) return CUDNN_STATUS_BAD_PARAM;
    d->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *d) { return make(d); }
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) { return destroy(d); }

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t nan, double coef)
{
    (void)nan, (void)coef;
    d->mode = mode;
    return CUDNN_STATUS_SUCCESS;
}

/* The heuristic's list, best first as cuDNN would rank them: Winograd for
 * stride-1 3x3s (so strict fp32 must skip it), then the GEMMs. */
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, const int requested,
                                                     int *returned, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    (void)h;
    *returned = 0;
    cudnnStatus_t s = check_geometry(x, w, c, y);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    cudnnConvolutionFwdAlgo_t order[4] = {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
                                          CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                          CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
    int winograd = w->h == 3 && w->w == 3 && c->stride_h == 1 && c->stride_w == 1 && c->dil_h == 1 && c->groups == 1;
    for (int i = winograd ? 0 : 1; i < 4 && *returned < requested; i++) {
        cudnnConvolutionFwdAlgoPerf_t &p = perf[(*returned)++];
        memset(&p, 0, sizeof p);
        p.algo = order[i];
        p.status = CUDNN_STATUS_SUCCESS;
        p.time = (float)(i + 1);
        p.memory = workspace_of(x, w, y, order[i]);
        p.determinism = CUDNN_DETERMINISTIC;
        p.mathType = c->math;
    }
    return CUDNN_STATUS_SUCCESS;
}

/* cuDNN's Find runs every candidate on the caller's operands and returns
 * them fastest first, then waits for the device (so it is refused inside a
 * capture, where the wait invalidates it). The emulated algorithms all
 * compute alike and their times mean nothing, so this runs the convolution
 * once into y (its stats name: "cuDNN find") and ranks the candidates in
 * an order other than the heuristic's (GEMM first), so that a test sees a
 * measured choice taken; one whose workspace does not fit ws_size reports
 * a failed status after those that ran, as cuDNN's does. */
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const void *xp,
                                                     const cudnnFilterDescriptor_t w, const void *wp,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, void *yp, const int requested,
                                                     int *returned, cudnnConvolutionFwdAlgoPerf_t *perf, void *ws,
                                                     size_t ws_size)
{
    *returned = 0;
    cudnnStatus_t s = check_geometry(x, w, c, y);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    conv_work *wk = new conv_work();
    wk->x = *x, wk->y = *y, wk->z = *y, wk->w = *w, wk->c = *c;
    wk->xp = xp, wk->wp = wp, wk->yp = yp, wk->zp = yp, wk->bias = nullptr;
    wk->alpha1 = 1.0f, wk->alpha2 = 0.0f;
    wk->relu = 0, wk->has_bias = 0;
    s = check_operands(*wk, 0, ws, ws_size);
    if (s != CUDNN_STATUS_SUCCESS) {
        delete wk;
        return s;
    }
    if (emu_submit(h->stream, "cuDNN find", std::shared_ptr<emu_body>(wk)) != cudaSuccess ||
        cudaStreamSynchronize(h->stream) != cudaSuccess)
        return CUDNN_STATUS_EXECUTION_FAILED;
    int winograd = w->h == 3 && w->w == 3 && c->stride_h == 1 && c->stride_w == 1 && c->dil_h == 1 && c->groups == 1;
    cudnnConvolutionFwdAlgo_t order[4] = {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                          CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                          CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED};
    for (int fits = 1; fits >= 0; fits--)
        for (int i = 0; i < (winograd ? 4 : 3) && *returned < requested; i++) {
            size_t need = workspace_of(x, w, y, order[i]);
            if ((need <= ws_size) != fits) continue;
            cudnnConvolutionFwdAlgoPerf_t &p = perf[(*returned)++];
            memset(&p, 0, sizeof p);
            p.algo = order[i];
            p.status = fits ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
            p.time = fits ? (float)(*returned) : -1.0f;
            p.memory = need;
            p.determinism = CUDNN_DETERMINISTIC;
            p.mathType = c->math;
        }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t c,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t *bytes)
{
    (void)h;
    cudnnStatus_t s = check_geometry(x, w, c, y);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    if (!algo_emulated(algo)) return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = workspace_of(x, w, y, algo);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t x,
                                      const void *xp, const cudnnFilterDescriptor_t w, const void *wp,
                                      const cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t algo, void *ws,
                                      size_t ws_size, const void *beta, const cudnnTensorDescriptor_t y, void *yp)
{
    cudnnStatus_t s = check_geometry(x, w, c, y);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    if (!algo_emulated(algo)) return CUDNN_STATUS_NOT_SUPPORTED;
    conv_work *wk = new conv_work();
    wk->x = *x, wk->y = *y, wk->z = *y, wk->w = *w, wk->c = *c;
    wk->xp = xp, wk->wp = wp, wk->yp = yp, wk->zp = yp, wk->bias = nullptr;
    wk->alpha1 = *(const float *)alpha;
    wk->alpha2 = *(const float *)beta;
    wk->relu = 0, wk->has_bias = 0;
    s = check_operands(*wk, workspace_of(x, w, y, algo), ws, ws_size);
    if (s != CUDNN_STATUS_SUCCESS) {
        delete wk;
        return s;
    }
    return submit(h, wk);
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t h, const void *alpha1, const cudnnTensorDescriptor_t x, const void *xp,
    const cudnnFilterDescriptor_t w, const void *wp, const cudnnConvolutionDescriptor_t c,
    cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_size, const void *alpha2, const cudnnTensorDescriptor_t z,
    const void *zp, const cudnnTensorDescriptor_t bias_desc, const void *bias, const cudnnActivationDescriptor_t act,
    const cudnnTensorDescriptor_t y, void *yp)
{
    const char *refuse = getenv("MR_EMU_CUDNN_REFUSE_FUSED");
    if (refuse && *refuse == '1') return CUDNN_STATUS_NOT_SUPPORTED;
    cudnnStatus_t s = check_geometry(x, w, c, y);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    if (!act || (act->mode != CUDNN_ACTIVATION_RELU && act->mode != CUDNN_ACTIVATION_IDENTITY))
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (act->mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (!algo_emulated(algo)) return CUDNN_STATUS_NOT_SUPPORTED;
    if (!z || !z->set || z->n != y->n || z->c != y->c || z->h != y->h || z->w != y->w || z->type != y->type)
        return CUDNN_STATUS_BAD_PARAM;
    if (!bias_desc || !bias_desc->set || bias_desc->n != 1 || bias_desc->c != y->c || bias_desc->h != 1 ||
        bias_desc->w != 1 || bias_desc->type != y->type)
        return CUDNN_STATUS_BAD_PARAM;
    conv_work *wk = new conv_work();
    wk->x = *x, wk->y = *y, wk->z = *z, wk->w = *w, wk->c = *c;
    wk->xp = xp, wk->wp = wp, wk->yp = yp, wk->zp = zp, wk->bias = bias;
    wk->alpha1 = *(const float *)alpha1;
    wk->alpha2 = *(const float *)alpha2;
    wk->relu = act->mode == CUDNN_ACTIVATION_RELU, wk->has_bias = 1;
    s = check_operands(*wk, workspace_of(x, w, y, algo), ws, ws_size);
    if (s == CUDNN_STATUS_SUCCESS &&
        (emu_check_device_range(bias, elem_bytes(y->type) * (size_t)y->c, "cuDNN bias") != cudaSuccess ||
         (wk->alpha2 != 0.0f &&
          emu_check_device_range(zp, elem_bytes(z->type) * tensor_elems(z), "cuDNN z") != cudaSuccess)))
        s = CUDNN_STATUS_EXECUTION_FAILED;
    if (s != CUDNN_STATUS_SUCCESS) {
        delete wk;
        return s;
    }
    return submit(h, wk);
}

} // extern "C"
