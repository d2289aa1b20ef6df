/* The CUDA backend's GEMM layers (cuBLAS): linear layers, the mask head's
 * 2x2 stride-2 transposed convolution, and, with fp16 feature maps, the
 * 1x1 convs whose output is fp32 (backend.h feature_dtype).
 *
 * Each is one GEMM, then one kernel for the bias and ReLU (affine.cu) or
 * the depth-to-space with the bias and ReLU (deconv.cu). In fp32 the GEMM
 * is cublasSgemm, TF32 tensor-core math only when the context asks for it
 * (cublasSetMathMode, backend_cuda.c). With fp16 the weights are halves
 * and the GEMM is cublasGemmEx: fp16 operands, fp32 accumulation
 * (CUBLAS_COMPUTE_32F), an fp16 or fp32 result as the output tensor's
 * type says.
 *
 * Row-major y[rows, out] = x[rows, in] * W[out, in]^T is, column-major,
 * y^T (out x rows) = op_T(W as stored: in x out) * x^T (in x rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

mr_status cuda_gemm(cuda_ctx *c, const mr_layer *l, int trans_a, int m, int n, int k, const void *B, void *C,
                    mr_elem_type ct, mr_error *err)
{
    const float one = 1.0f, zero = 0.0f;
    cublasOperation_t op = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = trans_a ? k : m;
    cublasStatus_t s;
    if (!c->fp16) {
        if (ct != MR_ELEM_F32) return mr_fail(err, MR_ERR_INTERNAL, "%s: an fp32 GEMM with an fp16 output", l->name);
        s = cublasSgemm(c->cublas, op, CUBLAS_OP_N, m, n, k, &one, (const float *)l->d_w, lda, (const float *)B, k,
                        &zero, (float *)C, m);
        if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail(err, l->name, "sgemm", s);
    } else {
        s = cublasGemmEx(c->cublas, op, CUBLAS_OP_N, m, n, k, &one, l->d_w, CUDA_R_16F, lda, B, CUDA_R_16F, k, &zero,
                         C, ct == MR_ELEM_F16 ? CUDA_R_16F : CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail(err, l->name, "GemmEx (fp16)", s);
    }
    return cuda_after_launch(c, l->name, err);
}

mr_status cuda_conv1x1_to_f32(cuda_ctx *c, mr_layer *l, const mr_tensor *x, mr_tensor *y, int accumulate,
                              mr_error *err)
{
    const mr_conv_params *p = &l->conv;
    if (!c->fp16 || x->dtype != MR_ELEM_F16 || y->dtype != MR_ELEM_F32)
        return mr_fail(err, MR_ERR_SHAPE, "%s: input and output of different types (only an fp16 -> fp32 1x1 conv "
                       "may have them)", l->name);
    if (p->kh != 1 || p->kw != 1 || p->stride != 1 || p->pad != 0 || p->groups != 1 || accumulate)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: an fp16 -> fp32 conv must be 1x1, stride 1, unpadded, "
                       "ungrouped and not accumulating", l->name);
    size_t rows = (size_t)x->n * (size_t)x->h * (size_t)x->w;
    if (rows == 0) return MR_OK;
    if (rows > 0x7fffffff) return mr_fail(err, MR_ERR_RANGE, "%s: %zu pixels exceed one GEMM", l->name, rows);
    /* OHWI of a 1x1 conv is [cout, cin]: the linear layer's [out, in] */
    MR_TRY(cuda_gemm(c, l, 1, p->cout, (int)rows, p->cin, x->data, y->data, MR_ELEM_F32, err));
    MR_TRY(cuda_affine_launch(c->stream, l->name, MR_ELEM_F32, y->data, y->data, l->d_scale, l->d_bias, NULL, rows,
                              p->cout, p->relu, err));
    return cuda_after_launch(c, l->name, err);
}

mr_status cuda_linear_init(void *vctx, const char *name, const mr_linear_params *p, const float *w,
                           const float *bias, mr_layer **out, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (p->in < 1 || p->out < 1)
        return mr_fail(err, MR_ERR_SHAPE, "%s: a linear layer needs positive sizes, got %d->%d", name, p->in, p->out);
    mr_layer *l = cuda_layer_new(CUDA_LAYER_LINEAR, name);
    if (!l) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    l->linear = *p;
    mr_status st = cuda_upload_weights(c, name, w, (size_t)p->in * (size_t)p->out, &l->d_w, err);
    if (st == MR_OK) st = cuda_upload_bias(c, l, bias, p->out, 0, err);
    if (st != MR_OK) {
        cuda_layer_free(c, l);
        return st;
    }
    *out = l;
    return MR_OK;
}

mr_status cuda_linear(void *vctx, mr_layer *l, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    cuda_ctx *c = vctx;
    const mr_linear_params *p = &l->linear;
    int rows = x->n;
    if ((size_t)x->h * x->w * x->c != (size_t)p->in || (size_t)y->h * y->w * y->c != (size_t)p->out || y->n != rows)
        return mr_fail(err, MR_ERR_SHAPE, "%s: input/output sizes do not match %d->%d", l->name, p->in, p->out);
    int replaying = 0;
    MR_TRY(cuda_graph_op(c, l->name, &replaying, err));
    if (x->dtype != cuda_feature_type(c) || (y->dtype != x->dtype && y->dtype != MR_ELEM_F32))
        return mr_fail(err, MR_ERR_SHAPE, "%s: an %s input with an %s output in an %s context", l->name,
                       x->dtype == MR_ELEM_F16 ? "fp16" : "fp32", y->dtype == MR_ELEM_F16 ? "fp16" : "fp32",
                       c->fp16 ? "fp16" : "fp32");
    if (rows == 0 || replaying) return MR_OK;
    MR_TRY(cuda_gemm(c, l, 1, p->out, rows, p->in, x->data, y->data, y->dtype, err));
    MR_TRY(cuda_affine_launch(c->stream, l->name, y->dtype, y->data, y->data, NULL, l->d_bias, NULL, (size_t)rows,
                              p->out, p->relu, err));
    return cuda_after_launch(c, l->name, err);
}

mr_status cuda_deconv2x2_init(void *vctx, const char *name, const mr_deconv2x2_params *p, const float *w,
                              const float *bias, mr_layer **out, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (p->cin < 1 || p->cout < 1)
        return mr_fail(err, MR_ERR_SHAPE, "%s: a deconv needs positive channels, got %d->%d", name, p->cin, p->cout);
    size_t cin = (size_t)p->cin, cout = (size_t)p->cout;
    mr_layer *l = cuda_layer_new(CUDA_LAYER_DECONV2X2, name);
    float *wk = malloc(sizeof(float) * cin * 4 * cout);
    if (!l || !wk) {
        free(l);
        free(wk);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    }
    l->deconv = *p;
    /* [cin, cout, 2, 2] -> [cin, k*cout + co], k = ki*2 + kj: one GEMM gives all four taps. */
    for (size_t ci = 0; ci < cin; ci++)
        for (size_t co = 0; co < cout; co++)
            for (size_t k = 0; k < 4; k++) wk[ci * 4 * cout + k * cout + co] = w[(ci * cout + co) * 4 + k];
    mr_status st = cuda_upload_weights(c, name, wk, cin * 4 * cout, &l->d_w, err);
    free(wk);
    /* the GEMM's [n*h*w, 4*cout] output, in d_tmp, at the largest input */
    size_t tmp = sizeof(float) * (size_t)(p->max_n > 0 ? p->max_n : 0) * (size_t)(p->max_h > 0 ? p->max_h : 0) *
                 (size_t)(p->max_w > 0 ? p->max_w : 0) * 4 * cout;
    if (tmp > c->need_tmp) c->need_tmp = tmp;
    if (st == MR_OK) st = cuda_upload_bias(c, l, bias, p->cout, 0, err);
    if (st != MR_OK) {
        cuda_layer_free(c, l);
        return st;
    }
    *out = l;
    return MR_OK;
}

mr_status cuda_deconv2x2(void *vctx, mr_layer *l, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    cuda_ctx *c = vctx;
    const mr_deconv2x2_params *p = &l->deconv;
    if (x->c != p->cin || y->c != p->cout || y->n != x->n || y->h != 2 * x->h || y->w != 2 * x->w)
        return mr_fail(err, MR_ERR_SHAPE, "%s: output must be [%d,%d,%d,%d]", l->name, x->n, 2 * x->h, 2 * x->w,
                       p->cout);
    int replaying = 0;
    MR_TRY(cuda_graph_op(c, l->name, &replaying, err));
    if (x->dtype != cuda_feature_type(c) || y->dtype != x->dtype)
        return mr_fail(err, MR_ERR_SHAPE, "%s: input and output must be the context's %s feature maps", l->name,
                       c->fp16 ? "fp16" : "fp32");
    int rows = x->n * x->h * x->w, cols = 4 * p->cout;
    if (rows == 0 || replaying) return MR_OK;
    MR_TRY(cuda_reserve(c, (void **)&c->d_tmp, &c->tmp_size, mr_elem_size(y->dtype) * (size_t)rows * (size_t)cols,
                        l->name, err));
    /* Row-major tmp[rows, cols] = x[rows, cin] * Wk[cin, cols]; column-major
     * that is tmp^T = Wk^T * x^T with both operands as stored. */
    MR_TRY(cuda_gemm(c, l, 0, cols, rows, p->cin, x->data, c->d_tmp, y->dtype, err));
    MR_TRY(cuda_depth_to_space_launch(c->stream, l->name, y->dtype, c->d_tmp, l->d_bias, y->data, x->n, x->h, x->w,
                                      p->cout, p->relu, err));
    return cuda_after_launch(c, l->name, err);
}
