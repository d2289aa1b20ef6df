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
#include <string.h>

#include "model/model_internal.h"

static int conv_out(int in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }

/* The convs that read stage s's output (C2..C5, the residual stream its
 * blocks add into): every block's conv1 but the first's, the next stage's
 * first conv1 and shortcut, and the FPN's lateral. Returns how many. */
static int stream_readers(const int blocks[MR_STAGES], int s, char names[][MR_INT8_NAME_LEN])
{
    int n = 0;
    for (int b = 1; b < blocks[s]; b++) snprintf(names[n++], MR_INT8_NAME_LEN, "backbone.res%d.%d.conv1", s + 2, b);
    if (s + 1 < MR_STAGES) {
        snprintf(names[n++], MR_INT8_NAME_LEN, "backbone.res%d.0.conv1", s + 3);
        snprintf(names[n++], MR_INT8_NAME_LEN, "backbone.res%d.0.shortcut", s + 3);
    }
    snprintf(names[n++], MR_INT8_NAME_LEN, "fpn.lateral%d", s + 2);
    return n;
}

#define STREAM_READERS_MAX 64

mr_status resnet_int8_streams(const mr_config *cfg, const mr_int8_ranges *ranges, mr_int8_ranges *shared,
                              mr_error *err)
{
    memset(shared, 0, sizeof *shared);
    int blocks[MR_STAGES], total = 0;
    config_stage_blocks(cfg, blocks);
    for (int s = 0; s < MR_STAGES; s++) total += blocks[s] + 3;
    shared->items = calloc((size_t)total, sizeof *shared->items);
    if (!shared->items) return mr_fail(err, MR_ERR_OOM, "out of memory");
    snprintf(shared->path, sizeof shared->path, "%s", ranges->path);
    /* under GroupNorm the norm writes the stream, in fp32: nothing to share */
    for (int s = 0; s < MR_STAGES && cfg->backbone.norm != MR_NORM_GROUP_NORM; s++) {
        char names[STREAM_READERS_MAX][MR_INT8_NAME_LEN];
        if (blocks[s] + 3 > STREAM_READERS_MAX) continue;
        int n = stream_readers(blocks, s, names), found = 0, is_signed = 0;
        float range = 0.0f;
        for (int i = 0; i < n; i++) {
            const mr_int8_range *r = int8_ranges_find(ranges, names[i]);
            if (!r) continue;
            found++;
            is_signed |= r->is_signed;
            if (r->range > range) range = r->range;
        }
        /* every reader calibrated and unsigned (the stream is a ReLU's) */
        if (found < n || is_signed) continue;
        for (int i = 0; i < n; i++) {
            mr_int8_range *it = &shared->items[shared->count++];
            memcpy(it->name, names[i], sizeof it->name);
            it->range = range;
            it->is_signed = 0;
        }
    }
    return MR_OK;
}

/* conv3's reader (model_norm_conv_load) for stage s: one of the stream's
 * readers, all convs. Under int8 ranges, only where the stream has a
 * shared range (resnet_int8_streams), which conv3 then writes it at; else
 * NULL (conv3 writes fp32). */
static const char *stream_reader(const mr_model *m, const int blocks[MR_STAGES], int s, char *out)
{
    char names[STREAM_READERS_MAX][MR_INT8_NAME_LEN];
    if (blocks[s] + 3 > STREAM_READERS_MAX) return NULL;
    stream_readers(blocks, s, names);
    snprintf(out, MR_INT8_NAME_LEN, "%s", names[0]);
    if (!m->int8_ranges) return out;
    return int8_ranges_find(m->int8_shared, names[0]) ? out : NULL;
}

mr_status resnet_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_backbone_config *bc = &m->cfg.backbone;
    mr_norm_spec norm = model_norm_spec(bc->norm, bc->norm_eps, bc->norm_groups, "backbone");
    int blocks[MR_STAGES];
    config_stage_blocks(&m->cfg, blocks);
    MR_TRY(model_norm_conv_load(m, w, "backbone.stem.conv", "backbone.stem.norm", &norm, NULL, 0, 3,
                                bc->stem_out_channels, 7, 2, 3, 1, model_level_extent(m, 1), &m->stem, err));
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
            char conv[128], normp[160];
            int stride = b == 0 ? st->stride : 1, block_in = b == 0 ? in : st->out;
            int s1 = bc->stride_in_1x1 ? stride : 1, s3 = bc->stride_in_1x1 ? 1 : stride;
            /* largest inputs: the block's at the previous stage's stride
             * (block 0 of res3..res5), conv2's after conv1's stride */
            int out_stride = 4 << s, in_stride = out_stride / stride;
            mr_extent x_in = model_level_extent(m, in_stride), x_mid = model_level_extent(m, in_stride * s1),
                      x_out = model_level_extent(m, out_stride);
            /* conv1's output is read by conv2 alone, conv2's by conv3 alone;
             * conv3's, the stream, as stream_reader says */
            char conv2[MR_INT8_NAME_LEN], conv3[MR_INT8_NAME_LEN], stream[MR_INT8_NAME_LEN];
            snprintf(conv2, sizeof conv2, "backbone.res%d.%d.conv2", s + 2, b);
            snprintf(conv3, sizeof conv3, "backbone.res%d.%d.conv3", s + 2, b);
#define LAYER(part, reader, cin, cout, ksize, str, pad, relu, ext, dst)                                    \
    do {                                                                                                  \
        snprintf(conv, sizeof conv, "backbone.res%d.%d.%s", s + 2, b, part);                              \
        snprintf(normp, sizeof normp, "%s.norm", conv);                                                   \
        MR_TRY(model_norm_conv_load(m, w, conv, normp, &norm, reader, 0, cin, cout, ksize, str, pad, relu, ext, dst, \
                                    err));                                                                \
    } while (0)
            LAYER("conv1", conv2, block_in, st->width, 1, s1, 0, 1, x_in, &k->conv1);
            LAYER("conv2", conv3, st->width, st->width, 3, s3, 1, 1, x_mid, &k->conv2);
            const char *stream_next = stream_reader(m, blocks, s, stream);
            LAYER("conv3", stream_next, st->width, st->out, 1, 1, 0, 1, x_out, &k->conv3);
            /* the shortcut's output is what conv3 adds onto: the stream's
             * readers see it after that sum (int8 hands it over only if
             * signed: model_norm_conv_load) */
            if (b == 0) LAYER("shortcut", stream_next, block_in, st->out, 1, stride, 0, 0, x_in, &k->shortcut);
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
