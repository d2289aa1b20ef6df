/* Internals shared by the CPU backend's files (not part of the API). */
#ifndef MR_BACKEND_CPU_H
#define MR_BACKEND_CPU_H

#include <dnnl.h>

#include "backend.h"

/* Primitives are created per input shape and cached in the layer; a handful
 * of shapes (image orientations, RoI counts) is all one run sees. */
#define CPU_CONV_CACHE 8

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;
    void *scratch; /* oneDNN scratchpad and GEMM temporaries, grown per new shape */
    size_t scratch_size;
    void *blocked;      /* blocked copies of a conv's input and output */
    size_t blocked_size;
    void *post_scratch; /* the detection ops' (top-k, NMS, paste) */
    size_t post_scratch_size;
} cpu_ctx;

typedef enum { CPU_LAYER_CONV, CPU_LAYER_LINEAR, CPU_LAYER_DECONV2X2 } cpu_layer_kind;

typedef struct {
    int n, h, w, accumulate;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src_md, wei_md, bias_md, dst_md; /* NHWC src/dst: the tensors' layout */
    /* Spatial convolutions run on channel-blocked copies (nChw8c): oneDNN's
     * AVX2 kernels are 1.2-3x faster on them than on NHWC, far more than
     * the two reorders cost (1x1 convolutions are as fast in NHWC). */
    int blocked;
    dnnl_primitive_t to_blocked, from_blocked;
    dnnl_memory_desc_t src_blk_md, dst_blk_md;
    float *weights; /* in the layout the primitive chose */
    int owns_weights;
    size_t scratch_bytes;
} cpu_conv_entry;

struct mr_layer {
    cpu_layer_kind kind;
    char name[128];
    mr_conv_params conv;
    mr_linear_params linear;
    mr_deconv2x2_params deconv;
    /* conv: one master copy, OIHW until the first primitive reorders it into
     * the layout it prefers (weights_md says which); linear: [out,in];
     * deconv: [cin, 2*2*cout]. */
    float *weights;
    dnnl_memory_desc_t weights_md;
    float *bias;
    cpu_conv_entry cache[CPU_CONV_CACHE];
    int cache_count;
};

mr_status cpu_scratch_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err);
mr_status cpu_blocked_reserve(cpu_ctx *ctx, size_t bytes, mr_error *err);

mr_status cpu_conv_init(void *ctx, const char *name, const mr_conv_params *p, const float *w_oihw,
                        const float *bias, mr_layer **out, mr_error *err);
mr_status cpu_linear_init(void *ctx, const char *name, const mr_linear_params *p, const float *w,
                          const float *bias, mr_layer **out, mr_error *err);
mr_status cpu_deconv2x2_init(void *ctx, const char *name, const mr_deconv2x2_params *p, const float *w,
                             const float *bias, mr_layer **out, mr_error *err);
void cpu_layer_free(void *ctx, mr_layer *layer);
mr_status cpu_conv(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err);
mr_status cpu_linear(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
mr_status cpu_deconv2x2(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);

mr_status cpu_roi_align(void *ctx, const mr_roi_align_params *p, const mr_level_map *map,
                        const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err);
mr_status cpu_rpn_proposals(void *ctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                            const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err);
mr_status cpu_box_detections(void *ctx, const mr_box_post_params *p, const mr_tensor *rois, const mr_tensor *logits,
                             const mr_tensor *deltas, mr_tensor *boxes, mr_tensor *scores, mr_tensor *labels,
                             mr_error *err);
mr_status cpu_mask_probs(void *ctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                         mr_error *err);
mr_status cpu_mask_paste(void *ctx, const mr_mask_paste_params *p, const mr_tensor *probs, const mr_tensor *boxes,
                         int img_h, int img_w, uint8_t *const *masks, float *soft, mr_error *err);

#endif
