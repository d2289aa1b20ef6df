/* The CPU backend's GroupNorm layer (ops/group_norm.h): gamma and beta
 * copied at init, group_norm_cpu (ops/group_norm.c) per call.
 *
 * The op reads and writes NHWC: a convolution's output the backend holds
 * blocked (nChw<B>c) or, under --precision int8, quantized for its reader
 * is turned back into fp32 NHWC in place first (cpu_read,
 * backend_cpu_layout.c), as every op that is not a convolution does, and
 * y's records are forgotten, since it is about to hold NHWC. The layer is
 * freed by cpu_layer_free (backend_cpu_layers.c) like the others: its
 * gamma is the layer's `weights`, its beta the `bias`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"

mr_status cpu_group_norm_init(void *ctx, const char *name, const mr_group_norm_params *p, const float *gamma,
                              const float *beta, mr_layer **out, mr_error *err)
{
    (void)ctx;
    MR_TRY(group_norm_params_check(name, p, err));
    if (!gamma || !beta) return mr_fail(err, MR_ERR_INTERNAL, "%s: GroupNorm without its gamma or beta", name);
    const size_t C = (size_t)p->channels;
    mr_layer *l = calloc(1, sizeof *l);
    if (!l) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    l->kind = CPU_LAYER_GROUP_NORM;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->gn = *p;
    l->weights = cpu_alloc(sizeof(float) * C);
    l->bias = cpu_alloc(sizeof(float) * C);
    if (!l->weights || !l->bias) {
        free(l->weights);
        free(l->bias);
        free(l);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    }
    memcpy(l->weights, gamma, sizeof(float) * C);
    memcpy(l->bias, beta, sizeof(float) * C);
    *out = l;
    return MR_OK;
}

mr_status cpu_group_norm(void *vctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate,
                         mr_error *err)
{
    cpu_ctx *c = vctx;
    if (layer->kind != CPU_LAYER_GROUP_NORM)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: group_norm given a layer that is not a GroupNorm", layer->name);
    MR_TRY(group_norm_check(layer->name, &layer->gn, x, y, accumulate, err));
    if (x->dtype != MR_ELEM_F32)
        return mr_fail(err, MR_ERR_SHAPE, "%s: the CPU backend's GroupNorm reads fp32 maps", layer->name);
    if (mr_tensor_numel(x) == 0) return MR_OK;
    MR_TRY(cpu_read(c, x, err));
    if (accumulate) MR_TRY(cpu_read(c, y, err));
    cpu_wrote(c, y);
    group_norm_cpu(&layer->gn, x->data, x->n, x->h, x->w, layer->weights, layer->bias, accumulate, y->data);
    return MR_OK;
}
