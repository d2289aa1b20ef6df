/* The CUDA backend's GroupNorm layer (ops/group_norm.h): gamma and beta
 * uploaded at init (floats, whatever the context's precision: the kernel
 * computes in float on float or half maps), one launch of group_norm.cu
 * per call. Nothing is allocated, copied or waited for in the call, so it
 * is captured into a replayable stage's graph like a conv, and only
 * returns while that graph replays. The layer is freed by cuda_layer_free
 * (backend_cuda_weights.c) like the others. */
#include "cuda_internal.h"

mr_status cuda_group_norm_init(void *vctx, const char *name, const mr_group_norm_params *p, const float *gamma,
                               const float *beta, mr_layer **out, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(group_norm_params_check(name, p, err));
    if (!gamma || !beta) return mr_fail(err, MR_ERR_INTERNAL, "%s: GroupNorm without its gamma or beta", name);
    mr_layer *l = cuda_layer_new(CUDA_LAYER_GROUP_NORM, name);
    if (!l) return mr_fail(err, MR_ERR_OOM, "%s: out of memory", name);
    l->gn = *p;
    mr_status st = cuda_upload_floats(c, name, gamma, (size_t)p->channels, &l->d_scale, err);
    if (st == MR_OK) st = cuda_upload_floats(c, name, beta, (size_t)p->channels, &l->d_bias, err);
    if (st != MR_OK) {
        cuda_layer_free(c, l);
        return st;
    }
    *out = l;
    return MR_OK;
}

mr_status cuda_group_norm(void *vctx, mr_layer *l, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (l->kind != CUDA_LAYER_GROUP_NORM)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: group_norm given a layer that is not a GroupNorm", l->name);
    MR_TRY(group_norm_check(l->name, &l->gn, x, y, accumulate, err));
    if (c->graph_mode == CUDA_GRAPH_REPLAYING) return MR_OK; /* the stage's graph runs it */
    MR_TRY(cuda_group_norm_launch(c->stream, l->name, &l->gn, x, y, l->d_scale, l->d_bias, accumulate, err));
    return cuda_after_launch(c, l->name, err);
}
