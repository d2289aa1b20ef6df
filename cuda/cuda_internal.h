/* Internals shared by the CUDA backend's files (not part of the API).
 *
 * Layout of the backend:
 *   backend_cuda.c          context, buffers, copies, the table
 *   backend_cuda_common.c   the helpers every file calls: errors, launch checks, allocation
 *   backend_cuda_weights.c  layer objects, weight and bias uploads (every layer kind)
 *   backend_cuda_layers.c   conv (cuDNN)
 *   backend_cuda_gemm.c     linear, deconv2x2 and the fp16->fp32 1x1 convs (cuBLAS)
 *   backend_cuda_norm.c     group_norm (its layer: gamma and beta on the device)
 *   backend_cuda_graph.c    replayable stages as CUDA graphs
 *   backend_cuda_detect.c   max_pool, upsample, roi_align, mask_probs, mask_paste
 *   backend_cuda_post.c     rpn_proposals and box_detections wholly on the GPU
 *                           (only the count comes back), their scratch sizes
 *   affine.cu               y = act(x*scale[c] + bias[c] (+ residual)), float4 / 8 halves
 *   elem.cuh                float/half loads and stores of the templated kernels
 *   deconv.cu               depth-to-space of the deconv2x2 GEMM, + bias, ReLU
 *   group_norm.cu           GroupNorm, one block per (sample, group) (group_norm.h math)
 *   pool.cu                 max pool, nearest upsample
 *   roi_align.cu            multi-level RoIAlign in one launch (roi_align.h math)
 *   rpn_rank.cu             the RPN's per-level ranking by logit (CUB radix sort)
 *   proposals.cu            the RPN's decode, clip, filter (proposals.h math), top-N
 *   nms.cu                  batched bitmask NMS (nms.h math), CUB sorts
 *   mask_probs.cu           sigmoid of the predicted class's channel
 *   mask_paste.cu           masks pasted into their windows (mask_paste.h math)
 *   box_post.cu             softmax, box candidates, top-N (box_post.h math)
 *
 * Every .cu file has three levels: a static __global__ kernel with a
 * grid-stride loop, a static launcher taking the stream, and one extern "C"
 * entry declared below that validates, launches and returns a status (the
 * launch error, if any, named by op). Asynchronous faults surface at the
 * next sync, or at once with MR_CUDA_SYNC=1 (cuda_after_launch). */
#ifndef MR_CUDA_INTERNAL_H
#define MR_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backend/backend.h"
#include "backend/backend_cuda_entry.h"
#include "ops/mask_paste_chunk.h"
#include "ops/preprocess.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What differs between images of one padded size, which is what keys a
 * graph (backend_cuda_graph.c): each op that has such parameters writes
 * them into ctx->h_image (pinned) at every call, a graph's replay
 * included, and copies its part to ctx->d_image in stream order before
 * its kernels, which read them there; a graph's copy nodes then carry each
 * image's values (cuda_image_params_upload). */
typedef struct {
    mr_pre_job job; /* preprocess: this image's source and resize */
    int pre_skip;   /* 1: the input was uploaded another way (an image larger than the staging) */
    float rpn[3];   /* rpn_proposals: img_h, img_w, im_scale */
    float box[3];   /* box_detections: img_h, img_w, roi_divisor */
    mr_final_box_params fb;                      /* paste_on_device */
} cuda_image_params;

/* The ops' parts of cuda_image_params: each copied over on its own. */
typedef enum { CUDA_IMAGE_PRE, CUDA_IMAGE_RPN, CUDA_IMAGE_BOX, CUDA_IMAGE_PASTE, CUDA_IMAGE_PARTS } cuda_image_part;

typedef struct {
    int device;
    size_t free_at_open; /* the device's free memory when this context opened (cuda_device_memory) */
    int tf32;      /* TF32 tensor cores allowed in cuDNN and cuBLAS */
    int fp16;      /* --precision fp16: fp16 weights and feature maps (MR_PRECISION_FP16) */
    int fold;      /* !mr_backend_params.no_fold (backend_registry.h) */
    int sync_each; /* MR_CUDA_SYNC=1: synchronise and check after every launch */
    int host_post; /* MR_CUDA_HOST_POST=1: rpn_proposals and box_detections wholly on the host (debugging) */
    int fuse_z;    /* MR_CUDA_FUSED_Z=1: residual as cuDNN's z, aliasing y (see backend_cuda_layers.c) */
    int conv_find; /* MR_CUDA_CONV_FIND=1: algorithms measured by cudnnFind at a shape's first eager call */
    int use_graphs; /* replayable stages as CUDA graphs (backend_cuda_graph.c); MR_CUDA_GRAPHS=0: off */
    /* Counts on the device (backend.h, counts_on_device): on unless
     * MR_CUDA_DEVICE_COUNTS=0 or MR_CUDA_HOST_POST=1 (whose host path
     * needs them on the host), and only from plan on, which makes their
     * home (the op tests call no plan and read counts on the host).
     * d_counts: [0] the proposals', [1] the detections'; apart from
     * d_post, which both ops reuse while the other's count must live on. */
    int counts_wanted, device_counts;
    int *d_counts;
    /* stage_mark's events (timing on), made at plan */
    cudaEvent_t marks[MR_STAGE_MARKS];
    int marks_made;
    /* The per-image parameters (above), made at create; image_copied[part]
     * is recorded after each eager copy of that part, and waited for
     * before the host writes the part again outside a graph. */
    cuda_image_params *h_image, *d_image;
    cudaEvent_t image_copied[CUDA_IMAGE_PARTS];
    int image_copy_pending[CUDA_IMAGE_PARTS];
    int graph_mode; /* CUDA_GRAPH_EAGER, _CAPTURING or _REPLAYING (ops then only return) */
    struct cuda_graphs *graphs;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    /* Memory is planned at load (cuda_plan, backend_cuda.c): every buffer
     * below is allocated there for the largest input and batch the model
     * allows, and `planned` is set; after that cuda_reserve never
     * allocates, it fails with MR_ERR_BACKEND "... exceeds the memory
     * planned at load". Before plan (the op tests, which call no plan)
     * the buffers grow on first use. */
    int planned;
    /* The largest needs the layers reported at init, for plan: the cuDNN
     * workspace of each conv's chosen algorithm at its largest input (both
     * orientations), and d_tmp (below). */
    size_t need_ws, need_tmp;
    /* One cuDNN workspace; at a smaller shape a conv takes the best
     * algorithm whose workspace fits it (never grows it). */
    void *d_ws;
    size_t ws_size;
    /* A no-fold conv's output before its AffineChannel pass when it adds a
     * residual, and the deconv2x2 GEMM's output. */
    float *d_tmp;
    size_t tmp_size;
    /* The RPN ranking's and the box candidates' device scratch (rpn_rank.cu,
     * box_post.cu; one op at a time), sized by cub's query. */
    void *d_post;
    size_t post_size;
    /* mask_paste: the padded masks [max_dets, P, P], the window table, then
     * a fixed region the windows are pasted through in chunks
     * (cuda_mask_paste). */
    void *d_paste;
    size_t paste_size;
    /* paste_on_device's result block (mask_paste.h), pinned host memory the
     * paste kernels write, for block_cap detections; planned with counts on
     * the device (cuda_plan_paste_block). */
    void *h_block;
    int block_cap;
    size_t block_region; /* its mask region: 64 MiB, or MR_CUDA_PASTE_BLOCK bytes (tests: the overflow path) */
    /* cuBLAS's workspace, handed to it at plan (cublasSetWorkspace) so it
     * does not allocate its own on first use. */
    void *d_cublas_ws;
    size_t cublas_ws_size;
    /* Host staging: mask_probs' labels, mask_paste's window table, the output count, MR_CUDA_HOST_POST's copies. */
    void *host;
    size_t host_size;
    struct cuda_pre *pre; /* preprocess's image buffers (backend_cuda_preprocess.c) */
} cuda_ctx;

/* Per-shape cuDNN state of a conv layer; a run sees few shapes (image
 * orientations, detection counts), and a full cache is recycled in turn. */
#define CUDA_CONV_CACHE 8

typedef struct {
    int used;
    int n, h, w, accumulate;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t math;
    size_t ws_bytes;
    int fused;    /* cudnnConvolutionBiasActivationForward, else conv + affine kernel */
    int verified; /* cuDNN accepted this entry's call once (before that, a refusal falls back) */
} cuda_conv_entry;

typedef enum { CUDA_LAYER_CONV, CUDA_LAYER_LINEAR, CUDA_LAYER_DECONV2X2, CUDA_LAYER_GROUP_NORM } cuda_layer_kind;

struct mr_layer {
    cuda_layer_kind kind;
    char name[128];
    mr_conv_params conv;
    mr_linear_params linear;
    mr_deconv2x2_params deconv;
    mr_group_norm_params gn; /* group norm: its gamma in d_scale, its beta in d_bias (floats) */
    /* conv: OHWI (cuDNN's NHWC filter layout); linear: [out, in];
     * deconv: [cin, 4*cout], column (ki*2 + kj)*cout + co. Halves in an
     * fp16 context (cuda_upload_weights), floats otherwise. */
    void *d_w;
    float *d_bias;
    void *d_bias_h; /* fp16 context: the bias as halves too, for cuDNN's fused conv (its bias has y's type) */
    float *d_scale; /* no-fold conv_init_affine: the scale applied after the conv (d_bias: b*s + t) */
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnTensorDescriptor_t bias_desc;
    cudnnActivationDescriptor_t relu_desc, identity_desc;
    cuda_conv_entry cache[CUDA_CONV_CACHE];
    int next_slot;
};

/* ---- helpers (backend_cuda_common.c) ---- */

/* MR_ERR_BACKEND "<op>: <what>: <CUDA error string>". */
mr_status cuda_fail(mr_error *err, const char *op, const char *what, cudaError_t e);
mr_status cudnn_fail(mr_error *err, const char *op, const char *what, cudnnStatus_t s);
mr_status cublas_fail(mr_error *err, const char *op, const char *what, cublasStatus_t s);
/* After a launch or library call: with MR_CUDA_SYNC=1 synchronises and
 * reports any fault as op's; otherwise only checks the launch. */
mr_status cuda_after_launch(cuda_ctx *c, const char *op, mr_error *err);
/* Makes a scratch buffer hold `bytes`. Before plan it grows the buffer
 * (waiting for the stream first, since queued work may still use the old
 * one); after plan, a need beyond the planned size is MR_ERR_BACKEND
 * "<op>: needs N bytes of scratch, which exceeds the memory planned at
 * load (M)": a planning bug, never an allocation in a forward pass. */
mr_status cuda_reserve(cuda_ctx *c, void **buf, size_t *size, size_t bytes, const char *op, mr_error *err);
mr_status cuda_host_reserve(cuda_ctx *c, size_t bytes, const char *op, mr_error *err);
/* Load-time allocation of a device buffer of `bytes` for `what` (in the
 * message): MR_ERR_OOM "cuda:D: out of GPU memory allocating <what>:
 * N bytes (X MiB)" on failure. */
mr_status cuda_alloc(cuda_ctx *c, void **buf, size_t bytes, const char *what, mr_error *err);
/* Makes c's device the calling thread's current one: the CUDA runtime keeps
 * the current device per host thread, and a forward pass may run on any
 * thread (several contexts in flight, detect.h), so the passes' first ops
 * (replayable, preprocess) call it. */
mr_status cuda_use_device(cuda_ctx *c, const char *op, mr_error *err);

/* ---- layer objects and weights (backend_cuda_weights.c), for backend_cuda_layers.c and _gemm.c ---- */

mr_layer *cuda_layer_new(cuda_layer_kind kind, const char *name);
/* Destroys a cached algorithm entry's descriptors and zeroes it. */
void cuda_conv_entry_clear(cuda_conv_entry *e);
/* `count` host floats into a new device array of the context's weight
 * type: halves (rounded to nearest even, half.h) with fp16, else floats. */
mr_status cuda_upload_weights(cuda_ctx *c, const char *name, const float *h, size_t count, void **out, mr_error *err);
/* The same, always floats (biases, scales). */
mr_status cuda_upload_floats(cuda_ctx *c, const char *name, const float *h, size_t count, float **out, mr_error *err);
/* Bias (or zeros when bias is NULL) into l->d_bias as floats, and with
 * halves_too into l->d_bias_h as halves (an fp16 conv's fused call). */
mr_status cuda_upload_bias(cuda_ctx *c, mr_layer *l, const float *bias, int n, int halves_too, mr_error *err);
/* The detection ops read and write fp32 only (backend.h feature_dtype): a
 * tensor of another type is a model bug, reported rather than misread. */
static inline mr_status cuda_need_f32(const char *op, const mr_tensor *t, const char *what, mr_error *err)
{
    if (t->dtype == MR_ELEM_F32) return MR_OK;
    return mr_fail(err, MR_ERR_SHAPE, "%s: %s must be fp32", op, what);
}

/* The feature maps' type in this context. */
static inline mr_elem_type cuda_feature_type(const cuda_ctx *c) { return c->fp16 ? MR_ELEM_F16 : MR_ELEM_F32; }

/* Column-major C (m x n, ldc = m) = op(A) * B over k, A the layer's
 * weights (op(A) = A^T for trans_a, lda = k; else lda = m), B (k x n,
 * ldb = k) of the context's weight type, C of type ct: cublasSgemm in
 * fp32, cublasGemmEx (fp16 in, fp32 accumulate, ct out) with fp16. */
mr_status cuda_gemm(cuda_ctx *c, const mr_layer *l, int trans_a, int m, int n, int k, const void *B, void *C,
                    mr_elem_type ct, mr_error *err);
/* A 1x1, stride-1, unpadded, ungrouped conv from an fp16 feature map to
 * an fp32 output (the RPN's logits and deltas, the mask logits: backend.h
 * feature_dtype) as one GEMM and a bias (and no-fold scale) pass
 * (backend_cuda_gemm.c). */
mr_status cuda_conv1x1_to_f32(cuda_ctx *c, mr_layer *l, const mr_tensor *x, mr_tensor *y, int accumulate,
                              mr_error *err);

/* ---- CUDA graphs (backend_cuda_graph.c) ---- */

enum { CUDA_GRAPH_EAGER = 0, CUDA_GRAPH_CAPTURING, CUDA_GRAPH_REPLAYING };
mr_status cuda_replayable(void *ctx, const char *name, uint64_t key, mr_status (*fn)(void *arg, mr_error *err),
                          void *arg, mr_error *err);
/* MR_ERR_INTERNAL for an op that a replayable stage must not call. */
mr_status cuda_graph_forbid(const cuda_ctx *c, const char *op, mr_error *err);
/* For an op that may run inside a whole-pass graph (it reads and writes
 * counts only on the device): MR_OK to go on, an error where it may not
 * (counts on the host, inside a graph); *replaying is set while a graph
 * replays, when the op only sets its outputs' shapes and returns. */
mr_status cuda_graph_op(const cuda_ctx *c, const char *op, int *replaying, mr_error *err);
/* Before an op writes its part of ctx->h_image: outside a graph, waits
 * until the last copy of that part has been made (the op's previous call;
 * it almost always has). */
mr_status cuda_image_params_writable(cuda_ctx *c, cuda_image_part part, const char *op, mr_error *err);
/* Copies [field, field + bytes) of ctx->h_image (the op's part) to the
 * same place in ctx->d_image on the stream (recorded into a graph being
 * captured; not while one replays: its own copy node does it). Returns the
 * device copy of field in *dev. */
mr_status cuda_image_params_upload(cuda_ctx *c, cuda_image_part part, const void *field, size_t bytes,
                                   const void **dev, const char *op, mr_error *err);
/* Drops every graph (their pointers are about to change), or frees them all. */
void cuda_graphs_drop(cuda_ctx *c);
mr_status cuda_replay_stats(void *ctx, mr_replay_stats *out); /* backend.h replay_stats */
void cuda_graphs_free(cuda_ctx *c);

/* ---- planning (backend_cuda.c: cuda_plan, the table's entry) ---- */

/* The device scratch (d_post) and host staging of rpn_proposals and
 * box_detections at the plan's largest sizes (backend_cuda_detect.c). */
mr_status cuda_plan_post_scratch(const cuda_ctx *c, const mr_backend_plan *p, size_t *dev, size_t *host,
                                 mr_error *err);
/* mask_paste's d_paste bytes and host staging (its window table) for the
 * plan (backend_cuda_detect.c). */
void cuda_plan_paste_bytes(const mr_backend_plan *p, size_t *dev, size_t *host);
/* paste_on_device's pinned result block for the plan's detections. */
mr_status cuda_plan_paste_block(cuda_ctx *c, const mr_backend_plan *p, mr_error *err);

/* ---- the table's entries (backend_cuda_layers.c, backend_cuda_detect.c, backend_cuda_post.c) ---- */

mr_status cuda_conv_init(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                         const float *bias, mr_layer **out, mr_error *err);
mr_status cuda_conv_init_affine(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                                const float *bias, const float *scale, const float *shift, mr_layer **out,
                                mr_error *err);
mr_status cuda_linear_init(void *ctx, const char *name, const mr_linear_params *p, const float *w,
                           const float *bias, mr_layer **out, mr_error *err);
mr_status cuda_deconv2x2_init(void *ctx, const char *name, const mr_deconv2x2_params *p, const float *w,
                              const float *bias, mr_layer **out, mr_error *err);
void cuda_layer_free(void *ctx, mr_layer *layer);
mr_status cuda_conv(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err);
mr_status cuda_linear(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
mr_status cuda_deconv2x2(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
mr_status cuda_group_norm_init(void *ctx, const char *name, const mr_group_norm_params *p, const float *gamma,
                               const float *beta, mr_layer **out, mr_error *err);
mr_status cuda_group_norm(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate,
                          mr_error *err);

mr_status cuda_max_pool(void *ctx, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, mr_error *err);
mr_status cuda_upsample_nearest(void *ctx, const mr_tensor *x, mr_tensor *y, mr_error *err);
mr_status cuda_roi_align(void *ctx, const mr_roi_align_params *p, const mr_level_map *map,
                         const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err);
mr_status cuda_rpn_proposals(void *ctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                             const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err);
mr_status cuda_box_detections(void *ctx, const mr_box_post_params *p, const mr_tensor *rois,
                              const mr_tensor *logits, const mr_tensor *deltas, mr_tensor *boxes,
                              mr_tensor *scores, mr_tensor *labels, mr_error *err);
mr_status cuda_mask_probs(void *ctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                          mr_error *err);
mr_status cuda_paste_on_device(void *ctx, const mr_mask_paste_params *p, const mr_final_box_params *fb,
                               const mr_tensor *boxes, const mr_tensor *scores, const mr_tensor *labels,
                               const mr_tensor *probs, mr_tensor *final_boxes, mr_error *err);
mr_status cuda_paste_block(void *ctx, const mr_paste_block_header **header, const mr_paste_block_row **rows,
                           const uint8_t **masks, mr_error *err);
mr_status cuda_mask_paste(void *ctx, const mr_mask_paste_params *p, const mr_tensor *probs, const mr_tensor *boxes,
                          int img_h, int img_w, const mr_mask_window *win, uint8_t *masks, float *soft,
                          mr_error *err);

/* ---- kernel entries (the .cu files); shapes already validated by the caller
 * unless stated, each returns the launch status named by op ---- */

/* y[r, ch] = act(x[r, ch]*scale[ch] + bias[ch] + residual[r, ch]) over rows x C;
 * scale, bias, residual may be NULL (1, 0, 0); y may alias x or residual.
 * x, y and residual are all of type t (float or half); scale and bias are float. */
mr_status cuda_affine_launch(cudaStream_t s, const char *op, mr_elem_type t, void *y, const void *x,
                             const float *scale, const float *bias, const void *residual, size_t rows, int C,
                             int relu, mr_error *err);
/* tmp [n*h*w, 4*cout] (column k*cout + co, k = ki*2 + kj) -> y [n, 2h, 2w, cout]
 * with y = act(tmp + bias[co]); tmp and y of type t, bias float. */
mr_status cuda_depth_to_space_launch(cudaStream_t s, const char *op, mr_elem_type t, const void *tmp,
                                     const float *bias, void *y, int n, int h, int w, int cout, int relu,
                                     mr_error *err);
/* GroupNorm (group_norm.cu) of x into y, float or half alike, gamma and
 * beta [C] device floats; the shapes checked by group_norm_check. */
mr_status cuda_group_norm_launch(cudaStream_t s, const char *op, const mr_group_norm_params *p, const mr_tensor *x,
                                 mr_tensor *y, const float *gamma, const float *beta, int accumulate, mr_error *err);
/* Validates the shapes as the CPU backend does. */
mr_status cuda_max_pool_launch(cudaStream_t s, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y,
                               mr_error *err);
mr_status cuda_upsample_nearest_launch(cudaStream_t s, const mr_tensor *x, mr_tensor *y, mr_error *err);
/* levels: map->max_level - map->min_level + 1 device feature maps (<= 8). */
mr_status cuda_roi_align_launch(cudaStream_t s, const mr_roi_align_params *p, const mr_level_map *map,
                                const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err);
/* Mask paste (mask_paste.cu), parameters already validated. First the D
 * masks probs [D, M, M] (device) padded into padded [D, P, P] (torchvision
 * rule; nothing for detectron2); then one chunk (mask_paste_chunk.h) of
 * the windows win[D] with their packed offsets offset[D] (both device),
 * boxes [D, 4] (device), into bin (and soft, when not NULL): whole windows
 * at offset[d] - base, a band from 0. max_window_px: the most pixels any
 * one window of the chunk pastes (the grid's width). */
mr_status cuda_mask_pad_launch(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, int D,
                               float *padded, mr_error *err);
mr_status cuda_mask_paste_launch(cudaStream_t s, const mr_mask_paste_params *p, const float *probs,
                                 const float *padded, const float *boxes, const mr_mask_window *win,
                                 const size_t *offset, int H, int W, const mr_paste_chunk *ch, size_t max_window_px,
                                 size_t base, uint8_t *bin, float *soft, mr_error *err);
/* labels: device floats, already checked to lie in 0..K-1. */
/* The paste on the device (mask_paste.cu; backend.h paste_on_device): the
 * plan (final boxes, windows, offsets, the block's header and rows, state
 * and total on the device), the masks padded over the capacity cap, every
 * window pasted into d_masks, then copied to masks (host memory the kernel
 * writes), unless they overflow region bytes (both hold at least that). */
mr_status cuda_paste_on_device_launch(cudaStream_t s, const mr_mask_paste_params *p, const mr_final_box_params *d_fb,
                                      const float *boxes, const float *scores, const float *labels, const int *count,
                                      const float *probs, int cap, float *padded, float *final_boxes,
                                      mr_mask_window *win, size_t *offset, int *state, size_t *total,
                                      mr_paste_block_header *header, mr_paste_block_row *rows, uint8_t *d_masks,
                                      uint8_t *masks, size_t region, mr_error *err);
mr_status cuda_mask_probs_launch(cudaStream_t s, const mr_tensor *logits, const float *labels, const int *count,
                                 mr_tensor *probs, mr_error *err);

/* ---- preprocess (backend_cuda_preprocess.c, preprocess.cu) ---- */

typedef struct cuda_pre cuda_pre;
/* The table's entry; the path each resize_method takes is described in
 * backend_cuda_preprocess.c. */
mr_status cuda_preprocess(void *ctx, const mr_input_config *cfg, const mr_image *img, const mr_input_geometry *geo,
                          mr_tensor *input, mr_error *err);
/* Sizes the device image buffer and its pinned staging twin for images of
 * up to image_pixels pixels (0: twice the largest resized image cfg allows;
 * cfg is not read otherwise), at least 4096x4096; grows only. Called by
 * cuda_plan at load (twice the plan's largest input), and on the first
 * preprocess when no plan was made (the backend tests). */
/* The stream has been synchronised: preprocess's staging is free again. */
void cuda_preprocess_idle(cuda_ctx *c);
mr_status cuda_preprocess_reserve(cuda_ctx *c, const mr_input_config *cfg, size_t image_pixels, mr_error *err);
void cuda_preprocess_free(cuda_ctx *c);
/* The image [in_h, in_w, 3] of the device job d_job copied from the pinned
 * staging h_img (staging_bytes) to d_img, then d_out [1, padded_h,
 * padded_w, 3] (of type t) = mr_pre_pixel over it (preprocess.h); nothing
 * when *d_skip. job: the host's copy of d_job (the grid, the checks). */
mr_status cuda_preprocess_launch(cudaStream_t s, const mr_pre_job *job, const mr_pre_job *d_job, const int *d_skip,
                                 const uint8_t *h_img, uint8_t *d_img, size_t staging_bytes, mr_elem_type t,
                                 void *d_out, mr_error *err);

/* ---- post-processing on the GPU: rpn_proposals, box_detections
 * (backend_cuda_post.c; rpn_rank.cu, proposals.cu, nms.cu, box_post.cu).
 * Every step stays on the stream; only the output count comes to the host. ---- */

/* The largest inputs the two ops must serve, for sizing their scratch once
 * (ctx->d_post, ctx->host) at load time. */
typedef struct {
    int levels;             /* RPN levels (<= MR_PROPOSAL_MAX_LEVELS) */
    int max_anchors;        /* largest H*W*A of one level at the largest input */
    int pre_nms_top_n, post_nms_top_n, post_nms_per_level;
    int max_rois;           /* box head RoIs of one image (the RPN's post_nms_top_n) */
    int num_classes;        /* K, including background */
    int max_dets;           /* box_detections' out_capacity */
    int host_post;          /* size the host staging of MR_CUDA_HOST_POST's whole-op host path too */
} cuda_post_limits;

/* Device and host bytes the two ops need at most (the larger of the two,
 * since they run one at a time), by cub's size queries. */
mr_status cuda_post_scratch_bytes(const cuda_post_limits *lim, size_t *device_bytes, size_t *host_bytes,
                                  mr_error *err);

/* A candidate box of the batched NMS: box, score, group (FPN level or
 * class id), written by the RPN's and the box head's candidate kernels. */
typedef struct {
    float box[4];
    float score;
    int group;
} cuda_box_cand;

/* Batched NMS (nms.cu): n slots, valid[n] flags; groups in 0..groups-1
 * with at most max_group valid slots each. keep (n ints) receives the
 * kept slots by descending score, ties by slot, *kept (device) their
 * count, or -1 if a group broke the limits. batched_nms_cpu's result. */
mr_status cuda_nms_scratch_bytes(int n, int max_group, int groups, size_t *bytes, mr_error *err);
mr_status cuda_batched_nms_launch(cudaStream_t s, void *d_scratch, const cuda_box_cand *cand,
                                  const unsigned char *valid, int n, int max_group, int groups, double iou_thresh,
                                  int flags, int *keep, int *kept, const char *op, mr_error *err);

/* Greedy NMS over cand[order[0..*n)] in that order (nms.cu; *n on the
 * device, as a batched NMS leaves it): keep receives the first min(kept,
 * cap) kept slots in order, *kept (device) their number, -1 if *n < 0.
 * d_scratch: 5 * cap floats. nms_ordered_cpu's result, cut at cap. */
mr_status cuda_nms_ordered_launch(cudaStream_t s, const cuda_box_cand *cand, const int *order, const int *n, int cap,
                                  double iou_thresh, int flags, float *d_scratch, int *keep, int *kept,
                                  const char *op, mr_error *err);

/* RPN ranking (rpn_rank.cu): device scratch bytes for levels of counts[l]
 * anchors (cub's size query), then the sorts; d_ranked (device) receives
 * level after level its first tops[l] anchor indices by descending logit,
 * ties by index. */
mr_status cuda_rank_scratch_bytes(const int *counts, int levels, size_t *bytes, mr_error *err);
mr_status cuda_rank_launch(cudaStream_t s, void *d_scratch, const float *const *d_logits, const int *counts,
                           const int *tops, int levels, int *d_ranked, mr_error *err);

/* RPN candidates (proposals.cu): the sum of tops[] ranked slots decoded and
 * tested (proposal_candidate), group = level; p->num_anchors <=
 * CUDA_MAX_CELL_ANCHORS. Then the outputs: the first min(*kept,
 * post_nms_top_n) kept, *count (device) their number (-1: NMS failed). */
#define CUDA_MAX_CELL_ANCHORS 16
mr_status cuda_proposal_cand_launch(cudaStream_t s, const mr_proposal_params *p, const void *d_image,
                                    const float *const *d_logits, const float *const *d_deltas, const int *tops,
                                    const int *d_ranked, cuda_box_cand *cand, unsigned char *valid, mr_error *err);
mr_status cuda_proposal_out_launch(cudaStream_t s, int post_nms_top_n, const cuda_box_cand *cand, const int *keep,
                                   const int *kept, float *boxes, float *scores, int *count, mr_error *err);

/* Box candidates (box_post.cu): probs [n,K] scratch, cand and valid for
 * the n*(K-1) (RoI, class >= 1) slots, RoI-major; group = class. Then the
 * outputs: box_post_count of the kept, *count (device; -1: NMS failed). */
mr_status cuda_box_cand_launch(cudaStream_t s, const mr_box_post_params *p, const void *d_image, const float *rois,
                               const int *rois_count, const float *logits, const float *deltas, int n, float *d_probs,
                               cuda_box_cand *cand, unsigned char *valid, mr_error *err);
mr_status cuda_box_out_launch(cudaStream_t s, const mr_box_post_params *p, const cuda_box_cand *cand, const int *keep,
                              const int *kept, const int *rois_count, float *boxes, float *scores, float *labels,
                              int *count, mr_error *err);

#ifdef __cplusplus
}
#endif

#endif
