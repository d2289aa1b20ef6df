/* The backend interface: what the model code (resnet.c, fpn.c, rpn.c,
 * roi_heads.c, mask_head.c) may ask of a device. One table of function
 * pointers plus a context, like ggml's ggml_backend_i: the CPU backend
 * (engine/cpu/) implements it with oneDNN and OpenMP, the CUDA backend
 * (cuda/) with cuDNN, cuBLAS and kernels. The model is written once against
 * this table; backend_registry.h opens a backend by name.
 *
 * Memory: tensors passed to these ops live in the backend's memory
 * (buffer_alloc). Layers (convolutions, linear layers, GroupNorms) are
 * prepared once at load time from host weights in PyTorch layouts (OIHW,
 * [out,in], per-channel vectors); the backend keeps them in whatever layout
 * it runs fastest.
 *
 * The detection ops (roi_align, rpn_proposals, box_detections, mask_probs,
 * mask_paste) take the params struct of their op header; each backend
 * implements them with the per-element math in that header, so both
 * compute the same numbers. Their scratch belongs to the backend. */
#ifndef MR_BACKEND_H
#define MR_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ops/box_post.h"
#include "ops/final_boxes.h"
#include "ops/group_norm.h"
#include "core/image_types.h"
#include "ops/mask_paste.h"
#include "ops/proposals.h"
#include "ops/roi_align.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct mr_layer mr_layer; /* a backend-prepared conv, linear, deconv or GroupNorm layer */

/* The most stage_mark calls in one forward pass (model_detect uses 8). */
#define MR_STAGE_MARKS 8

/* Convolution, NHWC in and out, with its bias (a folded batchnorm) and
 * optional fused residual sum and ReLU in the same output pass:
 *   y = act(conv(x, W) + bias + (accumulate ? y_before : 0))
 * max_n, max_h, max_w: the largest input the layer will see, in either
 * orientation (h x w or w x h: images come landscape and portrait); the
 * backend sizes its scratch for it at load (cuDNN's workspace query).
 * 0 = not known (tests): scratch then grows on first use, until plan. */
enum { MR_OUT_CONVS = 1, MR_OUT_CONVS_AND_ROI_ALIGN = 2 };

typedef struct {
    int cin, cout;
    int kh, kw;
    int stride, pad, dilation, groups;
    int relu;
    int max_n, max_h, max_w;
    int keep_fp32; /* 1: fp32 whatever the backend's precision (the stem, predictors: config
                      reduced_precision); 0: the backend's precision */
    /* int8 (a backend computing in int8, for a layer not keep_fp32): the
     * input's clip range from calibration (core/int8_ranges.h), and
     * whether the input can be negative (s8, else u8). 0: none given. */
    float int8_range;
    int int8_signed;
    /* The same of the convs that read this layer's output, when they all
     * read it at that range: its one reader (a bottleneck's conv1 and
     * conv2), or the readers of the residual stream that a bottleneck's
     * conv3 adds into (the model gives them one range). A backend computing
     * them in int8 may then hand the output over quantized (and, where the
     * layer accumulates, sum in that form), as long as any other reader
     * still sees fp32. 0: no such readers. */
    float int8_out_range;
    int int8_out_signed;
    /* MR_OUT_CONVS: every reader of this layer's output is a conv that does
     * not keep fp32 (a bottleneck's conv1 and conv2, whose one reader is
     * the next; conv3, writing the residual stream), so a backend computing
     * them in bf16 may hand the output over in bf16 (and sum in it where
     * the layer accumulates), as long as any other reader still sees fp32.
     * MR_OUT_CONVS_AND_ROI_ALIGN: such convs and RoIAlign (the FPN's
     * levels), which a backend may feed bf16 too. 0: other readers. */
    int out_to_convs;
    /* int8: the range every reader of this layer's input reads it at when
     * the map is handed over quantized (a stage's residual stream, whose
     * readers the model gives one range: the largest of theirs); 0: none.
     * A backend that hands maps over quantizes the input by it; one that
     * does not keeps int8_range, the layer's own, which is finer. */
    float int8_shared_range;
} mr_conv_params;

/* Calibration's view of a convolution's input: called by the backend with
 * the layer's name and its fp32 input (count values; in whatever layout
 * the backend holds it, which a range does not depend on) before the
 * convolution runs. */
typedef void (*mr_conv_observer)(void *user, const char *layer, const float *x, size_t count);

/* Fully connected: y[n, out] = act(x[n, in] * W^T + b). keep_fp32,
 * int8_range and int8_signed as for mr_conv_params (a backend computing in
 * bf16 or int8 runs a layer that is not keep_fp32 so, int8 with its
 * input's calibrated range). */
typedef struct {
    int in, out;
    int relu;
    int keep_fp32;
    float int8_range;
    int int8_signed;
} mr_linear_params;

/* Transposed convolution with kernel 2 and stride 2 (mask head): every
 * output pixel gets exactly one input pixel, so it is one GEMM
 * [N*H*W, cin] x [cin, 4*cout] and a depth-to-space copy. */
typedef struct {
    int cin, cout;
    int relu;
    int max_n, max_h, max_w; /* largest input, as for mr_conv_params */
    int keep_fp32;           /* and the precision, as for mr_linear_params */
    float int8_range;
    int int8_signed;
} mr_deconv2x2_params;

typedef struct {
    int kernel, stride, pad;
} mr_pool_params;

/* What the model will ask of the backend at most, handed over once at
 * load (after every layer is initialised) so the backend can allocate all
 * its scratch then and nothing during a forward pass. The layers' own
 * largest shapes come with their init (max_n/h/w above). */
typedef struct {
    int max_h, max_w;       /* padded input, either orientation */
    int num_levels;         /* RPN levels */
    int num_anchors;        /* A, anchors per position */
    int level_anchors[MR_PROPOSAL_MAX_LEVELS]; /* largest H*W*A per level */
    int pre_nms_top_n, post_nms_top_n, post_nms_per_level;
    int max_rois;           /* box head batch (RPN output rows) */
    int max_dets;           /* detection rows (box_detections' out_capacity), the mask head's batch */
    int num_classes;        /* K, background included */
    int mask_size, mask_padding; /* the pasted masks: M (mask_probs' side) and the paste padding */
    int max_image_side;     /* the original image's largest side (input.max_image_side) */
} mr_backend_plan;

/* A backend's warming up to new shapes (replayable): the outermost units
 * it met anew (a (name, key) pair: with counts on the device, one per
 * padded input size), those recorded (a graph), the recordings that failed
 * (the pass then ran op by op), the units given up (op by op for good), and
 * the host seconds spent in the passes before a unit replays (op by op,
 * then the capture). */
typedef struct {
    int units_met, recorded, failed, given_up;
    double warm_seconds;
} mr_replay_stats;

typedef struct {
    const char *name;

    void (*destroy)(void *ctx);

    /* Device memory for activations; a zeroed block of `bytes`. */
    mr_status (*buffer_alloc)(void *ctx, size_t bytes, void **out, mr_error *err);
    void (*buffer_free)(void *ctx, void *ptr);
    mr_status (*copy_to_device)(void *ctx, void *dst, const void *src, size_t bytes, mr_error *err);
    mr_status (*copy_to_host)(void *ctx, void *dst, const void *src, size_t bytes, mr_error *err);
    /* Waits for queued work (a no-op on the CPU). */
    mr_status (*sync)(void *ctx, mr_error *err);

    /* The element type of the feature maps the model plans for this
     * backend (NULL: MR_ELEM_F32; the CPU backend). The feature maps are
     * the network input, the backbone, FPN and RPN-conv maps, the RoIAlign
     * outputs and the box and mask heads' hidden layers; each layer and
     * memory op then takes and gives that type. Everything a detection op
     * reads or writes stays MR_ELEM_F32: the RPN's logits and deltas, the
     * box predictor's outputs, the mask logits and probabilities, boxes,
     * scores, labels. The layers that produce those from a feature map (1x1
     * convs, linear layers) take MR_ELEM_F16 in and give MR_ELEM_F32 out
     * where the type is MR_ELEM_F16: the output tensor's dtype says which. */
    mr_elem_type (*feature_dtype)(void *ctx);

    /* A stage's run of feature-map ops whose shapes `key` determines and
     * that reads nothing back to the host (the backbone, the FPN, the RPN
     * head's convolutions): fn(arg, err) issues them. A backend may record
     * what fn issues the second time it meets (name, key) and from then on
     * replay the record in one launch (the CUDA backend's graphs), still
     * calling fn first so that the model's own bookkeeping (tensor shapes)
     * runs; while it replays, the ops fn calls only return. Inside fn only
     * conv, group_norm, max_pool and upsample_nearest may be called. NULL:
     * the model calls fn itself. */
    mr_status (*replayable)(void *ctx, const char *name, uint64_t key, mr_status (*fn)(void *arg, mr_error *err),
                            void *arg, mr_error *err);

    /* Counts on the device (NULL, or 0: no). When 1, rpn_proposals and
     * box_detections leave their outputs' n at the capacity and write the
     * row count into backend memory (the outputs' device_count, tensor.h);
     * roi_align, box_detections and mask_probs read a device_count where
     * their input has one, and treat the rows past it as padding (roi_align
     * writes zeros there, so the layers after it compute on finite
     * numbers). Nothing then waits for the host from the preprocessing to
     * the pasted masks (with paste_on_device), and the model hands that
     * whole span to replayable as one unit ("forward", keyed by the padded
     * input size, which fixes every shape; a backend that records the unit
     * must read what else differs between images of that size, their own
     * sizes in the ops' parameters, from its memory at each replay, as the
     * CUDA backend does); inside it preprocess (whose host half, staging
     * the image, runs at each call, replay or not) and every op of the
     * forward pass may be called. Without paste_on_device the model copies the
     * detection count to the host once, in the paste stage. */
    int (*counts_on_device)(void *ctx);

    /* Stage timing that does not wait (NULL: the model synchronises after
     * each stage and reads the host clock). stage_mark(k) notes the moment
     * the work issued so far is done (a GPU event; inside a replayable unit
     * it is recorded with it, and replays with it); stage_seconds waits for
     * the last of `marks` marks and gives the time between consecutive
     * marks, seconds[k] = mark k+1 - mark k. */
    mr_status (*stage_mark)(void *ctx, int mark, mr_error *err);
    mr_status (*stage_seconds)(void *ctx, int marks, double *seconds, mr_error *err);

    /* Sizes every scratch buffer from p and the layers initialised so far
     * (called once, after the last *_init). After it, an op that would need
     * more than was planned fails; it never allocates. */
    mr_status (*plan)(void *ctx, const mr_backend_plan *p, mr_error *err);

    /* Layers, prepared at load time. `name` is used in error messages. */
    mr_status (*conv_init)(void *ctx, const char *name, const mr_conv_params *p,
                           const float *w_oihw, const float *bias, mr_layer **out, mr_error *err);
    /* A conv followed by a per-channel affine (a batchnorm or Detectron's
     * AffineChannel), given unfolded:
     *   y = act(conv(x, W)*scale + (bias*scale + shift) (+ residual))
     * bias may be NULL (0). A backend folds it into W and the bias at load
     * (affine_fold.h), or keeps W and applies the affine after the conv
     * (the CUDA backend's --no-fold). */
    mr_status (*conv_init_affine)(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                                  const float *bias, const float *scale, const float *shift, mr_layer **out,
                                  mr_error *err);
    mr_status (*linear_init)(void *ctx, const char *name, const mr_linear_params *p,
                             const float *w_out_in, const float *bias, mr_layer **out, mr_error *err);
    /* w is PyTorch's ConvTranspose2d layout [cin, cout, 2, 2]. */
    mr_status (*deconv2x2_init)(void *ctx, const char *name, const mr_deconv2x2_params *p,
                                const float *w_io22, const float *bias, mr_layer **out, mr_error *err);
    /* GroupNorm (ops/group_norm.h) with its per-channel gamma and beta, prepared at load. */
    mr_status (*group_norm_init)(void *ctx, const char *name, const mr_group_norm_params *p, const float *gamma,
                                 const float *beta, mr_layer **out, mr_error *err);
    void (*layer_free)(void *ctx, mr_layer *layer);

    /* y must already have the output shape; accumulate adds into y. */
    mr_status (*conv)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err);
    mr_status (*linear)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
    mr_status (*deconv2x2)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
    /* y = act(group_norm(x) * gamma + beta + (accumulate ? y_before : 0)); x and y NHWC of the same shape,
     * distinct buffers (x == y allowed only when accumulate is 0). */
    mr_status (*group_norm)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate,
                            mr_error *err);
    mr_status (*max_pool)(void *ctx, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, mr_error *err);
    /* y = nearest-neighbour resize of x to y's H, W (PyTorch's "nearest"). */
    mr_status (*upsample_nearest)(void *ctx, const mr_tensor *x, mr_tensor *y, mr_error *err);

    /* Multi-level RoIAlign: rois [N,1,1,4] (resized-image pixels) sampled
     * from levels[roi_level - map->min_level] into out [N,R,R,C]. */
    mr_status (*roi_align)(void *ctx, const mr_roi_align_params *p, const mr_level_map *map,
                           const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err);
    /* Proposal selection (proposals.h) from the RPN head's per-level NHWC
     * logits [1,H,W,A] and deltas [1,H,W,4A]; sets boxes->n and scores->n. */
    mr_status (*rpn_proposals)(void *ctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                               const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err);
    /* Box post-processing (box_post.h); sets the outputs' n. */
    mr_status (*box_detections)(void *ctx, const mr_box_post_params *p, const mr_tensor *rois,
                                const mr_tensor *logits, const mr_tensor *deltas, mr_tensor *boxes,
                                mr_tensor *scores, mr_tensor *labels, mr_error *err);
    /* probs[d] = sigmoid(logits[d, :, :, labels[d]]): logits [D,M,M,K], probs [D,M,M,1]. */
    mr_status (*mask_probs)(void *ctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                            mr_error *err);
    /* The mask predictor (a 1x1 convolution C -> K) for only the class each
     * detection reports, then the sigmoid:
     *   probs[d, y, x] = sigmoid(bias[l] + sum_c x[d, y, x, c] * weight[l, c]), l = labels[d]
     * x [D,M,M,C] (NHWC), weight [K,1,1,C] ([K, C, 1, 1] as PyTorch stores
     * it), bias [K,1,1,1], labels [D,1,1,1], probs [D,M,M,1]. A K-th of the
     * work of conv then mask_probs, which the model runs instead where a
     * backend leaves this NULL. */
    mr_status (*mask_class_probs)(void *ctx, const mr_tensor *x, const mr_tensor *weight, const mr_tensor *bias,
                                  const mr_tensor *labels, mr_tensor *probs, mr_error *err);
    /* Pastes probs [D,M,M,1] at boxes [D,1,1,4] (original-image pixels),
     * each only over its window win[d] (mask_paste_window of the same box,
     * computed by the caller from its host copy of the boxes): binary into
     * the host buffer masks, and, when soft is not NULL, the probabilities
     * into the host buffer soft (tests). Both hold the windows back to back
     * in order, window d at the sum of the earlier windows' pixels, each
     * row-major (mask_paste.h). */
    mr_status (*mask_paste)(void *ctx, const mr_mask_paste_params *p, const mr_tensor *probs,
                            const mr_tensor *boxes, int img_h, int img_w, const mr_mask_window *win, uint8_t *masks,
                            float *soft, mr_error *err);

    /* The paste stage without the host (NULL: the model's paste, above),
     * for detections whose count is on the device (boxes in network-input
     * pixels, scores, labels, probs [cap,M,M,1]): each final box (fb,
     * ops/final_boxes.h) into final_boxes and the result block, its window
     * (mask_paste_window), the windows' offsets back to back, and each
     * mask pasted into its window in the block's mask region
     * (mask_paste.h's mr_paste_block_*). Nothing waits: it may run inside
     * the replayable unit. paste_block then waits for it and shows the
     * block (backend memory the host reads; valid until the next pass).
     * When the windows overflow the mask region, nothing was pasted and
     * the caller pastes them with mask_paste from final_boxes. */
    mr_status (*paste_on_device)(void *ctx, const mr_mask_paste_params *p, const mr_final_box_params *fb,
                                 const mr_tensor *boxes, const mr_tensor *scores, const mr_tensor *labels,
                                 const mr_tensor *probs, mr_tensor *final_boxes, mr_error *err);
    mr_status (*paste_block)(void *ctx, const mr_paste_block_header **header, const mr_paste_block_row **rows,
                             const uint8_t **masks, mr_error *err);

    /* Calibration: from now on (fn NULL: no longer) every conv shows its
     * input to fn before it runs. NULL where the backend cannot (CUDA):
     * calibration runs on the CPU in fp32. */
    void (*observe_conv_inputs)(void *ctx, mr_conv_observer fn, void *user);

    /* The network input from a decoded image: img (host, uint8 [in_h, in_w, 3])
     * resized, normalised and zero-padded by cfg and geo (image_geometry) into
     * input [1, padded_h, padded_w, 3] in backend memory, as image_preprocess
     * computes it (image.h: bit for bit on both backends). */
    mr_status (*preprocess)(void *ctx, const mr_input_config *cfg, const mr_image *img,
                            const mr_input_geometry *geo, mr_tensor *input, mr_error *err);

    /* Device memory (NULL where the backend has none of its own: the CPU):
     * the device's free and total bytes now, and *used, what this context
     * holds: the device's free bytes when it opened minus those now. That
     * counts what the libraries allocate for it too (cuDNN, cuBLAS, graphs),
     * and is exact when nothing else allocates on the device meanwhile, as
     * when a model opens its contexts one after another (detect.h, in
     * flight). Several contexts may run at once, each from its own thread:
     * a backend keeps nothing per thread between calls. */
    mr_status (*device_memory)(void *ctx, size_t *used, size_t *free_bytes, size_t *total, mr_error *err);

    /* What replayable met so far (NULL: a backend that records nothing):
     * see mr_replay_stats. */
    mr_status (*replay_stats)(void *ctx, mr_replay_stats *out);
} mr_backend_i;

typedef struct {
    const mr_backend_i *i;
    void *ctx;
} mr_backend;

#endif
