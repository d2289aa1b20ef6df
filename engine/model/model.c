/* Loading, buffer planning and the end-to-end pass: the driver, which calls
 * the stages (resnet.c, fpn.c, rpn.c, roi_heads.c, mask_head.c); the
 * helpers those share sit below them all in model_layers.c. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "core/clock.h"

/* The activation plan: every tensor with its size and the stages during
 * which it is alive; tensors whose lives do not overlap share memory in one
 * arena (C2..C5 are dead once the FPN has run, the backbone's temporaries
 * once it has finished, and so on). */
enum { ST_INPUT, ST_BACKBONE, ST_FPN, ST_RPN, ST_BOX, ST_MASK, ST_PASTE };

typedef struct {
    mr_tensor *t;
    size_t bytes, offset;
    int first, last; /* stages, inclusive */
} plan_item;

#define MAX_PLAN_ITEMS 64

typedef struct {
    plan_item item[MAX_PLAN_ITEMS];
    int count;
    mr_elem_type feature; /* the backend's feature_dtype */
} plan;

/* A tensor of `elements` of type dtype (the backend's feature type for
 * feature maps, MR_ELEM_F32 for what detection ops read and write). */
static void plan_add_typed(plan *p, mr_tensor *t, size_t elements, mr_elem_type dtype, int first, int last)
{
    plan_item *it = &p->item[p->count++];
    it->t = t;
    it->t->cap = elements;
    it->t->dtype = dtype;
    it->bytes = (mr_elem_size(dtype) * (elements ? elements : 1) + 63) & ~(size_t)63;
    it->first = first;
    it->last = last;
}

static void plan_add(plan *p, mr_tensor *t, size_t elements, int first, int last)
{
    plan_add_typed(p, t, elements, MR_ELEM_F32, first, last);
}

/* A feature map (backend.h, feature_dtype). */
static void plan_feature(plan *p, mr_tensor *t, size_t elements, int first, int last)
{
    plan_add_typed(p, t, elements, p->feature, first, last);
}

/* Greedy placement, largest first, at the lowest offset that collides with
 * no placed tensor alive at the same time. Returns the arena size. */
static size_t plan_place(plan *p)
{
    int order[MAX_PLAN_ITEMS], placed[MAX_PLAN_ITEMS], np = 0;
    for (int i = 0; i < p->count; i++) order[i] = i;
    for (int i = 1; i < p->count; i++)
        for (int j = i; j > 0 && p->item[order[j]].bytes > p->item[order[j - 1]].bytes; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    size_t total = 0;
    for (int i = 0; i < p->count; i++) {
        plan_item *it = &p->item[order[i]];
        size_t offset = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int k = 0; k < np; k++) {
                const plan_item *o = &p->item[placed[k]];
                int alive = o->first <= it->last && it->first <= o->last;
                if (alive && offset < o->offset + o->bytes && o->offset < offset + it->bytes) {
                    offset = o->offset + o->bytes;
                    moved = 1;
                }
            }
        }
        it->offset = offset;
        placed[np++] = order[i];
        if (offset + it->bytes > total) total = offset + it->bytes;
    }
    return total;
}

/* Elements of one channel of the level at `stride` for the largest input;
 * the same in either orientation, since each side is halved on its own. */
static size_t level_area(const mr_model *m, int stride)
{
    mr_extent e = model_level_extent(m, stride);
    return (size_t)e.h * (size_t)e.w;
}

/* The largest input and batch sizes, known before any layer is loaded
 * (each layer's init is told its largest input). */
static void plan_limits(mr_model *m)
{
    const mr_config *c = &m->cfg;
    int div = c->input.size_divisibility > 0 ? c->input.size_divisibility : 1;
    m->max_h = (c->input.min_size + div - 1) / div * div;
    m->max_w = (c->input.max_size + div - 1) / div * div;
    /* a canvas (config.h) larger than the largest padded image: the buffers
     * hold it in either orientation, as they hold every input */
    int canvas_short = c->input.canvas_h < c->input.canvas_w ? c->input.canvas_h : c->input.canvas_w;
    int canvas_long = c->input.canvas_h < c->input.canvas_w ? c->input.canvas_w : c->input.canvas_h;
    if (canvas_short > m->max_h) m->max_h = canvas_short;
    if (canvas_long > m->max_w) m->max_w = canvas_long;
    m->max_rois = c->rpn.post_nms_top_n * (c->rpn.post_nms_per_level ? m->num_levels : 1);
    /* Detectron's tie rule may keep a few more than detections_per_image. */
    m->max_dets = c->box_head.detections_per_image * (c->box_head.keep_ties ? 2 : 1);
}

/* What the backend must plan for (backend.h), once all layers exist. */
static mr_status plan_backend(mr_model *m, mr_error *err)
{
    const mr_config *c = &m->cfg;
    mr_backend_plan p;
    memset(&p, 0, sizeof p);
    p.max_h = m->max_h;
    p.max_w = m->max_w;
    p.num_levels = m->num_levels;
    p.num_anchors = m->num_anchors;
    for (int l = 0; l < m->num_levels && l < MR_PROPOSAL_MAX_LEVELS; l++)
        p.level_anchors[l] = (int)(level_area(m, 4 << l) * (size_t)m->num_anchors);
    p.pre_nms_top_n = c->rpn.pre_nms_top_n;
    p.post_nms_top_n = c->rpn.post_nms_top_n;
    p.post_nms_per_level = c->rpn.post_nms_per_level;
    p.max_rois = m->max_rois;
    p.max_dets = m->max_dets;
    p.num_classes = c->classes.num_classes;
    p.mask_size = 2 * c->mask_head.pooler.resolution;
    p.mask_padding = c->mask_head.paste_padding;
    p.max_image_side = c->input.max_image_side;
    return m->be.i->plan(m->be.ctx, &p, err);
}

static mr_status plan_buffers(mr_model *m, mr_error *err)
{
    const mr_config *c = &m->cfg;
    mr_buffers *b = &m->buf;
    int F = c->fpn.out_channels, K = c->classes.num_classes, A = m->num_anchors;
    size_t a2 = level_area(m, 2), a4 = level_area(m, 4);
    size_t rois = (size_t)m->max_rois, dets = (size_t)m->max_dets;
    size_t R2 = (size_t)c->box_head.pooler.resolution * (size_t)c->box_head.pooler.resolution;
    size_t M2 = (size_t)c->mask_head.pooler.resolution * (size_t)c->mask_head.pooler.resolution;
    size_t MD = (size_t)c->mask_head.conv_dim;
    plan p = {0};
    p.feature = m->be.i->feature_dtype ? m->be.i->feature_dtype(m->be.ctx) : MR_ELEM_F32;

    plan_feature(&p, &b->input, level_area(m, 1) * 3, ST_INPUT, ST_BACKBONE);
    plan_feature(&p, &b->stem, a2 * (size_t)c->backbone.stem_out_channels, ST_BACKBONE, ST_BACKBONE);
    plan_feature(&p, &b->stem_pool, a4 * (size_t)c->backbone.stem_out_channels, ST_BACKBONE, ST_BACKBONE);
    size_t t1 = 0;
    for (int s = 0; s < MR_STAGES; s++) {
        const mr_stage *st = &m->stage[s];
        size_t in_area = level_area(m, 4 << (s ? s - 1 : 0)), out_area = level_area(m, 4 << s);
        plan_feature(&p, &b->c[s], out_area * (size_t)st->out, ST_BACKBONE, ST_FPN);
        plan_feature(&p, &b->inner[s], out_area * (size_t)F, ST_FPN, ST_FPN);
        if (in_area * (size_t)st->width > t1) t1 = in_area * (size_t)st->width;
    }
    plan_feature(&p, &b->t1, t1, ST_BACKBONE, ST_BACKBONE);
    /* a GroupNorm conv's output before its residual (the trunk) or top-down
     * (the FPN) sum: at most the largest stage output or lateral */
    size_t norm_tmp = 0;
    for (int s = 0; s < MR_STAGES; s++) {
        size_t area = level_area(m, 4 << s);
        if (c->backbone.norm == MR_NORM_GROUP_NORM && area * (size_t)m->stage[s].out > norm_tmp)
            norm_tmp = area * (size_t)m->stage[s].out;
        if (c->fpn.norm == MR_NORM_GROUP_NORM && area * (size_t)F > norm_tmp) norm_tmp = area * (size_t)F;
    }
    plan_feature(&p, &b->norm_tmp, norm_tmp, ST_BACKBONE, ST_FPN);
    plan_feature(&p, &b->t2, t1, ST_BACKBONE, ST_BACKBONE);
    for (int l = 0; l < m->num_levels; l++) {
        size_t area = level_area(m, 4 << l);
        plan_feature(&p, &b->p[l], area * (size_t)F, ST_FPN, ST_MASK);
        plan_add(&p, &b->rpn_logits[l], area * (size_t)A, ST_RPN, ST_RPN);
        plan_add(&p, &b->rpn_deltas[l], area * (size_t)A * 4, ST_RPN, ST_RPN);
    }
    for (int i = 0; i < 2; i++) /* the RPN head's convs, alternating */
        plan_feature(&p, &b->rpn_hidden[i], i < c->rpn.num_convs ? a4 * (size_t)F : 0, ST_RPN, ST_RPN);
    plan_add(&p, &b->proposals, rois * 4, ST_RPN, ST_BOX);
    plan_add(&p, &b->proposal_scores, rois, ST_RPN, ST_BOX);
    plan_feature(&p, &b->box_feats, rois * R2 * (size_t)F, ST_BOX, ST_BOX);
    const mr_box_head_config *bh = &c->box_head;
    for (int i = 0; i < 2; i++) { /* the box head's convs, then its FCs, each alternating between two */
        plan_feature(&p, &b->box_conv[i], i < bh->num_convs ? rois * R2 * (size_t)bh->conv_dim : 0, ST_BOX, ST_BOX);
        plan_feature(&p, &b->box_fc[i], i < bh->num_fcs ? rois * (size_t)bh->fc_dim : 0, ST_BOX, ST_BOX);
    }
    plan_add(&p, &b->class_logits, rois * (size_t)K, ST_BOX, ST_BOX);
    plan_add(&p, &b->box_deltas, rois * (size_t)K * 4, ST_BOX, ST_BOX);
    plan_add(&p, &b->detections, dets * 4, ST_BOX, ST_PASTE);
    plan_add(&p, &b->detection_scores, dets, ST_BOX, ST_PASTE);
    plan_add(&p, &b->detection_labels, dets, ST_BOX, ST_PASTE);
    plan_feature(&p, &b->mask_feats, dets * M2 * (size_t)F, ST_MASK, ST_MASK);
    plan_feature(&p, &b->mask_a, dets * M2 * MD, ST_MASK, ST_MASK);
    plan_feature(&p, &b->mask_b, dets * M2 * MD, ST_MASK, ST_MASK);
    plan_feature(&p, &b->mask_up, dets * 4 * M2 * MD, ST_MASK, ST_MASK);
    /* every class's logits only where the backend has no mask_class_probs */
    plan_add(&p, &b->mask_logits, m->mask_logits ? dets * 4 * M2 * (size_t)K : 0, ST_MASK, ST_MASK);
    plan_add(&p, &b->mask_probs, dets * 4 * M2, ST_MASK, ST_PASTE);
    /* Written by the box head when boxes are decoded in original pixels (Detectron). */
    plan_add(&p, &b->final_boxes, dets * 4, ST_BOX, ST_PASTE);

    m->arena_size = plan_place(&p);
    void *arena = NULL;
    mr_status st = m->be.i->buffer_alloc(m->be.ctx, m->arena_size, &arena, err);
    if (st != MR_OK) {
        mr_error_prefix(err, "the activations for %dx%d inputs", m->max_h, m->max_w);
        return st;
    }
    m->arena = arena;
    for (int i = 0; i < p.count; i++) p.item[i].t->data = (float *)((char *)arena + p.item[i].offset);
    return MR_OK;
}

/* A tensor of the network's own layers that the config did not load: a
 * second RPN conv under rpn.num_convs 1, box head convs under
 * box_head.num_convs 0, a fifth mask conv. Running without it would give
 * quietly wrong detections, so it is refused, naming the keys; tensors
 * outside the network's names only get a warning (model_load). */
static mr_status check_unused_layers(const mr_weights *w, mr_error *err)
{
    static const char *const network[] = {"backbone.", "fpn.", "rpn.", "box_head.", "box_predictor.", "mask_head."};
    for (int i = 0; i < w->count; i++) {
        if (w->entries[i].used) continue;
        for (size_t k = 0; k < sizeof network / sizeof network[0]; k++)
            if (strncmp(w->entries[i].name, network[k], strlen(network[k])) == 0)
                return mr_fail(err, MR_ERR_CONFIG, "%s: tensor \"%s\" is a layer this config does not run: the "
                               "config's architecture keys (backbone.depth, rpn.num_convs, box_head.num_convs and "
                               "num_fcs, mask_head.num_convs; configs/README.md) must describe the weights", w->path,
                               w->entries[i].name);
    }
    return MR_OK;
}

/* The int8 ranges' check: weights_fingerprint reads all of the weights in
 * one serial multiply chain (55 ms at full size), on a thread of its own
 * while the layers load, the other core being idle then (bench/NOTES.md
 * section 40). */
typedef struct {
    const mr_weights *w;
    uint64_t fingerprint;
} fingerprint_job;

static void *fingerprint_run(void *arg)
{
    fingerprint_job *job = arg;
    job->fingerprint = weights_fingerprint(job->w);
    return NULL;
}

mr_status model_load(mr_model **out, const mr_config *cfg, const char *weights_path, mr_backend backend,
                     const mr_int8_ranges *int8_ranges, mr_error *err)
{
    *out = NULL;
    mr_model *m = calloc(1, sizeof *m);
    if (!m) return mr_fail(err, MR_ERR_OOM, "out of memory");
    m->cfg = *cfg;
    m->be = backend;
    m->int8_ranges = int8_ranges;
    m->num_levels = cfg->fpn.max_level - cfg->fpn.min_level + 1;
    plan_limits(m);
    mr_weights w;
    mr_status st = weights_open(&w, weights_path, err);
    if (st != MR_OK) {
        free(m);
        return st;
    }
    mr_int8_ranges shared = {0};
    fingerprint_job job = {&w, 0};
    pthread_t fingerprint_thread;
    int fingerprint_async = int8_ranges && pthread_create(&fingerprint_thread, NULL, fingerprint_run, &job) == 0;
    if (int8_ranges && !fingerprint_async) fingerprint_run(&job);
    if (int8_ranges) {
        st = resnet_int8_streams(cfg, int8_ranges, &shared, err);
        m->int8_shared = &shared;
    }
    if (st == MR_OK) st = resnet_load(m, &w, err);
    if (st == MR_OK) st = fpn_load(m, &w, err);
    if (st == MR_OK) st = rpn_load(m, &w, err);
    if (st == MR_OK) st = box_head_load(m, &w, err);
    if (st == MR_OK) st = mask_head_load(m, &w, err);
    if (fingerprint_async) pthread_join(fingerprint_thread, NULL);
    /* ranges of other weights are what the user must hear of, whatever
     * else failed with them */
    if (int8_ranges) {
        mr_status checked = int8_ranges_check_weights(int8_ranges, &w, job.fingerprint, err);
        if (checked != MR_OK) st = checked;
    }
    if (st == MR_OK) st = check_unused_layers(&w, err);
    if (st == MR_OK) {
        char unused[512];
        int n = weights_unused(&w, unused, sizeof unused);
        if (n) fprintf(stderr, "detect: warning: %s: %d tensors not used by this config: %s%s\n", weights_path, n,
                       unused, strlen(unused) >= sizeof unused - 1 ? "..." : "");
    }
    weights_close(&w);
    m->int8_ranges = NULL;
    m->int8_shared = NULL;
    int8_ranges_free(&shared);
    if (st == MR_OK) st = plan_buffers(m, err);
    if (st == MR_OK) st = plan_backend(m, err);
    if (st != MR_OK) {
        model_free(m);
        return st;
    }
    *out = m;
    return MR_OK;
}

void model_free(mr_model *m)
{
    if (!m) return;
    const mr_backend_i *be = m->be.i;
    void *ctx = m->be.ctx;
    model_norm_conv_free(m, &m->stem);
    for (int s = 0; s < MR_STAGES; s++) {
        for (int b = 0; m->stage[s].block && b < m->stage[s].blocks; b++) {
            mr_bottleneck *k = &m->stage[s].block[b];
            model_norm_conv_free(m, &k->conv1);
            model_norm_conv_free(m, &k->conv2);
            model_norm_conv_free(m, &k->conv3);
            model_norm_conv_free(m, &k->shortcut);
        }
        free(m->stage[s].block);
        model_norm_conv_free(m, &m->fpn_lateral[s]);
        model_norm_conv_free(m, &m->fpn_output[s]);
    }
    head_block_free(m, &m->rpn_head);
    head_block_free(m, &m->box_head);
    head_block_free(m, &m->mask_head);
    mr_layer *heads[] = {m->rpn_logits, m->rpn_deltas, m->cls_score, m->bbox_pred, m->mask_deconv, m->mask_logits};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) be->layer_free(ctx, heads[i]);
    if (m->mask_class_weight.data) be->buffer_free(ctx, m->mask_class_weight.data);
    if (m->arena) be->buffer_free(ctx, m->arena);
    free(m);
}

const mr_config *model_config(const mr_model *m) { return &m->cfg; }

void model_input_size(const mr_model *m, int in_h, int in_w, int *padded_h, int *padded_w)
{
    mr_input_geometry g;
    mr_error ignored = {0};
    int ok = image_geometry(&m->cfg.input, in_h, in_w, &g, &ignored) == MR_OK;
    *padded_h = ok ? g.padded_h : 0;
    *padded_w = ok ? g.padded_w : 0;
}

mr_status model_stage_input(mr_model *m, const mr_image *img, int in_h, int in_w, mr_error *err)
{
    MR_TRY(image_geometry(&m->cfg.input, in_h, in_w, &m->geo, err));
    MR_TRY(tensor_shape(&m->buf.input, 1, m->geo.padded_h, m->geo.padded_w, 3, err));
    if (!img) return MR_OK;
    return m->be.i->preprocess(m->be.ctx, &m->cfg.input, img, &m->geo, &m->buf.input, err);
}

/* A stage's feature-map ops as one replayable unit (backend.h): their
 * shapes all follow from the padded input's, which is the key. */
typedef struct {
    mr_model *m;
    mr_status (*forward)(mr_model *m, mr_error *err);
} stage_call;

static mr_status stage_call_run(void *arg, mr_error *err)
{
    stage_call *s = arg;
    return s->forward(s->m, err);
}

static mr_status replayable_stage(mr_model *m, const char *name, mr_status (*forward)(mr_model *, mr_error *),
                                  mr_error *err)
{
    if (!m->be.i->replayable) return forward(m, err);
    stage_call s = {m, forward};
    uint64_t key = (uint64_t)(uint32_t)m->geo.padded_h << 32 | (uint32_t)m->geo.padded_w;
    return m->be.i->replayable(m->be.ctx, name, key, stage_call_run, &s, err);
}

/* The stage by stage path (stage_runner) shows each stage's rows as they
 * are: counts a backend kept on the device come to the host after it. */
mr_status model_stage_backbone(mr_model *m, mr_error *err) { return replayable_stage(m, "backbone", resnet_forward, err); }
mr_status model_stage_fpn(mr_model *m, mr_error *err) { return replayable_stage(m, "fpn", fpn_forward, err); }
mr_status model_stage_rpn(mr_model *m, mr_error *err)
{
    MR_TRY(replayable_stage(m, "rpn_head", rpn_head_forward, err));
    MR_TRY(rpn_select(m, err));
    return model_counts_to_host(m, 1, err);
}
mr_status model_stage_box_head(mr_model *m, mr_error *err)
{
    MR_TRY(box_head_forward(m, err));
    return model_counts_to_host(m, 1, err);
}
mr_status model_stage_mask_head(mr_model *m, mr_error *err) { return mask_head_forward(m, err); }

mr_tensor *model_tensor(mr_model *m, const char *name)
{
    mr_buffers *b = &m->buf;
    struct { const char *name; mr_tensor *t; } table[] = {
        {"input", &b->input}, {"c2", &b->c[0]}, {"c3", &b->c[1]}, {"c4", &b->c[2]}, {"c5", &b->c[3]},
        {"p2", &b->p[0]}, {"p3", &b->p[1]}, {"p4", &b->p[2]}, {"p5", &b->p[3]}, {"p6", &b->p[4]},
        {"proposals", &b->proposals}, {"proposal_scores", &b->proposal_scores},
        {"class_logits", &b->class_logits}, {"box_deltas", &b->box_deltas},
        {"detections", &b->detections}, {"detection_scores", &b->detection_scores},
        {"detection_labels", &b->detection_labels}, {"mask_probs", &b->mask_probs},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].t->data ? table[i].t : NULL;
    return NULL;
}

/* Stage times: marks between the stages (backend.h, stage_mark), or,
 * for a backend without them, a sync and the host clock at each. */
enum { MARK_START, MARK_INPUT, MARK_BACKBONE, MARK_FPN, MARK_RPN, MARK_BOX, MARK_MASK, MARK_PASTE, MARKS };

typedef struct {
    mr_model *m;
    const mr_image *img;
    double host[MARKS];
} stage_clock;

static mr_status mark(stage_clock *clk, int k, mr_error *err)
{
    mr_model *m = clk->m;
    if (m->be.i->stage_mark) return m->be.i->stage_mark(m->be.ctx, k, err);
    MR_TRY(m->be.i->sync(m->be.ctx, err));
    clk->host[k] = mr_seconds();
    return MR_OK;
}

/* The backbone to the mask probabilities, marking each stage's end; the
 * feature-map stages are replayable units of their own, keyed by the
 * padded size. Inside a replayable "forward" (below) they only nest:
 * captured with it, replayed with it. When "forward" runs op by op (its
 * first image, or a capture that failed), they still replay their graphs. */
static mr_status staged_span(stage_clock *clk, mr_error *err)
{
    mr_model *m = clk->m;
    MR_TRY(model_stage_backbone(m, err));
    MR_TRY(mark(clk, MARK_BACKBONE, err));
    MR_TRY(model_stage_fpn(m, err));
    MR_TRY(mark(clk, MARK_FPN, err));
    MR_TRY(replayable_stage(m, "rpn_head", rpn_head_forward, err));
    MR_TRY(rpn_select(m, err));
    MR_TRY(mark(clk, MARK_RPN, err));
    MR_TRY(box_head_forward(m, err));
    MR_TRY(mark(clk, MARK_BOX, err));
    MR_TRY(mask_head_forward(m, err));
    return mark(clk, MARK_MASK, err);
}

/* The network input (model_stage_input has set the geometry) to the
 * pasted masks, marking each stage's end. */
static mr_status forward_span(void *arg, mr_error *err)
{
    stage_clock *clk = arg;
    mr_model *m = clk->m;
    MR_TRY(m->be.i->preprocess(m->be.ctx, &m->cfg.input, clk->img, &m->geo, &m->buf.input, err));
    MR_TRY(mark(clk, MARK_INPUT, err));
    MR_TRY(staged_span(clk, err));
    return m->be.i->paste_on_device ? model_paste_on_device(m, err) : MR_OK;
}

/* Where the backend keeps counts on the device, everything from the
 * preprocessing to the pasted masks is one replayable unit: one CUDA graph per
 * padded input size (which fixes every shape; what else differs between
 * images, their own sizes, the backend reads from its memory), with nothing
 * waiting for the host inside it; the host then waits once and copies the
 * result out of the backend's block (paste_block). Detectron's
 * decoding in original pixels takes a host round trip in the box head
 * (roi_heads.c), so that convention runs stage by stage; so does a backend
 * without stage_mark (the host clock would need a sync inside the unit). */
static int whole_span(const mr_model *m)
{
    const mr_backend_i *be = m->be.i;
    return be->replayable && be->stage_mark && be->counts_on_device && be->counts_on_device(m->be.ctx) &&
           m->cfg.box_head.decode_coordinates != MR_DECODE_ORIGINAL;
}

mr_status model_detect(mr_model *m, const mr_image *img, mr_result *res, mr_stage_times *times, mr_error *err)
{
    memset(res, 0, sizeof *res);
    stage_clock clk;
    memset(&clk, 0, sizeof clk);
    clk.m = m;
    clk.img = img;
    MR_TRY(mark(&clk, MARK_START, err));
    if (whole_span(m)) {
        MR_TRY(model_stage_input(m, NULL, img->h, img->w, err)); /* the geometry, whose padded size keys the unit */
        uint64_t key = (uint64_t)(uint32_t)m->geo.padded_h << 32 | (uint32_t)m->geo.padded_w;
        MR_TRY(m->be.i->replayable(m->be.ctx, "forward", key, forward_span, &clk, err));
    } else {
        MR_TRY(model_stage_input(m, img, img->h, img->w, err));
        MR_TRY(mark(&clk, MARK_INPUT, err));
        MR_TRY(staged_span(&clk, err));
    }
    if (whole_span(m) && m->be.i->paste_on_device)
        MR_TRY(model_result_from_block(m, res, err));
    else
        MR_TRY(model_stage_paste(m, res, NULL, err));
    mr_status st = mark(&clk, MARK_PASTE, err);
    double s[MARKS - 1] = {0};
    if (st == MR_OK && m->be.i->stage_mark) st = m->be.i->stage_seconds(m->be.ctx, MARKS, s, err);
    else
        for (int k = 0; k + 1 < MARKS; k++) s[k] = clk.host[k + 1] - clk.host[k];
    if (st != MR_OK) {
        result_free(res);
        return st;
    }
    mr_stage_times t = {s[0], s[1], s[2], s[3], s[4], s[5], s[6]};
    if (times) *times = t;
    return MR_OK;
}
