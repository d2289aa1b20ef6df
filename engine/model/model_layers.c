/* The helpers every stage file calls (resnet.c, fpn.c, rpn.c, roi_heads.c,
 * mask_head.c) and the driver too (model.c): shaping planned tensors,
 * loading a conv layer with its normalisation, the sizes of the feature
 * levels. They sit below the stages and call none of them, so the model's
 * files call one way: model.c -> stages -> model_layers.c. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "ops/group_norm.h"

mr_status tensor_shape(mr_tensor *t, int n, int h, int w, int c, mr_error *err)
{
    size_t need = (size_t)n * (size_t)h * (size_t)w * (size_t)c;
    if (n < 0 || h < 0 || w < 0 || c < 0 || need > t->cap)
        return mr_fail(err, MR_ERR_RANGE, "a [%d,%d,%d,%d] tensor does not fit the %zu elements planned at load",
                       n, h, w, c, t->cap);
    t->n = n;
    t->h = h;
    t->w = w;
    t->c = c;
    return MR_OK;
}

/* In blocks, each one vector pass of comparisons; the bad value is looked
 * for only in a block that has one. A loop that returned at the first was
 * scalar: 7-13% of a full-size load (bench/NOTES.md section 40). */
mr_status model_check_finite(const mr_weights *w, const char *layer, const float *v, size_t n, mr_error *err)
{
    const size_t block = 4096;
    for (size_t at = 0; at < n; at += block) {
        size_t end = n - at < block ? n : at + block;
        int bad = 0;
#pragma omp simd reduction(| : bad)
        for (size_t i = at; i < end; i++) bad |= !(fabsf(v[i]) <= FLT_MAX);
        for (size_t i = at; bad && i < end; i++)
            if (!isfinite(v[i]))
                return mr_fail(err, MR_ERR_FORMAT, "%s: layer \"%s\" has %s weights (or normalisation); "
                               "refusing NaN/Inf weights", w->path, layer, isnan(v[i]) ? "NaN" : "Inf");
    }
    return MR_OK;
}

mr_status model_check_class_rows(const mr_weights *w, const char *tensor, int rows, int agnostic, int other_rows,
                                 const char *key, mr_error *err)
{
    const mr_weight_entry *e = weights_find(w, tensor);
    if (!e || e->ndim < 1 || e->shape[0] == rows || e->shape[0] != other_rows) return MR_OK; /* read reports it */
    return mr_fail(err, MR_ERR_SHAPE, "%s: tensor \"%s\" has %d rows, %s; the config's %s is %s (%d rows)", w->path,
                   tensor, other_rows, agnostic ? "one set per class" : "one set for every class (class-agnostic)",
                   key, agnostic ? "true" : "false", rows);
}

int model_layer_keeps_fp32(const mr_config *c, const char *prefix)
{
    const mr_reduced_precision_config *r = &c->reduced_precision;
    if (strcmp(prefix, "backbone.stem.conv") == 0) return !r->stem;
    if (strcmp(prefix, "rpn.objectness") == 0 || strcmp(prefix, "rpn.deltas") == 0) return !r->rpn_predictors;
    if (strncmp(prefix, "mask_head.", strlen("mask_head.")) == 0) return !r->mask_head;
    if (strncmp(prefix, "box_head.", strlen("box_head.")) == 0) return !r->box_head;
    if (strncmp(prefix, "box_predictor.", strlen("box_predictor.")) == 0) return 1;
    return 0;
}

/* The layer's calibrated input range and sign (0 where the ranges, if
 * any, have none); `needed`: the backend quantizes the layer under int8,
 * so a missing range is refused, naming the ranges file. */
static mr_status int8_range_of(const mr_model *m, const char *prefix, int needed, float *range, int *is_signed,
                               mr_error *err)
{
    const mr_int8_range *r = int8_ranges_find(m->int8_ranges, prefix);
    *range = r ? r->range : 0.0f;
    *is_signed = r ? r->is_signed : 0;
    if (!r && m->int8_ranges && needed && !model_layer_keeps_fp32(&m->cfg, prefix))
        return mr_fail(err, MR_ERR_CONFIG, "%s: no range for layer \"%s\", which int8 quantizes: calibrate "
                       "again for this config", m->int8_ranges->path, prefix);
    return MR_OK;
}

mr_status model_gemm_int8_range(const mr_model *m, const char *prefix, float *range, int *is_signed,
                                mr_error *err)
{
    /* the CPU backend computes the heads' GEMMs in int8 (ranges from before
     * it did lack them); CUDA's GEMMs never read them */
    return int8_range_of(m, prefix, strcmp(m->be.i->name, "cpu") == 0, range, is_signed, err);
}

/* The conv and its folded normalisation (norm: its prefix, NULL for none)
 * go to the backend unfolded (conv_init_affine): it folds them
 * (affine_fold.h) or, on CUDA with --no-fold, applies the affine after the
 * conv. */
static mr_status conv_layer(mr_model *m, mr_weights *w, const char *prefix, const char *norm, float eps,
                            int bias_optional, const char *reader, int roi_align_reads, int cin, int cout, int k,
                            int stride, int pad, int relu, mr_extent in, mr_layer **out, mr_error *err)
{
    char name[256];
    size_t per_out = (size_t)cin * (size_t)k * (size_t)k;
    float *wt = malloc(sizeof(float) * (per_out * (size_t)cout + 3 * (size_t)cout));
    if (!wt) return mr_fail(err, MR_ERR_OOM, "out of memory loading %s", prefix);
    float *bias = wt + per_out * (size_t)cout, *scale = bias + cout, *shift = scale + cout;
    int64_t wshape[4] = {cout, cin, k, k}, bshape[1] = {cout};
    snprintf(name, sizeof name, "%s.weight", prefix);
    mr_status st = weights_read_f32(w, name, 4, wshape, wt, err);
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (st == MR_OK) {
        if (weights_find(w, name)) st = weights_read_f32(w, name, 1, bshape, bias, err);
        else if (norm || bias_optional) memset(bias, 0, sizeof(float) * (size_t)cout);
        else st = mr_fail(err, MR_ERR_SHAPE, "%s: tensor \"%s\" is missing", w->path, name);
    }
    if (st == MR_OK && norm) st = weights_read_affine(w, norm, cout, eps, scale, shift, err);
    size_t count = per_out * (size_t)cout + (size_t)cout * (norm ? 3 : 1);
    if (st == MR_OK) st = model_check_finite(w, prefix, wt, count, err);
    mr_conv_params p = {cin, cout, k, k, stride, pad, 1, 1, relu, in.n, in.h, in.w,
                        model_layer_keeps_fp32(&m->cfg, prefix), 0.0f, 0, 0.0f, 0, 0, 0.0f};
    if (st == MR_OK) {
        p.out_to_convs = !reader || model_layer_keeps_fp32(&m->cfg, reader) ? 0
                         : roi_align_reads ? MR_OUT_CONVS_AND_ROI_ALIGN
                                           : MR_OUT_CONVS;
        /* the reader's range: shared with the stream's other readers, if so
         * (the FPN's levels: the RPN conv's, which RoIAlign reads them at too) */
        const int int8_reader = p.out_to_convs != 0;
        const mr_int8_range *shared = int8_reader ? int8_ranges_find(m->int8_shared, reader) : NULL;
        const mr_int8_range *next = shared ? shared : int8_reader ? int8_ranges_find(m->int8_ranges, reader) : NULL;
        /* an output without a ReLU goes below zero: handed over unsigned
         * (the stream, to a block's shortcut) it would be clipped */
        if (next && (relu || next->is_signed)) {
            p.int8_out_range = next->range;
            p.int8_out_signed = next->is_signed;
        }
        st = int8_range_of(m, prefix, 1, &p.int8_range, &p.int8_signed, err);
        const mr_int8_range *mine = int8_ranges_find(m->int8_shared, prefix);
        p.int8_shared_range = mine ? mine->range : 0.0f;
    }
    if (st == MR_OK) {
        st = norm ? m->be.i->conv_init_affine(m->be.ctx, prefix, &p, wt, bias, scale, shift, out, err)
                  : m->be.i->conv_init(m->be.ctx, prefix, &p, wt, bias, out, err);
    }
    free(wt);
    return st;
}

mr_status model_conv_layer(mr_model *m, mr_weights *w, const char *prefix, int cin, int cout, int k, int stride,
                           int pad, int relu, mr_extent in, mr_layer **out, mr_error *err)
{
    return conv_layer(m, w, prefix, NULL, 0.0f, 0, NULL, 0, cin, cout, k, stride, pad, relu, in, out, err);
}

mr_norm_spec model_norm_spec(mr_norm_kind kind, float eps, int groups, const char *section)
{
    mr_norm_spec s = {kind, eps, groups, section};
    return s;
}

static int has_tensor(mr_weights *w, const char *prefix, const char *part)
{
    char name[320];
    snprintf(name, sizeof name, "%s.%s", prefix, part);
    return weights_find(w, name) != NULL;
}

/* The file's normalisation at `norm_prefix` against the config's: a
 * normalisation the config does not apply, or of another kind, would give
 * quietly wrong detections, so each mismatch is refused naming the key. */
static mr_status check_norm_form(mr_weights *w, const char *norm_prefix, const mr_norm_spec *norm, mr_error *err)
{
    int stats = has_tensor(w, norm_prefix, "running_mean") || has_tensor(w, norm_prefix, "running_var");
    int affine = has_tensor(w, norm_prefix, "scale") || has_tensor(w, norm_prefix, "shift");
    int gamma = has_tensor(w, norm_prefix, "weight") || has_tensor(w, norm_prefix, "bias");
    const char *kind = stats || affine ? "a batchnorm" : "a GroupNorm (weight and bias, no running statistics)";
    if (norm->kind == MR_NORM_NONE && (stats || affine || gamma))
        return mr_fail(err, MR_ERR_CONFIG, "%s: the file has %s at \"%s\", but the config's %s.norm is \"none\" "
                       "(\"%s\" would apply it)", w->path, kind, norm_prefix, norm->section,
                       stats || affine ? "batchnorm" : "group_norm");
    if (norm->kind == MR_NORM_GROUP_NORM && (stats || affine))
        return mr_fail(err, MR_ERR_CONFIG, "%s: \"%s\" is a batchnorm (running statistics or scale/shift), but the "
                       "config's %s.norm is \"group_norm\"", w->path, norm_prefix, norm->section);
    if (norm->kind == MR_NORM_BATCHNORM && gamma && !stats && !affine)
        return mr_fail(err, MR_ERR_CONFIG, "%s: \"%s\" has no running statistics (a GroupNorm?), but the config's "
                       "%s.norm is \"batchnorm\"", w->path, norm_prefix, norm->section);
    return MR_OK;
}

/* GroupNorm's gamma and beta at `norm_prefix`, on the backend. */
static mr_status group_norm_layer(mr_model *m, mr_weights *w, const char *norm_prefix, const mr_norm_spec *norm,
                                  int channels, int relu, mr_layer **out, mr_error *err)
{
    if (!m->be.i->group_norm_init)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: the %s backend has no GroupNorm (%s.norm \"group_norm\")",
                       norm_prefix, m->be.i->name, norm->section);
    char name[320];
    float *gb = malloc(sizeof(float) * 2 * (size_t)channels);
    if (!gb) return mr_fail(err, MR_ERR_OOM, "out of memory loading %s", norm_prefix);
    int64_t shape[1] = {channels};
    snprintf(name, sizeof name, "%s.weight", norm_prefix);
    mr_status st = weights_read_f32(w, name, 1, shape, gb, err);
    snprintf(name, sizeof name, "%s.bias", norm_prefix);
    if (st == MR_OK) st = weights_read_f32(w, name, 1, shape, gb + channels, err);
    if (st == MR_OK) st = model_check_finite(w, norm_prefix, gb, 2 * (size_t)channels, err);
    if (st == MR_OK) {
        mr_group_norm_params p = {channels, norm->groups, norm->eps, relu};
        st = m->be.i->group_norm_init(m->be.ctx, norm_prefix, &p, gb, gb + channels, out, err);
    }
    free(gb);
    return st;
}

mr_status model_norm_conv_load(mr_model *m, mr_weights *w, const char *prefix, const char *norm_prefix,
                               const mr_norm_spec *norm, const char *reader, int roi_align_reads, int cin, int cout,
                               int k, int stride, int pad, int relu, mr_extent in, mr_norm_conv *out, mr_error *err)
{
    MR_TRY(check_norm_form(w, norm_prefix, norm, err));
    if (norm->kind != MR_NORM_GROUP_NORM)
        return conv_layer(m, w, prefix, norm->kind == MR_NORM_BATCHNORM ? norm_prefix : NULL, norm->eps, 0, reader,
                          roi_align_reads, cin, cout, k, stride, pad, relu, in, &out->conv, err);
    /* the conv (its own bias, when the file has one, comes before the norm;
     * the ReLU after it) */
    MR_TRY(conv_layer(m, w, prefix, NULL, 0.0f, 1, NULL, 0, cin, cout, k, stride, pad, 0, in, &out->conv, err));
    return group_norm_layer(m, w, norm_prefix, norm, cout, relu, &out->group_norm, err);
}

mr_status model_norm_conv_run(mr_model *m, const mr_norm_conv *u, const mr_tensor *x, mr_tensor *y, int accumulate,
                              mr_error *err)
{
    const mr_backend_i *be = m->be.i;
    if (!u->group_norm) return be->conv(m->be.ctx, u->conv, x, y, accumulate, err);
    if (!accumulate) {
        MR_TRY(be->conv(m->be.ctx, u->conv, x, y, 0, err));
        return be->group_norm(m->be.ctx, u->group_norm, y, y, 0, err);
    }
    mr_tensor *tmp = &m->buf.norm_tmp;
    MR_TRY(tensor_shape(tmp, y->n, y->h, y->w, y->c, err));
    MR_TRY(be->conv(m->be.ctx, u->conv, x, tmp, 0, err));
    return be->group_norm(m->be.ctx, u->group_norm, tmp, y, 1, err);
}

void model_norm_conv_free(mr_model *m, mr_norm_conv *u)
{
    m->be.i->layer_free(m->be.ctx, u->conv);
    m->be.i->layer_free(m->be.ctx, u->group_norm);
    u->conv = u->group_norm = NULL;
}

void model_level_map(const mr_model *m, const mr_pooler_config *pc, mr_level_map *map)
{
    map->min_level = m->cfg.fpn.min_level;
    map->max_level = 5; /* RoIs pool from P2..P5; P6 only feeds the RPN */
    map->canonical_size = pc->canonical_size;
    map->canonical_level = pc->canonical_level;
    map->eps = pc->level_eps;
    map->plus_one = m->cfg.box.legacy_plus_one;
    map->eps_inside_log = pc->level_eps_inside_log;
}

mr_status model_roi_align(mr_model *m, const mr_pooler_config *pc, const mr_tensor *rois, mr_tensor *out,
                          mr_error *err)
{
    int n = rois->n, F = m->cfg.fpn.out_channels, R = pc->resolution;
    MR_TRY(tensor_shape(out, n, R, R, F, err));
    mr_roi_align_params p = {R, R, pc->sampling_ratio, pc->aligned, 1.0f};
    mr_level_map map;
    model_level_map(m, pc, &map);
    const mr_tensor *levels[4] = {&m->buf.p[0], &m->buf.p[1], &m->buf.p[2], &m->buf.p[3]};
    return m->be.i->roi_align(m->be.ctx, &p, &map, levels, rois, out, err);
}

/* Output size of the stride-2 steps used everywhere in the network. */
static int half_up(int x) { return (x + 1) / 2; }

/* The level at `stride` (a power of 2) for the padded max input, each
 * side halved (rounding up) once per factor of 2. */
mr_extent model_level_extent(const mr_model *m, int stride)
{
    mr_extent e = {1, m->max_h, m->max_w};
    for (int s = 1; s < stride; s *= 2) {
        e.h = half_up(e.h);
        e.w = half_up(e.w);
    }
    return e;
}

mr_status model_set_count(mr_model *m, const char *name, int count, mr_error *err)
{
    mr_buffers *b = &m->buf;
    if (strcmp(name, "proposals") == 0) {
        MR_TRY(tensor_shape(&b->proposals, count, 1, 1, 4, err));
        return tensor_shape(&b->proposal_scores, count, 1, 1, 1, err);
    }
    if (strcmp(name, "detections") == 0) {
        MR_TRY(tensor_shape(&b->detections, count, 1, 1, 4, err));
        MR_TRY(tensor_shape(&b->detection_scores, count, 1, 1, 1, err));
        return tensor_shape(&b->detection_labels, count, 1, 1, 1, err);
    }
    return mr_fail(err, MR_ERR_INTERNAL, "model_set_count: no countable tensor \"%s\"", name);
}

/* One count a backend left on the device (tensor.h) into its tensors' n. */
static mr_status count_to_host(mr_model *m, mr_tensor *const *group, int members, const char *what, mr_error *err)
{
    mr_tensor *t = group[0];
    if (!t->device_count) return MR_OK;
    int count = 0;
    MR_TRY(m->be.i->copy_to_host(m->be.ctx, &count, t->device_count, sizeof count, err));
    if (count < 0 || count > t->n)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: the backend counted %d rows of %d (its NMS over its planned "
                       "group size?)", what, count, t->n);
    for (int i = 0; i < members; i++) {
        group[i]->n = count;
        group[i]->device_count = NULL;
    }
    return MR_OK;
}

mr_status model_counts_to_host(mr_model *m, int proposals_too, mr_error *err)
{
    mr_buffers *b = &m->buf;
    mr_tensor *proposals[] = {&b->proposals, &b->proposal_scores};
    mr_tensor *detections[] = {&b->detections, &b->detection_scores, &b->detection_labels};
    if (proposals_too) MR_TRY(count_to_host(m, proposals, 2, "proposals", err));
    int had = b->detections.device_count != NULL;
    MR_TRY(count_to_host(m, detections, 3, "detections", err));
    /* the mask head ran over the capacity: its first rows are the detections' */
    if (had && b->mask_probs.n > b->detections.n) b->mask_probs.n = b->detections.n;
    return MR_OK;
}
