/* The ResNet body: stem (7x7/2 conv + folded norm + ReLU, 3x3/2 max pool)
 * and four stages of bottleneck blocks, res2..res5, whose outputs are C2..C5.
 * Each conv has its batchnorm folded in at load; the residual sum and
 * the ReLU ride on conv3's output pass, written in place into the stage
 * output, so a block is exactly three (four with the shortcut) launches.
 * Under GroupNorm (config backbone.norm, the GN models) each conv is
 * followed by its GroupNorm, which carries the ReLU and, after conv3, the
 * residual sum (model_norm_conv_run). */
#include <stdio.h>
#include <stdlib.h>

#include "model/model_internal.h"

static int conv_out(int in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }

mr_status resnet_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_backbone_config *bc = &m->cfg.backbone;
    mr_norm_spec norm = model_norm_spec(bc->norm, bc->norm_eps, bc->norm_groups, "backbone");
    int blocks[MR_STAGES];
    config_stage_blocks(&m->cfg, blocks);
    MR_TRY(model_norm_conv_load(m, w, "backbone.stem.conv", "backbone.stem.norm", &norm, NULL, 3, bc->stem_out_channels,
                                7, 2, 3, 1, model_level_extent(m, 1), &m->stem, err));
    if (bc->num_groups != 1)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "backbone.num_groups %d: grouped (ResNeXt) bottlenecks are not "
                       "supported yet", bc->num_groups);
    int in = bc->stem_out_channels;
    for (int s = 0; s < MR_STAGES; s++) {
        mr_stage *st = &m->stage[s];
        st->blocks = blocks[s];
        st->width = bc->num_groups * bc->width_per_group << s;
        st->out = bc->res2_out_channels << s;
        st->stride = s == 0 ? 1 : 2;
        st->block = calloc((size_t)st->blocks, sizeof *st->block);
        if (!st->block) return mr_fail(err, MR_ERR_OOM, "out of memory");
        for (int b = 0; b < st->blocks; b++) {
            mr_bottleneck *k = &st->block[b];
            char conv[128], normp[160], reader[128];
            int stride = b == 0 ? st->stride : 1, block_in = b == 0 ? in : st->out;
            int s1 = bc->stride_in_1x1 ? stride : 1, s3 = bc->stride_in_1x1 ? 1 : stride;
            /* largest inputs: the block's at the previous stage's stride
             * (block 0 of res3..res5), conv2's after conv1's stride */
            int out_stride = 4 << s, in_stride = out_stride / stride;
            mr_extent x_in = model_level_extent(m, in_stride), x_mid = model_level_extent(m, in_stride * s1),
                      x_out = model_level_extent(m, out_stride);
            /* conv1's output is read by conv2 alone, conv2's by conv3 alone */
#define LAYER(part, next, cin, cout, ksize, str, pad, relu, ext, dst)                                      \
    do {                                                                                                  \
        snprintf(conv, sizeof conv, "backbone.res%d.%d.%s", s + 2, b, part);                              \
        snprintf(normp, sizeof normp, "%s.norm", conv);                                                   \
        if (next) snprintf(reader, sizeof reader, "backbone.res%d.%d.%s", s + 2, b, (const char *)next);  \
        MR_TRY(model_norm_conv_load(m, w, conv, normp, &norm, next ? reader : NULL, cin, cout, ksize, str, pad, \
                                    relu, ext, dst, err));                                                \
    } while (0)
            LAYER("conv1", "conv2", block_in, st->width, 1, s1, 0, 1, x_in, &k->conv1);
            LAYER("conv2", "conv3", st->width, st->width, 3, s3, 1, 1, x_mid, &k->conv2);
            LAYER("conv3", NULL, st->width, st->out, 1, 1, 0, 1, x_out, &k->conv3);
            if (b == 0) LAYER("shortcut", NULL, block_in, st->out, 1, stride, 0, 0, x_in, &k->shortcut);
#undef LAYER
        }
        in = st->out;
    }
    return MR_OK;
}

/* Runs one conv (and its norm) into y, shaping y from x and the layer's geometry. */
static mr_status run_conv(mr_model *m, const mr_norm_conv *layer, int k, int stride, int pad, int cout, const mr_tensor *x,
                          mr_tensor *y, int accumulate, mr_error *err)
{
    if (!accumulate)
        MR_TRY(tensor_shape(y, x->n, conv_out(x->h, k, stride, pad), conv_out(x->w, k, stride, pad), cout, err));
    return model_norm_conv_run(m, layer, x, y, accumulate, err);
}

mr_status resnet_forward(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backbone_config *bc = &m->cfg.backbone;
    MR_TRY(run_conv(m, &m->stem, 7, 2, 3, bc->stem_out_channels, &b->input, &b->stem, 0, err));
    mr_pool_params pool = {3, 2, 1};
    MR_TRY(tensor_shape(&b->stem_pool, 1, conv_out(b->stem.h, 3, 2, 1), conv_out(b->stem.w, 3, 2, 1), b->stem.c, err));
    MR_TRY(m->be.i->max_pool(m->be.ctx, &pool, &b->stem, &b->stem_pool, err));

    const mr_tensor *x = &b->stem_pool;
    for (int s = 0; s < MR_STAGES; s++) {
        mr_stage *st = &m->stage[s];
        mr_tensor *out = &b->c[s];
        for (int i = 0; i < st->blocks; i++) {
            mr_bottleneck *k = &st->block[i];
            const mr_tensor *in = i == 0 ? x : out;
            int stride = i == 0 ? st->stride : 1;
            int s1 = bc->stride_in_1x1 ? stride : 1, s3 = bc->stride_in_1x1 ? 1 : stride;
            MR_TRY(run_conv(m, &k->conv1, 1, s1, 0, st->width, in, &b->t1, 0, err));
            MR_TRY(run_conv(m, &k->conv2, 3, s3, 1, st->width, &b->t1, &b->t2, 0, err));
            /* The identity (or projected shortcut) is the stage output; conv3 adds into it. */
            if (k->shortcut.conv) MR_TRY(run_conv(m, &k->shortcut, 1, stride, 0, st->out, in, out, 0, err));
            MR_TRY(run_conv(m, &k->conv3, 1, 1, 0, st->out, &b->t2, out, 1, err));
        }
        x = out;
    }
    return MR_OK;
}
