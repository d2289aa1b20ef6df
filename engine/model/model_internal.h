/* The model's private state, shared by model.c and the stage files
 * (resnet.c, fpn.c, rpn.c, roi_heads.c, mask_head.c). */
#ifndef MR_MODEL_INTERNAL_H
#define MR_MODEL_INTERNAL_H

#include "ops/image_preprocess.h"
#include "model/model.h"
#include "ops/nms.h"
#include "ops/roi_align.h"
#include "core/weights.h"

#define MR_STAGES 4      /* res2..res5 */
#define MR_MAX_LEVELS 5  /* P2..P6 */
/* The largest input a layer sees: n, h, w (h x w for a landscape
 * image; the backend also plans for w x h). */
typedef struct {
    int n, h, w;
} mr_extent;

#define MR_HEAD_MAX_CONVS 8 /* box, mask and RPN head convs (config ranges) */
#define MR_HEAD_MAX_FCS 4

/* How one part of the network normalises its convolutions (the config
 * section's "norm", "norm_eps", "norm_groups"); `section` names it in
 * errors. */
typedef struct {
    mr_norm_kind kind;
    float eps;
    int groups;
    const char *section;
} mr_norm_spec;

/* A convolution and its normalisation: none or a batchnorm folded into the
 * conv at load (group_norm NULL), or the conv followed by a run-time
 * GroupNorm, which then carries the ReLU and the residual sum. */
typedef struct {
    mr_layer *conv;
    mr_layer *group_norm;
} mr_norm_conv;

typedef struct {
    mr_norm_conv conv1, conv2, conv3, shortcut; /* shortcut only in block 0 */
} mr_bottleneck;

/* One head (engine/model/head_block.c): num_convs 3x3 convs (stride 1,
 * pad 1), each with its normalisation and a ReLU, then num_fcs fully
 * connected layers with a ReLU on the flattened result. The classic box head
 * (0 convs, 2 FCs), the strong baselines' 4conv1fc, the mask head's convs (4
 * convs, 0 FCs) and the RPN head's shared convs (1 or 2, no norm) are all
 * rows of this. */
typedef struct {
    int num_convs, conv_dim;
    mr_norm_spec norm;
    int num_fcs, fc_dim;
    int cin, resolution;  /* input channels; input side for the first FC (RoI heads) */
    mr_extent in;         /* the convs' largest input */
    char conv_name[MR_HEAD_MAX_CONVS][64]; /* weight prefixes; each norm is at "<conv>.norm" */
    char fc_name[MR_HEAD_MAX_FCS][64];
    /* the conv that reads the last conv's output, when only convs of its
     * kind do (the RPN's predictors); empty: none (model_norm_conv_load) */
    char last_reader[64];
} mr_head_spec;

typedef struct {
    int num_convs, num_fcs, conv_dim, fc_dim;
    mr_norm_conv conv[MR_HEAD_MAX_CONVS];
    mr_layer *fc[MR_HEAD_MAX_FCS];
} mr_head_block;

typedef struct {
    int blocks;
    int width;      /* bottleneck width (conv1/conv2 channels) */
    int out;        /* output channels (conv3) */
    int stride;     /* 1 for res2, 2 after */
    mr_bottleneck *block;
} mr_stage;

/* Activation buffers, allocated once for the largest input. */
typedef struct {
    mr_tensor input;
    mr_tensor stem, stem_pool;
    mr_tensor c[MR_STAGES], t1, t2;
    mr_tensor inner[MR_STAGES];
    mr_tensor p[MR_MAX_LEVELS];
    mr_tensor norm_tmp; /* a GroupNorm conv's output before a residual or top-down sum */
    mr_tensor rpn_hidden[2], rpn_logits[MR_MAX_LEVELS], rpn_deltas[MR_MAX_LEVELS];
    mr_tensor proposals, proposal_scores;
    mr_tensor box_feats, box_conv[2], box_fc[2], class_logits, box_deltas;
    mr_tensor detections, detection_scores, detection_labels;
    mr_tensor mask_feats, mask_a, mask_b, mask_up, mask_logits, mask_probs;
    mr_tensor final_boxes; /* original-image pixels, for the paste */
} mr_buffers;

struct mr_model {
    mr_config cfg;
    mr_backend be;
    const mr_int8_ranges *int8_ranges; /* during model_load only (model.h); NULL after */
    const mr_int8_ranges *int8_shared; /* the same: resnet_int8_streams' */
    int num_levels;        /* FPN levels min_level..max_level */
    int num_anchors;       /* per position */
    float cell_anchors[MR_MAX_LEVELS][MR_MAX_ANCHOR_RATIOS * MR_MAX_ANCHOR_SIZES * 4];

    mr_norm_conv stem;
    mr_stage stage[MR_STAGES];
    mr_norm_conv fpn_lateral[MR_STAGES], fpn_output[MR_STAGES];
    mr_head_block rpn_head;
    mr_layer *rpn_logits, *rpn_deltas;
    mr_head_block box_head;
    mr_layer *cls_score, *bbox_pred;
    mr_head_block mask_head;
    mr_layer *mask_deconv, *mask_logits;
    /* The mask predictor's weights [K,1,1,D] and bias [K] in backend memory,
     * for a backend with mask_class_probs (then mask_logits is NULL). */
    mr_tensor mask_class_weight, mask_class_bias;

    mr_input_geometry geo; /* of the current image */
    int max_h, max_w;      /* padded input size the buffers are planned for */
    int max_rois, max_dets; /* box head and mask head batches planned for */
    mr_buffers buf;        /* views into one arena, planned by lifetime at load */
    void *arena;
    size_t arena_size;
};

/* Loading helpers (model_layers.c). NaN/Inf weights are refused at load, naming
 * the layer: one would silently poison every detection. */
mr_status model_check_finite(const mr_weights *w, const char *layer, const float *v, size_t n, mr_error *err);
/* A predictor's rows per the config: `rows`, one box or mask for every class when
 * `agnostic` (config key `key`) else one per class. A file with the other form's row
 * count gets an error naming the key, not only the shapes. */
mr_status model_check_class_rows(const mr_weights *w, const char *tensor, int rows, int agnostic, int other_rows,
                                 const char *key, mr_error *err);
/* Whether the layer `prefix` stays fp32 when the backend computes in a
 * reduced precision (config "reduced_precision"; names as model.c loads
 * them): the stem, the RPN's predictors, the box head (its convs and fully
 * connected layers) and the mask head (convs, deconvolution, logits) as
 * the config says; the box predictor's class scores and deltas always. The
 * rest of the backbone, the FPN and the RPN's 3x3 conv never stay fp32. */
int model_layer_keeps_fp32(const mr_config *c, const char *prefix);

/* A fully connected layer's or the deconvolution's calibrated input range
 * and sign for the backend (mr_linear_params.int8_range), 0 where the
 * ranges (if any) have none. Missing under int8 on the CPU backend, which
 * computes these layers in int8 unless they keep fp32, it is refused,
 * naming the ranges file and the layer; CUDA's GEMMs never read it. */
mr_status model_gemm_int8_range(const mr_model *m, const char *prefix, float *range, int *is_signed,
                                mr_error *err);

/* A conv without normalisation (its bias), whose largest input is `in`. */
mr_status model_conv_layer(mr_model *m, mr_weights *w, const char *prefix, int cin, int cout, int k, int stride,
                           int pad, int relu, mr_extent in, mr_layer **out, mr_error *err);
/* A conv with its normalisation at `norm_prefix` as `norm` says (none,
 * batchnorm folded at load, or GroupNorm after it), whose largest input is
 * `in`; refused, naming the config key, when the file's normalisation is
 * not the config's. reader: the prefix of the one conv that reads this
 * one's output, when it is the only reader, or one of its readers when all
 * read it at the same range (a bottleneck's conv3: resnet_int8_streams);
 * mr_conv_params.int8_out_range; NULL otherwise (ignored under GroupNorm,
 * which reads it instead). roi_align_reads: RoIAlign reads the output too
 * (the FPN's levels; mr_conv_params.out_to_convs). */
mr_status model_norm_conv_load(mr_model *m, mr_weights *w, const char *prefix, const char *norm_prefix,
                               const mr_norm_spec *norm, const char *reader, int roi_align_reads, int cin, int cout,
                               int k, int stride, int pad, int relu, mr_extent in, mr_norm_conv *out, mr_error *err);
/* y = act(norm(conv(x)) (+ y when accumulate)); y must have the output
 * shape. Under GroupNorm with accumulate, the conv writes buf.norm_tmp. */
mr_status model_norm_conv_run(mr_model *m, const mr_norm_conv *u, const mr_tensor *x, mr_tensor *y, int accumulate,
                              mr_error *err);
void model_norm_conv_free(mr_model *m, mr_norm_conv *u);
/* A config section's normalisation. */
mr_norm_spec model_norm_spec(mr_norm_kind kind, float eps, int groups, const char *section);

/* The heads' block (head_block.c): load, run, free. head_block_forward runs
 * x [N,R,R,cin] through the convs, alternating between conv_buf[0] and [1],
 * then the FCs, alternating between fc_buf[0] and [1] (either pair may be
 * NULL when the block has no such layers); *out is the last output (x
 * itself for an empty block). */
mr_status head_block_load(mr_model *m, mr_weights *w, const mr_head_spec *spec, mr_head_block *hb, mr_error *err);
mr_status head_block_forward(mr_model *m, const mr_head_block *hb, const mr_tensor *x, mr_tensor *const *conv_buf,
                             mr_tensor *const *fc_buf, const mr_tensor **out, mr_error *err);
void head_block_free(mr_model *m, mr_head_block *hb);
/* A linear layer [out, in] (head_block.c); chw = {C, H, W}: its inputs are
 * stored in PyTorch's flatten order and permuted to NHWC's (H, W, C). */
mr_status model_linear_layer(mr_model *m, mr_weights *w, const char *prefix, int in, int out, int relu,
                             const int *chw, mr_layer **dst, mr_error *err);
/* A feature map at `stride` (a power of 2) of the largest padded input. */
mr_extent model_level_extent(const mr_model *m, int stride);

/* Per stage (resnet.c, fpn.c, rpn.c, roi_heads.c, mask_head.c). */
/* int8: the shared input range (mr_conv_params.int8_shared_range) of each
 * conv that reads a stage's output (the residual stream: its blocks'
 * conv1, the next stage's conv1 and shortcut, the FPN's lateral): the
 * largest of their calibrated ranges, for stages whose readers all have
 * one, unsigned (none under a GroupNorm trunk, whose norm writes the
 * stream). A backend can then keep the stream quantized between its
 * writers (conv3, whose residual sum reads it in place) and readers,
 * converting it once a stage instead of once a conv (bench/NOTES.md
 * section 39). `shared` lists only those readers; int8_ranges_free it. */
mr_status resnet_int8_streams(const mr_config *cfg, const mr_int8_ranges *ranges, mr_int8_ranges *shared,
                              mr_error *err);
mr_status resnet_load(mr_model *m, mr_weights *w, mr_error *err);
mr_status resnet_forward(mr_model *m, mr_error *err);
mr_status fpn_load(mr_model *m, mr_weights *w, mr_error *err);
mr_status fpn_forward(mr_model *m, mr_error *err);
mr_status rpn_load(mr_model *m, mr_weights *w, mr_error *err);
/* The RPN in two parts: the head's convolutions on every level (feature
 * maps in, logits and deltas out; replayable, backend.h), then the
 * proposal selection. */
mr_status rpn_head_forward(mr_model *m, mr_error *err);
mr_status rpn_select(mr_model *m, mr_error *err);
mr_status box_head_load(mr_model *m, mr_weights *w, mr_error *err);
mr_status box_head_forward(mr_model *m, mr_error *err);
mr_status mask_head_load(mr_model *m, mr_weights *w, mr_error *err);
mr_status mask_head_forward(mr_model *m, mr_error *err);

/* Grows the host scratch of image preprocessing (only for a new largest
 * image, so steady-state passes allocate nothing). */

/* Multi-level RoIAlign of rois [N,4] (resized-image pixels) from P2..P5
 * into out [N,R,R,F] (model_layers.c: the box and mask heads use it). */
void model_level_map(const mr_model *m, const mr_pooler_config *pc, mr_level_map *map);

/* The nms.h flags of the config's box conventions (RPN and box head NMS). */
static inline int model_nms_flags(const mr_config *c)
{
    return (c->box.legacy_plus_one ? MR_NMS_PLUS_ONE : 0) | (c->box.nms_rule == MR_NMS_RULE_GE ? MR_NMS_SUPPRESS_GE : 0);
}
mr_status model_roi_align(mr_model *m, const mr_pooler_config *pc, const mr_tensor *rois, mr_tensor *out,
                          mr_error *err);

/* Shapes a planned buffer for this image; fails if it would not fit (model_layers.c). */
/* Counts a backend kept on the device (backend.h, counts_on_device) into
 * the host n of "detections" (and the mask probabilities' rows) and, with
 * proposals_too, of "proposals": one copy each, which waits for the work
 * before it. A no-op where the counts are on the host already. */
mr_status model_counts_to_host(mr_model *m, int proposals_too, mr_error *err);

/* The paste stage's parameters (mask_head.c), and the paste on the device:
 * model_paste_on_device issues it (inside the forward unit),
 * model_result_from_block waits for it and builds the result. */
void model_paste_params(const mr_model *m, mr_mask_paste_params *p);
void model_final_box_params(const mr_model *m, mr_final_box_params *p);
mr_status model_paste_on_device(mr_model *m, mr_error *err);
mr_status model_result_from_block(mr_model *m, mr_result *res, mr_error *err);
mr_status tensor_shape(mr_tensor *t, int n, int h, int w, int c, mr_error *err);

#endif
