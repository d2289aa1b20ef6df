/* The model configuration: every architecture knob and every convention
 * that differs between Detectron, detectron2 and torchvision, read from one
 * JSON file (see configs/README.md "Config keys" for the JSON names and defaults).
 *
 * The JSON is nested by section; each struct below is one section and each
 * field one key with the same name. config_defaults() fills the defaults,
 * which are torchvision's Mask R-CNN R-101-FPN; config_load() overlays a
 * file on them. Unknown keys, wrong types and out-of-range values are
 * errors that name the key ("rpn.nms_thresh: expected a number in [0,1]"). */
#ifndef MR_CONFIG_H
#define MR_CONFIG_H

#include "core/status.h"

#define MR_MAX_CLASSES 1024
#define MR_MAX_CLASS_NAME 64
#define MR_MAX_FPN_LEVELS 6    /* P2..P7 at most */
#define MR_MAX_ANCHOR_RATIOS 8
#define MR_MAX_ANCHOR_SIZES 4  /* sizes per level */

typedef enum { MR_CHANNELS_RGB = 0, MR_CHANNELS_BGR } mr_channel_order;

/* How the resized size is computed from the input size (image_geometry in
 * engine/ops/image_preprocess.h has the exact arithmetic of each):
 *  FLOOR: torchvision (float32 scale, F.interpolate with recompute_scale_factor)
 *  ROUND: Detectron (one double scale, cv2.resize fx=fy=scale: round half even)
 *  DETECTRON2: detectron2's ResizeShortestEdge.get_output_shape (short side set
 *              to min_size, both sides capped by max_size, then int(x + 0.5))
 *  MASKRCNN_BENCHMARK: maskrcnn-benchmark's Resize.get_size (target short side
 *              lowered to round(max_size*short/long) when the long side would
 *              exceed max_size; the long side truncated, int(size*long/short)).
 *  MMDET: mmcv's rescale_size (one double scale min(max_size/long,
 *              min_size/short), each side int(side*scale + 0.5)). */
typedef enum {
    MR_RESIZE_FLOOR = 0,
    MR_RESIZE_ROUND,
    MR_RESIZE_DETECTRON2,
    MR_RESIZE_MASKRCNN_BENCHMARK,
    MR_RESIZE_MMDET
} mr_resize_rounding;

/* Which resampler makes the resized image (engine/ops/image_preprocess.h):
 *  TORCH_BILINEAR: torchvision, F.interpolate bilinear on the normalised float image
 *  PIL_BILINEAR: detectron2, Pillow's Image.resize(BILINEAR) on the uint8 image,
 *                before normalising (engine/ops/resize_pil.h)
 *  CV2_LINEAR: Detectron, cv2.resize INTER_LINEAR on the normalised float image
 *              (engine/ops/resize_cv2.h)
 *  CV2_LINEAR_UINT8: mmdetection, cv2.resize INTER_LINEAR on the uint8 image,
 *              before normalising (engine/ops/resize_cv2_uint8.h). */
typedef enum {
    MR_RESIZE_TORCH_BILINEAR = 0,
    MR_RESIZE_PIL_BILINEAR,
    MR_RESIZE_CV2_LINEAR,
    MR_RESIZE_CV2_LINEAR_UINT8
} mr_resize_method;

/* Where the anchor grid's stride comes from:
 *  PADDED_DIV_GRID: torchvision, stride = padded_image_size / feature_size
 *                   (integer division per axis; P6 at 800x1216 gets 61x64)
 *  LEVEL: Detectron/detectron2, stride = 2^level. */
typedef enum { MR_ANCHOR_STRIDE_PADDED_DIV_GRID = 0, MR_ANCHOR_STRIDE_LEVEL } mr_anchor_stride_rule;

/* How a level's cell anchors are built (anchors.h):
 *  CENTERED: torchvision / detectron2, [-w/2,-h/2,w/2,h/2] (rounded with round_base)
 *  DETECTRON: Detectron's generate_anchors, ratios enumerated on a stride x
 *             stride box with rounded sides, centred on (stride-1)/2, +1 sides. */
typedef enum { MR_ANCHOR_CELL_CENTERED = 0, MR_ANCHOR_CELL_DETECTRON } mr_anchor_cell_rule;

/* Which RPN proposals survive before NMS (proposals.h):
 *  TORCHVISION: both sides >= min_size (resized-image pixels)
 *  DETECTRON2:  both sides >  min_size (Boxes.nonempty(threshold))
 *  DETECTRON:   both sides, measured at the original scale with +1,
 *               >= max(min_size, 1), and the box centre inside the clip window. */
typedef enum { MR_RPN_MIN_SIZE_TORCHVISION = 0, MR_RPN_MIN_SIZE_DETECTRON2, MR_RPN_MIN_SIZE_DETECTRON } mr_rpn_min_size_rule;

/* The window proposals are clipped to: the resized image (torchvision,
 * detectron2) or the padded network input (Detectron's im_info). */
typedef enum { MR_CLIP_IMAGE = 0, MR_CLIP_PADDED } mr_clip_window;

/* Where detection boxes are decoded (box_post.h):
 *  RESIZED:  against the RoIs in network-input pixels, clipped to the resized
 *            image, then scaled to the original per axis (torchvision, detectron2)
 *  ORIGINAL: against RoIs / im_scale, clipped to the original image (Detectron) */
typedef enum { MR_DECODE_RESIZED = 0, MR_DECODE_ORIGINAL } mr_decode_coordinates;

typedef struct {
    mr_channel_order channel_order; /* "channel_order": "RGB" | "BGR"            */
    float pixel_scale;              /* "pixel_scale": 1/255 (torchvision) or 1   */
    float pixel_mean[3];            /* "pixel_mean": in channel_order, after scale */
    float pixel_std[3];             /* "pixel_std"                                */
    int min_size;                   /* "min_size": target short side (800)        */
    int max_size;                   /* "max_size": cap on the long side (1333)    */
    mr_resize_rounding resize_rounding; /* "resize_rounding": "floor" | "round" | "detectron2" |
                                           "maskrcnn_benchmark" | "mmdet" */
    mr_resize_method resize_method; /* "resize_method": "torch_bilinear" | "pil_bilinear" | "cv2_linear" |
                                       "cv2_linear_uint8" */
    int size_divisibility;          /* "size_divisibility": pad H, W to this (32) */
    int max_image_side;             /* "max_image_side": reject larger inputs (20000) */
    /* "canvas_h", "canvas_w": 0 (default): each image is padded to its own
     * resized size rounded up to size_divisibility. Both set (multiples of
     * size_divisibility): every image whose resized size fits is padded to
     * this one canvas instead, as torchvision pads a batch to its largest
     * image, so that every image runs on one CUDA graph (issue 36); an image
     * that does not fit keeps its own padding. Where the model reads the
     * padded size (Detectron's clip window), results change as that zoo's
     * batched padding would change them. */
    int canvas_h, canvas_w;
} mr_input_config;

/* The normalisation after a convolution (section keys "norm", "norm_eps",
 * "norm_groups"; model_layers.c):
 *  NONE: the conv's own bias (the classic FPN and heads)
 *  BATCHNORM: a per-channel affine folded into the conv at load, from a
 *             batchnorm's running statistics (FrozenBN, SyncBN and BN in eval
 *             mode are all this) or Detectron's AffineChannel scale/shift
 *  GROUP_NORM: GroupNorm(groups, C) at run time, per sample (cannot be
 *             folded; engine/ops/group_norm.h). */
typedef enum { MR_NORM_NONE = 0, MR_NORM_BATCHNORM, MR_NORM_GROUP_NORM } mr_norm_kind;

typedef struct {
    int depth;              /* "depth": 50 | 101 | 152                           */
    int stem_out_channels;  /* "stem_out_channels": 64                           */
    int res2_out_channels;  /* "res2_out_channels": 256                          */
    int num_groups;         /* "num_groups": 1 (32 for ResNeXt)                  */
    int width_per_group;    /* "width_per_group": 64                             */
    int stride_in_1x1;      /* "stride_in_1x1": false (torchvision), true (Detectron, detectron2) */
    mr_norm_kind norm;      /* "norm": "batchnorm" | "group_norm" (every trunk conv) */
    float norm_eps;         /* "norm_eps": 1e-5; of the batchnorm folded at load, or GroupNorm's */
    int norm_groups;        /* "norm_groups": 32; GroupNorm's groups            */
} mr_backbone_config;

typedef struct {
    int out_channels;       /* "out_channels": 256                               */
    int min_level;          /* "min_level": 2 (P2)                               */
    int max_level;          /* "max_level": 6 (P6 = max pool k1 s2 of P5)        */
    mr_norm_kind norm;      /* "norm": "none" | "batchnorm" | "group_norm" (lateral and output convs) */
    float norm_eps;         /* "norm_eps": 1e-5                                  */
    int norm_groups;        /* "norm_groups": 32                                 */
} mr_fpn_config;

typedef struct {
    int num_levels;                          /* rows of "sizes": one per FPN level (5) */
    int num_sizes_per_level;                 /* length of each "sizes" row     */
    float sizes[MR_MAX_FPN_LEVELS][MR_MAX_ANCHOR_SIZES]; /* "sizes": [[32],[64],[128],[256],[512]] */
    int num_ratios;
    float aspect_ratios[MR_MAX_ANCHOR_RATIOS]; /* "aspect_ratios": [0.5,1,2] (h/w) */
    mr_anchor_stride_rule stride_rule;       /* "stride_rule": "padded_div_grid" | "level" */
    float offset;                            /* "offset": centre offset in strides (0.0) */
    int round_base;                          /* "round_base": round base anchors to ints (torchvision: true) */
    mr_anchor_cell_rule cell_rule;           /* "cell_rule": "centered" | "detectron" */
} mr_anchor_config;

typedef struct {
    int num_convs;              /* "num_convs": 1; the head's 3x3 conv + ReLU layers (2: LSJ, v2) */
    double nms_thresh;          /* "nms_thresh": 0.7; double: IoU > thresh is compared as torchvision does */
    int pre_nms_top_n;          /* "pre_nms_top_n": 1000, per level              */
    int post_nms_top_n;         /* "post_nms_top_n": 1000                        */
    int post_nms_per_level;     /* "post_nms_per_level": false = per image       */
    float min_size;             /* "min_size": 1e-3 px (resized image)           */
    mr_rpn_min_size_rule min_size_rule; /* "min_size_rule": "torchvision" | "detectron2" | "detectron" */
    mr_clip_window clip_window; /* "clip_window": "image" | "padded"             */
    float score_thresh;         /* "score_thresh": 0.0 (on sigmoid)              */
    int rank_by_logit;          /* "rank_by_logit": false; NMS ranks by logit (detectron2), not sigmoid */
    float box_weights[4];       /* "box_weights": [1,1,1,1]                      */
} mr_rpn_config;

typedef struct {
    int resolution;             /* "resolution": 7 (box), 14 (mask)              */
    int sampling_ratio;         /* "sampling_ratio": 2; 0 = adaptive             */
    int aligned;                /* "aligned": false (legacy: no -0.5 shift)      */
    int canonical_size;         /* "canonical_size": 224                         */
    int canonical_level;        /* "canonical_level": 4                          */
    float level_eps;            /* "level_eps": 1e-6                             */
    int level_eps_inside_log;   /* "level_eps_inside_log": false (torchvision adds eps after log2;
                                   Detectron and detectron2 inside: log2(s/224 + eps)) */
} mr_pooler_config;

typedef struct {
    mr_pooler_config pooler;    /* "pooler": {...}                               */
    int num_convs;              /* "num_convs": 0; 3x3 convs (+ norm) + ReLU on the RoI features (4conv1fc: 4) */
    int conv_dim;               /* "conv_dim": 256; their channels               */
    int num_fcs;                /* "num_fcs": 2; fully connected + ReLU layers after them (4conv1fc: 1) */
    int fc_dim;                 /* "fc_dim": 1024                                */
    mr_norm_kind norm;          /* "norm": "none" | "batchnorm" | "group_norm" (the convs) */
    float norm_eps;             /* "norm_eps": 1e-5                              */
    int norm_groups;            /* "norm_groups": 32                             */
    float box_weights[4];       /* "box_weights": [10,10,5,5]                    */
    float score_thresh;         /* "score_thresh": 0.05                          */
    double nms_thresh;          /* "nms_thresh": 0.5                             */
    int agnostic_nms;           /* "agnostic_nms": false; true: after the per-class NMS, NMS over all
                                   classes (a box overlapping a higher-scored one of any class goes) */
    double agnostic_nms_thresh; /* "agnostic_nms_thresh": its IoU; absent from the file: nms_thresh */
    float min_size;             /* "min_size": 1e-2 px                           */
    int detections_per_image;   /* "detections_per_image": 100                   */
    int keep_ties;              /* "keep_ties": false; true keeps all scores equal to the last kept (Detectron) */
    mr_decode_coordinates decode_coordinates; /* "decode_coordinates": "resized" | "original" */
    int clip_final_boxes;       /* "clip_final_boxes": false; true clips the boxes scaled to the original
                                   image and drops empty ones (detectron2's detector_postprocess) */
    int class_agnostic_regression; /* "class_agnostic_regression": false; true: one box (4 deltas) per RoI
                                   for every class (detectron2 CLS_AGNOSTIC_BBOX_REG, mmdet reg_class_agnostic) */
} mr_box_head_config;

typedef enum { MR_MASK_THRESH_GT = 0, MR_MASK_THRESH_GE } mr_mask_thresh_rule;

/* When NMS suppresses a box (RPN and box head): IoU > thresh (torchvision,
 * detectron2, maskrcnn-benchmark's CUDA kernel) or IoU >= (float)thresh
 * (Detectron's utils/cython_nms.pyx). */
typedef enum { MR_NMS_RULE_GT = 0, MR_NMS_RULE_GE } mr_nms_rule;

/* How a 28x28 mask is pasted (mask_paste.h): "torchvision" (pad, expand the
 * box, integer window, bilinear resize; Detectron's cv2 paste is the same
 * algorithm) or "detectron2" (grid_sample at pixel centres of the float box). */
typedef enum { MR_MASK_PASTE_TORCHVISION = 0, MR_MASK_PASTE_DETECTRON2 } mr_mask_paste_rule;

typedef struct {
    mr_pooler_config pooler;    /* "pooler": {...} (resolution 14)               */
    int num_convs;              /* "num_convs": 4                                */
    int conv_dim;               /* "conv_dim": 256                               */
    mr_norm_kind norm;          /* "norm": "none" | "batchnorm" | "group_norm" (the convs) */
    float norm_eps;             /* "norm_eps": 1e-5                              */
    int norm_groups;            /* "norm_groups": 32                             */
    float threshold;            /* "threshold": 0.5                              */
    mr_mask_thresh_rule threshold_rule; /* "threshold_rule": ">" | ">="           */
    int paste_padding;          /* "paste_padding": 1 (pad 28->30, expand box 30/28; torchvision rule) */
    mr_mask_paste_rule paste_rule; /* "paste_rule": "torchvision" | "detectron2" */
    int class_agnostic;         /* "class_agnostic": false; true: one mask logit channel for every class
                                   (detectron2 CLS_AGNOSTIC_MASK, mmdet class_agnostic) */
} mr_mask_head_config;

/* Which side of the decoded dw, dh bbox_xform_clip bounds (box_coder.h):
 * UPPER: min(d, clip) (torchvision, Detectron, detectron2);
 * SYMMETRIC: clamp(d, -clip, clip) (mmdetection's delta2bbox, max_ratio). */
typedef enum { MR_XFORM_CLIP_UPPER = 0, MR_XFORM_CLIP_SYMMETRIC } mr_xform_clip_rule;

typedef struct {
    int legacy_plus_one;        /* "legacy_plus_one": false; Detectron's w = x2-x1+1 */
    mr_nms_rule nms_rule;       /* "nms_rule": ">" | ">="; Detectron's cython_nms suppresses at IoU >= thresh */
    float bbox_xform_clip;      /* "bbox_xform_clip": log(1000/16)               */
    mr_xform_clip_rule bbox_xform_clip_rule; /* "bbox_xform_clip_rule": "upper" | "symmetric" */
} mr_box_config;

typedef struct {
    int num_classes;            /* "num_classes": including background (81)      */
    char class_names[MR_MAX_CLASSES][MR_MAX_CLASS_NAME]; /* "class_names": [...], index 0 = background */
} mr_classes_config;

/* Which parts of the network compute in reduced precision when a run asks
 * for it (the CPU's --precision bf16 or int8). The rest of the backbone, the
 * FPN and the RPN's 3x3 conv always do; each part here was measured by the
 * demo model's AP and by time (bench/NOTES.md sections 34, 35 and 39). The box
 * predictor (class scores, box deltas), box decoding, NMS, RoIAlign and the
 * paste are fp32 whatever these say. */
typedef struct {
    int stem;                   /* "stem": false; the 7x7 conv on the image       */
    int rpn_predictors;         /* "rpn_predictors": true; objectness and box deltas (1x1) */
    int box_head;               /* "box_head": true; its convs (4conv1fc) and fully connected layers */
    int mask_head;              /* "mask_head": true; its 3x3 convs, the deconvolution and the 1x1 mask logits */
} mr_reduced_precision_config;

typedef struct {
    char name[128];             /* "name": free text                             */
    mr_input_config input;      /* "input"                                       */
    mr_backbone_config backbone;/* "backbone"                                    */
    mr_fpn_config fpn;          /* "fpn"                                         */
    mr_anchor_config anchors;   /* "anchors"                                     */
    mr_rpn_config rpn;          /* "rpn"                                         */
    mr_box_config box;          /* "box"                                         */
    mr_box_head_config box_head;/* "box_head"                                    */
    mr_mask_head_config mask_head; /* "mask_head"                                */
    mr_classes_config classes;  /* "classes"                                     */
    mr_reduced_precision_config reduced_precision; /* "reduced_precision"        */
} mr_config;

void config_defaults(mr_config *cfg);

/* Reads `path`, overlays it on the defaults and validates the result.
 * On failure *cfg is left as it was. */
mr_status config_load(mr_config *cfg, const char *path, mr_error *err);

/* The same from a JSON string (tests, fuzzing); `origin` names it in errors. */
mr_status config_parse(mr_config *cfg, const char *json, const char *origin, mr_error *err);

/* Checks every range and cross-key rule on a filled struct (config_load and
 * config_parse call it; call it again after changing fields by hand).
 * `origin` names the config in the message. */
mr_status config_validate(const mr_config *cfg, const char *origin, mr_error *err);

/* Blocks per stage res2..res5 for the configured depth (3,4,23,3 for 101). */
void config_stage_blocks(const mr_config *cfg, int blocks[4]);

#endif
