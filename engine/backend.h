/* The backend interface: what the model code (resnet.c, fpn.c, rpn.c,
 * roi_heads.c, mask_head.c) may ask of a device. One table of function
 * pointers plus a context, like ggml's ggml_backend_i: the CPU backend
 * (backend_cpu.c) implements it with oneDNN and OpenMP, the CUDA backend
 * (cuda/backend_cuda.c) with cuDNN, cuBLAS and kernels. The model is
 * written once against this table.
 *
 * Memory: tensors passed to these ops live in the backend's memory
 * (buffer_alloc). Layers (convolutions, linear layers) are prepared once at
 * load time from host weights in PyTorch layouts (OIHW, [out,in]); the
 * backend keeps them in whatever layout it runs fastest.
 *
 * The coarse post-processing ops (rpn_proposals, box_detections,
 * roi_align) take a params struct from their op header; each backend
 * implements them with the inline math in that header. */
#ifndef MR_BACKEND_H
#define MR_BACKEND_H

#include <stddef.h>

#include "status.h"
#include "tensor.h"

typedef struct mr_layer mr_layer; /* a backend-prepared conv/linear layer */

/* Convolution, NHWC in and out, with its bias (a folded batchnorm) and
 * optional fused residual sum and ReLU in the same output pass:
 *   y = act(conv(x, W) + bias + (accumulate ? y_before : 0)) */
typedef struct {
    int cin, cout;
    int kh, kw;
    int stride, pad, dilation, groups;
    int relu;
} mr_conv_params;

/* Fully connected: y[n, out] = act(x[n, in] * W^T + b). */
typedef struct {
    int in, out;
    int relu;
} mr_linear_params;

/* Transposed convolution with kernel 2 and stride 2 (mask head): every
 * output pixel gets exactly one input pixel, so it is one GEMM
 * [N*H*W, cin] x [cin, 4*cout] and a depth-to-space copy. */
typedef struct {
    int cin, cout;
    int relu;
} mr_deconv2x2_params;

typedef struct {
    int kernel, stride, pad;
} mr_pool_params;

struct mr_rpn_params;       /* rpn.h */
struct mr_roi_align_params; /* roi_align.h */
struct mr_box_post_params;  /* box_post.h */

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

    /* Layers, prepared at load time. `name` is used in error messages. */
    mr_status (*conv_init)(void *ctx, const char *name, const mr_conv_params *p,
                           const float *w_oihw, const float *bias, mr_layer **out, mr_error *err);
    mr_status (*linear_init)(void *ctx, const char *name, const mr_linear_params *p,
                             const float *w_out_in, const float *bias, mr_layer **out, mr_error *err);
    /* w is PyTorch's ConvTranspose2d layout [cin, cout, 2, 2]. */
    mr_status (*deconv2x2_init)(void *ctx, const char *name, const mr_deconv2x2_params *p,
                                const float *w_io22, const float *bias, mr_layer **out, mr_error *err);
    void (*layer_free)(void *ctx, mr_layer *layer);

    /* y must already have the output shape; accumulate adds into y. */
    mr_status (*conv)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, int accumulate, mr_error *err);
    mr_status (*linear)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
    mr_status (*deconv2x2)(void *ctx, mr_layer *layer, const mr_tensor *x, mr_tensor *y, mr_error *err);
    mr_status (*max_pool)(void *ctx, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, mr_error *err);
    /* y = nearest-neighbour resize of x to y's H, W (PyTorch's "nearest"). */
    mr_status (*upsample_nearest)(void *ctx, const mr_tensor *x, mr_tensor *y, mr_error *err);
} mr_backend_i;

typedef struct {
    const mr_backend_i *i;
    void *ctx;
} mr_backend;

/* The CPU backend, `threads` OpenMP threads (0 = library default). */
mr_status backend_cpu_create(mr_backend *out, int threads, mr_error *err);

#endif
