/* Layer objects and their weights on the device, for every layer kind:
 * cuDNN convolutions (backend_cuda_layers.c) and cuBLAS GEMMs
 * (backend_cuda_gemm.c) both create, upload and free their layers here,
 * so neither file calls back into the other's helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "core/half.h"

mr_layer *cuda_layer_new(cuda_layer_kind kind, const char *name)
{
    mr_layer *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->kind = kind;
    snprintf(l->name, sizeof l->name, "%s", name);
    return l;
}

void cuda_conv_entry_clear(cuda_conv_entry *e)
{
    if (e->x_desc) cudnnDestroyTensorDescriptor(e->x_desc);
    if (e->y_desc) cudnnDestroyTensorDescriptor(e->y_desc);
    memset(e, 0, sizeof *e);
}

void cuda_layer_free(void *vctx, mr_layer *l)
{
    cuda_ctx *c = vctx;
    if (!l) return;
    cudaStreamSynchronize(c->stream); /* queued work may still read the weights */
    for (int i = 0; i < CUDA_CONV_CACHE; i++) cuda_conv_entry_clear(&l->cache[i]);
    if (l->w_desc) cudnnDestroyFilterDescriptor(l->w_desc);
    if (l->conv_desc) cudnnDestroyConvolutionDescriptor(l->conv_desc);
    if (l->bias_desc) cudnnDestroyTensorDescriptor(l->bias_desc);
    if (l->relu_desc) cudnnDestroyActivationDescriptor(l->relu_desc);
    if (l->identity_desc) cudnnDestroyActivationDescriptor(l->identity_desc);
    cudaFree(l->d_w);
    cudaFree(l->d_bias);
    cudaFree(l->d_bias_h);
    cudaFree(l->d_scale);
    free(l);
}

/* `bytes` of host memory into a new device array (load time only). */
static mr_status upload_bytes(cuda_ctx *c, const char *name, const void *h, size_t bytes, void **out, mr_error *err)
{
    void *d = NULL;
    char what[160];
    snprintf(what, sizeof what, "the weights of %s", name);
    MR_TRY(cuda_alloc(c, &d, bytes, what, err));
    *out = d;
    cudaError_t e = cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, name, "weight upload", e);
}

mr_status cuda_upload_floats(cuda_ctx *c, const char *name, const float *h, size_t count, float **out, mr_error *err)
{
    void *d = NULL;
    mr_status st = upload_bytes(c, name, h, count * sizeof(float), &d, err);
    *out = d;
    return st;
}

/* Halves of `count` floats, uploaded (the host copy freed again). */
static mr_status upload_halves(cuda_ctx *c, const char *name, const float *h, size_t count, void **out, mr_error *err)
{
    uint16_t *halves = malloc(sizeof(uint16_t) * (count ? count : 1));
    if (!halves) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    mr_floats_to_halves(h, halves, count);
    mr_status st = upload_bytes(c, name, halves, count * sizeof(uint16_t), out, err);
    free(halves);
    return st;
}

mr_status cuda_upload_weights(cuda_ctx *c, const char *name, const float *h, size_t count, void **out, mr_error *err)
{
    if (c->fp16) return upload_halves(c, name, h, count, out, err);
    return upload_bytes(c, name, h, count * sizeof(float), out, err);
}

mr_status cuda_upload_bias(cuda_ctx *c, mr_layer *l, const float *bias, int n, int halves_too, mr_error *err)
{
    float *zeros = NULL;
    if (!bias) {
        zeros = calloc((size_t)n + 1, sizeof(float));
        if (!zeros) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", l->name);
    }
    const float *b = bias ? bias : zeros;
    mr_status st = cuda_upload_floats(c, l->name, b, (size_t)n, &l->d_bias, err);
    if (st == MR_OK && halves_too) st = upload_halves(c, l->name, b, (size_t)n, &l->d_bias_h, err);
    free(zeros);
    return st;
}
