/* The heads as one block (STYLE.md, "Heads as one composable block"):
 * N 3x3 convs, each with its normalisation (none, a batchnorm folded at
 * load, or a run-time GroupNorm) and a ReLU, then M fully connected layers
 * with a ReLU, after torchvision's FastRCNNConvFCHead and mmcv's
 * ConvModule. The classic box head (0 convs, fc6 + fc7), the strong
 * baselines' 4conv1fc (4 convs with batchnorm, fc6), the GroupNorm heads,
 * the mask head's convs (4, no FC) and the RPN head's shared convs (1 or 2,
 * no norm) are rows of the config, not separate code. It sits below the
 * stages with model_layers.c: the stages call it, it calls no stage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

/* Reads a linear layer [out, in]. With chw = {C, H, W}, the input columns
 * are stored in PyTorch's flatten order (C, H, W) and are permuted here to
 * our NHWC order (H, W, C), once, so pooled features need no transpose. */
mr_status model_linear_layer(mr_model *m, mr_weights *w, const char *prefix, int in, int out, int relu,
                             const int *chw, mr_layer **dst, mr_error *err)
{
    char name[256];
    float *wt = malloc(sizeof(float) * ((size_t)in * (size_t)out * (chw ? 2 : 1) + (size_t)out));
    if (!wt) return mr_fail(err, MR_ERR_OOM, "out of memory loading %s", prefix);
    float *bias = wt + (size_t)in * (size_t)out, *perm = bias + out;
    int64_t wshape[2] = {out, in}, bshape[1] = {out};
    snprintf(name, sizeof name, "%s.weight", prefix);
    mr_status st = weights_read_f32(w, name, 2, wshape, wt, err);
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (st == MR_OK) st = weights_read_f32(w, name, 1, bshape, bias, err);
    const float *use = wt;
    if (st == MR_OK && chw) {
        int C = chw[0], H = chw[1], W = chw[2];
        for (int o = 0; o < out; o++)
            for (int c = 0; c < C; c++)
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++)
                        perm[(size_t)o * in + ((size_t)y * W + x) * C + c] = wt[(size_t)o * in + ((size_t)c * H + y) * W + x];
        use = perm;
    }
    if (st == MR_OK) st = model_check_finite(w, prefix, wt, (size_t)in * (size_t)out + (size_t)out, err);
    if (st == MR_OK) {
        mr_linear_params p = {in, out, relu, model_layer_keeps_fp32(&m->cfg, prefix), 0.0f, 0};
        st = model_gemm_int8_range(m, prefix, &p.int8_range, &p.int8_signed, err);
        if (st == MR_OK) st = m->be.i->linear_init(m->be.ctx, prefix, &p, use, bias, dst, err);
    }
    free(wt);
    return st;
}

mr_status head_block_load(mr_model *m, mr_weights *w, const mr_head_spec *spec, mr_head_block *hb, mr_error *err)
{
    if (spec->num_convs < 0 || spec->num_convs > MR_HEAD_MAX_CONVS || spec->num_fcs < 0 ||
        spec->num_fcs > MR_HEAD_MAX_FCS)
        return mr_fail(err, MR_ERR_CONFIG, "%s: %d convs and %d fully connected layers: at most %d and %d",
                       spec->norm.section, spec->num_convs, spec->num_fcs, MR_HEAD_MAX_CONVS, MR_HEAD_MAX_FCS);
    hb->num_convs = spec->num_convs;
    hb->num_fcs = spec->num_fcs;
    hb->conv_dim = spec->conv_dim;
    hb->fc_dim = spec->fc_dim;
    int c = spec->cin;
    for (int i = 0; i < spec->num_convs; i++) {
        char norm[96];
        snprintf(norm, sizeof norm, "%s.norm", spec->conv_name[i]);
        /* each conv's output is read by the next alone */
        const char *reader = i + 1 < spec->num_convs ? spec->conv_name[i + 1]
                             : spec->last_reader[0]   ? spec->last_reader
                                                      : NULL;
        MR_TRY(model_norm_conv_load(m, w, spec->conv_name[i], norm, &spec->norm, reader, 0, c, spec->conv_dim, 3, 1,
                                    1, 1, spec->in, &hb->conv[i], err));
        c = spec->conv_dim;
    }
    /* the first FC reads the RoI's R x R x c values, flattened */
    int R = spec->resolution, in = c * R * R, chw[3] = {c, R, R};
    for (int i = 0; i < spec->num_fcs; i++) {
        MR_TRY(model_linear_layer(m, w, spec->fc_name[i], in, spec->fc_dim, 1, i == 0 ? chw : NULL, &hb->fc[i], err));
        in = spec->fc_dim;
    }
    return MR_OK;
}

mr_status head_block_forward(mr_model *m, const mr_head_block *hb, const mr_tensor *x, mr_tensor *const *conv_buf,
                             mr_tensor *const *fc_buf, const mr_tensor **out, mr_error *err)
{
    for (int i = 0; i < hb->num_convs; i++) {
        mr_tensor *y = conv_buf[i % 2];
        MR_TRY(tensor_shape(y, x->n, x->h, x->w, hb->conv_dim, err));
        MR_TRY(model_norm_conv_run(m, &hb->conv[i], x, y, 0, err));
        x = y;
    }
    if (hb->num_fcs > 0) {
        mr_tensor flat = *x; /* [N, R*R*C]: NHWC rows are already the flattened vectors */
        flat.h = flat.w = 1;
        flat.c = x->h * x->w * x->c;
        const mr_tensor *in = &flat;
        for (int i = 0; i < hb->num_fcs; i++) {
            mr_tensor *y = fc_buf[i % 2];
            MR_TRY(tensor_shape(y, x->n, 1, 1, hb->fc_dim, err));
            MR_TRY(m->be.i->linear(m->be.ctx, hb->fc[i], in, y, err));
            in = y;
        }
        *out = in;
        return MR_OK;
    }
    *out = x;
    return MR_OK;
}

void head_block_free(mr_model *m, mr_head_block *hb)
{
    for (int i = 0; i < MR_HEAD_MAX_CONVS; i++) model_norm_conv_free(m, &hb->conv[i]);
    for (int i = 0; i < MR_HEAD_MAX_FCS; i++) {
        m->be.i->layer_free(m->be.ctx, hb->fc[i]);
        hb->fc[i] = NULL;
    }
}
