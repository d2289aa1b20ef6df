/* The config's data: its defaults (torchvision's Mask R-CNN R-101-FPN) and
 * the table of JSON keys with their types and ranges. The parser and the
 * validator that walk the table are in config.c. */
#include "core/config_table.h"

#include <math.h>
#include <string.h>

/* Enums are stored through an int pointer. */
_Static_assert(sizeof(mr_channel_order) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_resize_rounding) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_resize_method) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_anchor_stride_rule) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_mask_thresh_rule) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_anchor_cell_rule) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_rpn_min_size_rule) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_clip_window) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_decode_coordinates) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_mask_paste_rule) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_nms_rule) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_norm_kind) == sizeof(int), "enum size");
_Static_assert(sizeof(mr_xform_clip_rule) == sizeof(int), "enum size");

const char *const cfg_coco_names[CFG_COCO_NUM_CLASSES] = {
    "__background__", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck",
    "boat", "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat",
    "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
};

static void set_pooler(mr_pooler_config *p, int resolution)
{
    p->resolution = resolution;
    p->sampling_ratio = 2;
    p->aligned = 0;
    p->canonical_size = 224;
    p->canonical_level = 4;
    p->level_eps = 1e-6;
}

/* Double literals assigned to floats, exactly as the parser converts JSON
 * numbers, so a file spelling out the defaults gives identical bits. */
void config_defaults(mr_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->name, "mask_rcnn_R-101-FPN_torchvision");

    mr_input_config *in = &cfg->input;
    in->channel_order = MR_CHANNELS_RGB;
    in->pixel_scale = 1.0 / 255.0;
    in->pixel_mean[0] = 0.485;
    in->pixel_mean[1] = 0.456;
    in->pixel_mean[2] = 0.406;
    in->pixel_std[0] = 0.229;
    in->pixel_std[1] = 0.224;
    in->pixel_std[2] = 0.225;
    in->min_size = 800;
    in->max_size = 1333;
    in->resize_rounding = MR_RESIZE_FLOOR;
    in->resize_method = MR_RESIZE_TORCH_BILINEAR;
    in->size_divisibility = 32;
    in->max_image_side = 20000;

    mr_backbone_config *bb = &cfg->backbone;
    bb->depth = 101;
    bb->stem_out_channels = 64;
    bb->res2_out_channels = 256;
    bb->num_groups = 1;
    bb->width_per_group = 64;
    bb->stride_in_1x1 = 0;
    bb->norm = MR_NORM_BATCHNORM;
    bb->norm_eps = 1e-5;
    bb->norm_groups = 32;

    cfg->fpn.out_channels = 256;
    cfg->fpn.min_level = 2;
    cfg->fpn.max_level = 6;
    cfg->fpn.norm = MR_NORM_NONE;
    cfg->fpn.norm_eps = 1e-5;
    cfg->fpn.norm_groups = 32;

    mr_anchor_config *an = &cfg->anchors;
    an->num_levels = 5;
    an->num_sizes_per_level = 1;
    for (int l = 0; l < 5; l++) an->sizes[l][0] = (float)(32 << l);
    an->num_ratios = 3;
    an->aspect_ratios[0] = 0.5;
    an->aspect_ratios[1] = 1.0;
    an->aspect_ratios[2] = 2.0;
    an->stride_rule = MR_ANCHOR_STRIDE_PADDED_DIV_GRID;
    an->offset = 0.0;
    an->round_base = 1;

    mr_rpn_config *rpn = &cfg->rpn;
    rpn->num_convs = 1;
    rpn->pre_nms_top_n = 1000;
    rpn->post_nms_top_n = 1000;
    rpn->post_nms_per_level = 0;
    rpn->nms_thresh = 0.7;
    rpn->min_size = 1e-3;
    rpn->score_thresh = 0.0;
    for (int i = 0; i < 4; i++) rpn->box_weights[i] = 1.0;

    cfg->box.legacy_plus_one = 0;
    cfg->box.bbox_xform_clip = log(1000.0 / 16.0);
    cfg->box.bbox_xform_clip_rule = MR_XFORM_CLIP_UPPER;

    mr_box_head_config *bh = &cfg->box_head;
    set_pooler(&bh->pooler, 7);
    bh->num_convs = 0;
    bh->conv_dim = 256;
    bh->num_fcs = 2;
    bh->fc_dim = 1024;
    bh->norm = MR_NORM_NONE;
    bh->norm_eps = 1e-5;
    bh->norm_groups = 32;
    bh->box_weights[0] = 10.0;
    bh->box_weights[1] = 10.0;
    bh->box_weights[2] = 5.0;
    bh->box_weights[3] = 5.0;
    bh->score_thresh = 0.05;
    bh->nms_thresh = 0.5;
    bh->agnostic_nms = 0;
    bh->agnostic_nms_thresh = 0.5; /* = nms_thresh; config.c follows a file's nms_thresh */
    bh->min_size = 1e-2;
    bh->detections_per_image = 100;
    bh->keep_ties = 0;
    bh->class_agnostic_regression = 0;

    mr_mask_head_config *mh = &cfg->mask_head;
    set_pooler(&mh->pooler, 14);
    mh->num_convs = 4;
    mh->conv_dim = 256;
    mh->norm = MR_NORM_NONE;
    mh->norm_eps = 1e-5;
    mh->norm_groups = 32;
    mh->threshold = 0.5;
    mh->threshold_rule = MR_MASK_THRESH_GT;
    mh->paste_padding = 1;
    mh->class_agnostic = 0;

    /* bf16/int8 leave fp32 where the demo model's AP allows it and it pays (bench/NOTES.md
     * sections 34 and 35): the box and mask heads do; the stem and the RPN predictors stay fp32 */
    cfg->reduced_precision.stem = 0;
    cfg->reduced_precision.rpn_predictors = 1;
    cfg->reduced_precision.box_head = 1;
    cfg->reduced_precision.mask_head = 1;

    cfg->classes.num_classes = CFG_COCO_NUM_CLASSES;
    for (int i = 0; i < CFG_COCO_NUM_CLASSES; i++)
        strcpy(cfg->classes.class_names[i], cfg_coco_names[i]);
}

/* ---- the key table ---------------------------------------------------- */

static const char *const channel_order_names[] = {
    [MR_CHANNELS_RGB] = "RGB", [MR_CHANNELS_BGR] = "BGR", NULL};
static const char *const resize_rounding_names[] = {
    [MR_RESIZE_FLOOR] = "floor", [MR_RESIZE_ROUND] = "round", [MR_RESIZE_DETECTRON2] = "detectron2",
    [MR_RESIZE_MASKRCNN_BENCHMARK] = "maskrcnn_benchmark", [MR_RESIZE_MMDET] = "mmdet",
    NULL};
static const char *const resize_method_names[] = {[MR_RESIZE_TORCH_BILINEAR] = "torch_bilinear",
                                                  [MR_RESIZE_PIL_BILINEAR] = "pil_bilinear",
                                                  [MR_RESIZE_CV2_LINEAR] = "cv2_linear",
                                                  [MR_RESIZE_CV2_LINEAR_UINT8] = "cv2_linear_uint8", NULL};
static const char *const stride_rule_names[] = {
    [MR_ANCHOR_STRIDE_PADDED_DIV_GRID] = "padded_div_grid", [MR_ANCHOR_STRIDE_LEVEL] = "level", NULL};
static const char *const threshold_rule_names[] = {
    [MR_MASK_THRESH_GT] = ">", [MR_MASK_THRESH_GE] = ">=", NULL};
static const char *const cell_rule_names[] = {
    [MR_ANCHOR_CELL_CENTERED] = "centered", [MR_ANCHOR_CELL_DETECTRON] = "detectron", NULL};
static const char *const min_size_rule_names[] = {[MR_RPN_MIN_SIZE_TORCHVISION] = "torchvision",
                                                  [MR_RPN_MIN_SIZE_DETECTRON2] = "detectron2",
                                                  [MR_RPN_MIN_SIZE_DETECTRON] = "detectron", NULL};
static const char *const clip_window_names[] = {[MR_CLIP_IMAGE] = "image", [MR_CLIP_PADDED] = "padded", NULL};
static const char *const decode_coordinates_names[] = {
    [MR_DECODE_RESIZED] = "resized", [MR_DECODE_ORIGINAL] = "original", NULL};
static const char *const paste_rule_names[] = {
    [MR_MASK_PASTE_TORCHVISION] = "torchvision", [MR_MASK_PASTE_DETECTRON2] = "detectron2", NULL};
static const char *const nms_rule_names[] = {[MR_NMS_RULE_GT] = ">", [MR_NMS_RULE_GE] = ">=", NULL};
static const char *const xform_clip_rule_names[] = {
    [MR_XFORM_CLIP_UPPER] = "upper", [MR_XFORM_CLIP_SYMMETRIC] = "symmetric", NULL};
static const char *const norm_names[] = {
    [MR_NORM_NONE] = "none", [MR_NORM_BATCHNORM] = "batchnorm", [MR_NORM_GROUP_NORM] = "group_norm", NULL};
static const int depth_choices[] = {50, 101, 152, 0};

#define FIELD(S, F) .name = #F, .offset = offsetof(S, F), .size = sizeof(((S *)0)->F)
#define K_INT(S, F, LO, HI) {FIELD(S, F), .type = CFG_INT, .min = (LO), .max = (HI)}
#define K_BOOL(S, F) {FIELD(S, F), .type = CFG_BOOL}
#define K_FLOAT(S, F, LO, HI) {FIELD(S, F), .type = CFG_FLOAT, .min = (LO), .max = (HI)}
#define K_DOUBLE(S, F, LO, HI) {FIELD(S, F), .type = CFG_DOUBLE, .min = (LO), .max = (HI)}
#define K_POS_FLOAT(S, F, HI) {FIELD(S, F), .type = CFG_FLOAT, .min = 0, .min_open = 1, .max = (HI)}
#define K_FLOATS(S, F, LO, HI) {FIELD(S, F), .type = CFG_FLOATS, .min = (LO), .max = (HI)}
#define K_POS_FLOATS(S, F, HI) {FIELD(S, F), .type = CFG_FLOATS, .min = 0, .min_open = 1, .max = (HI)}
#define K_ENUM(S, F, NAMES) {FIELD(S, F), .type = CFG_ENUM, .names = (NAMES)}
#define K_STRING(S, F) {FIELD(S, F), .type = CFG_STRING}
#define K_SECTION(S, F, SEC) {FIELD(S, F), .type = CFG_SECTION, .section = &(SEC)}
#define SECTION(S, KEYS) {#S, sizeof(S), KEYS, (int)(sizeof KEYS / sizeof KEYS[0])}

/* Ranges are what the engine accepts, wide enough for any zoo model; they
 * exist to turn typos (negative sizes, a threshold of 7) into errors. */
static const cfg_key input_keys[] = {
    K_ENUM(mr_input_config, channel_order, channel_order_names),
    K_POS_FLOAT(mr_input_config, pixel_scale, 1),
    K_FLOATS(mr_input_config, pixel_mean, -65536, 65536),
    K_POS_FLOATS(mr_input_config, pixel_std, 65536),
    K_INT(mr_input_config, min_size, 1, 65536),
    K_INT(mr_input_config, max_size, 1, 65536),
    K_ENUM(mr_input_config, resize_rounding, resize_rounding_names),
    K_ENUM(mr_input_config, resize_method, resize_method_names),
    K_INT(mr_input_config, size_divisibility, 1, 1024),
    K_INT(mr_input_config, max_image_side, 1, 65536),
    K_INT(mr_input_config, canvas_h, 0, 65536),
    K_INT(mr_input_config, canvas_w, 0, 65536),
};

static const cfg_key backbone_keys[] = {
    {FIELD(mr_backbone_config, depth), .type = CFG_INT, .min = 50, .max = 152, .choices = depth_choices},
    K_INT(mr_backbone_config, stem_out_channels, 1, 4096),
    K_INT(mr_backbone_config, res2_out_channels, 1, 8192),
    K_INT(mr_backbone_config, num_groups, 1, 1024),
    K_INT(mr_backbone_config, width_per_group, 1, 4096),
    K_BOOL(mr_backbone_config, stride_in_1x1),
    K_ENUM(mr_backbone_config, norm, norm_names),
    K_FLOAT(mr_backbone_config, norm_eps, 0, 1),
    K_INT(mr_backbone_config, norm_groups, 1, 4096),
};

static const cfg_key fpn_keys[] = {
    K_INT(mr_fpn_config, out_channels, 1, 4096),
    K_INT(mr_fpn_config, min_level, 2, 6),
    K_INT(mr_fpn_config, max_level, 2, 6),
    K_ENUM(mr_fpn_config, norm, norm_names),
    K_FLOAT(mr_fpn_config, norm_eps, 0, 1),
    K_INT(mr_fpn_config, norm_groups, 1, 4096),
};

static const cfg_key anchor_keys[] = {
    {FIELD(mr_anchor_config, sizes), .type = CFG_ANCHOR_SIZES, .min = 0, .min_open = 1, .max = 65536},
    {FIELD(mr_anchor_config, aspect_ratios), .type = CFG_FLOAT_LIST, .min = 0, .min_open = 1, .max = 1000,
     .count_offset = offsetof(mr_anchor_config, num_ratios)},
    K_ENUM(mr_anchor_config, stride_rule, stride_rule_names),
    K_FLOAT(mr_anchor_config, offset, 0, 1),
    K_BOOL(mr_anchor_config, round_base),
    K_ENUM(mr_anchor_config, cell_rule, cell_rule_names),
};

static const cfg_key rpn_keys[] = {
    K_INT(mr_rpn_config, num_convs, 1, 8),
    K_INT(mr_rpn_config, pre_nms_top_n, 1, 1000000),
    K_INT(mr_rpn_config, post_nms_top_n, 1, 1000000),
    K_BOOL(mr_rpn_config, post_nms_per_level),
    K_DOUBLE(mr_rpn_config, nms_thresh, 0, 1),
    K_FLOAT(mr_rpn_config, min_size, 0, 65536),
    K_ENUM(mr_rpn_config, min_size_rule, min_size_rule_names),
    K_ENUM(mr_rpn_config, clip_window, clip_window_names),
    K_FLOAT(mr_rpn_config, score_thresh, 0, 1),
    K_BOOL(mr_rpn_config, rank_by_logit),
    K_POS_FLOATS(mr_rpn_config, box_weights, 1000),
};

static const cfg_key box_keys[] = {
    K_BOOL(mr_box_config, legacy_plus_one),
    K_ENUM(mr_box_config, nms_rule, nms_rule_names),
    K_POS_FLOAT(mr_box_config, bbox_xform_clip, 64),
    K_ENUM(mr_box_config, bbox_xform_clip_rule, xform_clip_rule_names),
};

static const cfg_key pooler_keys[] = {
    K_INT(mr_pooler_config, resolution, 1, 64),
    K_INT(mr_pooler_config, sampling_ratio, 0, 64),
    K_BOOL(mr_pooler_config, aligned),
    K_INT(mr_pooler_config, canonical_size, 1, 65536),
    K_INT(mr_pooler_config, canonical_level, 1, 16),
    K_FLOAT(mr_pooler_config, level_eps, 0, 1),
    K_BOOL(mr_pooler_config, level_eps_inside_log),
};
static const cfg_section pooler_section = SECTION(mr_pooler_config, pooler_keys);

static const cfg_key box_head_keys[] = {
    K_SECTION(mr_box_head_config, pooler, pooler_section),
    K_INT(mr_box_head_config, num_convs, 0, 8),
    K_INT(mr_box_head_config, conv_dim, 1, 4096),
    K_INT(mr_box_head_config, num_fcs, 1, 4),
    K_INT(mr_box_head_config, fc_dim, 1, 65536),
    K_ENUM(mr_box_head_config, norm, norm_names),
    K_FLOAT(mr_box_head_config, norm_eps, 0, 1),
    K_INT(mr_box_head_config, norm_groups, 1, 4096),
    K_POS_FLOATS(mr_box_head_config, box_weights, 1000),
    K_FLOAT(mr_box_head_config, score_thresh, 0, 1),
    K_DOUBLE(mr_box_head_config, nms_thresh, 0, 1),
    K_BOOL(mr_box_head_config, agnostic_nms),
    K_DOUBLE(mr_box_head_config, agnostic_nms_thresh, 0, 1),
    K_FLOAT(mr_box_head_config, min_size, 0, 65536),
    K_INT(mr_box_head_config, detections_per_image, 1, 100000),
    K_BOOL(mr_box_head_config, keep_ties),
    K_ENUM(mr_box_head_config, decode_coordinates, decode_coordinates_names),
    K_BOOL(mr_box_head_config, clip_final_boxes),
    K_BOOL(mr_box_head_config, class_agnostic_regression),
};

static const cfg_key mask_head_keys[] = {
    K_SECTION(mr_mask_head_config, pooler, pooler_section),
    K_INT(mr_mask_head_config, num_convs, 0, 8),
    K_INT(mr_mask_head_config, conv_dim, 1, 4096),
    K_ENUM(mr_mask_head_config, norm, norm_names),
    K_FLOAT(mr_mask_head_config, norm_eps, 0, 1),
    K_INT(mr_mask_head_config, norm_groups, 1, 4096),
    K_FLOAT(mr_mask_head_config, threshold, 0, 1),
    K_ENUM(mr_mask_head_config, threshold_rule, threshold_rule_names),
    K_INT(mr_mask_head_config, paste_padding, 0, 64),
    K_ENUM(mr_mask_head_config, paste_rule, paste_rule_names),
    K_BOOL(mr_mask_head_config, class_agnostic),
};

static const cfg_key classes_keys[] = {
    K_INT(mr_classes_config, num_classes, 2, MR_MAX_CLASSES),
    {FIELD(mr_classes_config, class_names), .type = CFG_CLASS_NAMES},
};

static const cfg_key reduced_precision_keys[] = {
    K_BOOL(mr_reduced_precision_config, stem),
    K_BOOL(mr_reduced_precision_config, rpn_predictors),
    K_BOOL(mr_reduced_precision_config, box_head),
    K_BOOL(mr_reduced_precision_config, mask_head),
};

static const cfg_section input_section = SECTION(mr_input_config, input_keys);
static const cfg_section backbone_section = SECTION(mr_backbone_config, backbone_keys);
static const cfg_section fpn_section = SECTION(mr_fpn_config, fpn_keys);
static const cfg_section anchor_section = SECTION(mr_anchor_config, anchor_keys);
static const cfg_section rpn_section = SECTION(mr_rpn_config, rpn_keys);
static const cfg_section box_section = SECTION(mr_box_config, box_keys);
static const cfg_section box_head_section = SECTION(mr_box_head_config, box_head_keys);
static const cfg_section mask_head_section = SECTION(mr_mask_head_config, mask_head_keys);
static const cfg_section classes_section = SECTION(mr_classes_config, classes_keys);
static const cfg_section reduced_precision_section = SECTION(mr_reduced_precision_config, reduced_precision_keys);

static const cfg_key root_keys[] = {
    K_STRING(mr_config, name),
    K_SECTION(mr_config, input, input_section),
    K_SECTION(mr_config, backbone, backbone_section),
    K_SECTION(mr_config, fpn, fpn_section),
    K_SECTION(mr_config, anchors, anchor_section),
    K_SECTION(mr_config, rpn, rpn_section),
    K_SECTION(mr_config, box, box_section),
    K_SECTION(mr_config, box_head, box_head_section),
    K_SECTION(mr_config, mask_head, mask_head_section),
    K_SECTION(mr_config, classes, classes_section),
    K_SECTION(mr_config, reduced_precision, reduced_precision_section),
};

const cfg_section cfg_root = SECTION(mr_config, root_keys);
