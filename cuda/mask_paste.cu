/* Mask pasting on the GPU: every detection's M x M probabilities pasted
 * into a full img_h x img_w plane, one thread per output pixel (zero
 * outside the detection's window), with mask_paste.h's MR_HD math: the
 * torchvision rule (padded mask, expanded and truncated box, bilinear
 * resize with the double-precision taps of torch's CPU kernel) or the
 * detectron2 rule (grid_sample of the unpadded mask). The same functions as
 * engine/mask_paste.c, in the same operation order (-fmad=false), so the
 * planes equal the CPU's. Binary output: prob > threshold (GT) or >= (GE)
 * inside the window, 0 outside; the soft planes (tests) are the
 * probabilities, 0 outside.
 *
 * Two kernels: the masks padded into scratch [D, P, P] (torchvision rule,
 * P = M + 2*padding), once; then the paste of one chunk (rows y0.. of
 * planes d0.., mask_paste_chunk.h) into [nd, rows, W] device planes, which
 * the caller copies to the host masks before the next chunk. */
#include <stdint.h>

#include "cuda_launch.cuh"
#include "mask_paste.h"

static __global__ void pad_kernel(const float *probs, float *padded, int D, int M, int pad)
{
    int P = M + 2 * pad;
    size_t total = (size_t)D * P * P;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t d = i / ((size_t)P * P), r = i % ((size_t)P * P);
        int y = (int)(r / (size_t)P) - pad, x = (int)(r % (size_t)P) - pad;
        padded[i] = y >= 0 && y < M && x >= 0 && x < M ? probs[d * M * M + (size_t)y * M + x] : 0.0f;
    }
}

/* One pixel of the torchvision rule; returns 1 inside the window. */
static __device__ int paste_torchvision(const mr_mask_paste_params *p, const float *padded, const float *box,
                                        int H, int W, int y, int x, float *v)
{
    const int P = p->mask_size + 2 * p->padding;
    mr_paste_geom g = mask_paste_geom(p->mask_size, p->padding, box, H, W);
    if (!(x >= g.x0 && x < g.x1 && y >= g.y0 && y < g.y1)) return 0;
    int yi0, yi1, xi0, xi1;
    float ly0, ly1, lx0, lx1;
    mask_resize_axis(P, g.h, y - g.by0, &yi0, &yi1, &ly0, &ly1);
    mask_resize_axis(P, g.w, x - g.bx0, &xi0, &xi1, &lx0, &lx1);
    *v = mask_resize_tap(padded, P, yi0, yi1, ly0, ly1, xi0, xi1, lx0, lx1);
    return 1;
}

/* One pixel of the detectron2 rule; returns 1 inside the window. */
static __device__ int paste_detectron2(const mr_mask_paste_params *p, const float *mask, const float *box, int H,
                                       int W, int y, int x, float *v)
{
    if (!(box[2] > box[0] && box[3] > box[1])) return 0;
    int x0, x1, y0, y1, M = p->mask_size;
    mask_paste_d2_window(box[0], box[2], W, &x0, &x1);
    mask_paste_d2_window(box[1], box[3], H, &y0, &y1);
    if (!(x >= x0 && x < x1 && y >= y0 && y < y1)) return 0;
    *v = mask_paste_d2_sample(mask, M, mask_paste_d2_coord(x, box[0], box[2], M), mask_paste_d2_coord(y, box[1], box[3], M));
    return 1;
}

static __global__ void paste_kernel(mr_mask_paste_params p, const float *probs, const float *padded,
                                    const float *boxes, int H, int W, int d0, int nd, int y0, int rows, uint8_t *bin,
                                    float *soft)
{
    const int M = p.mask_size, P = M + 2 * p.padding;
    const size_t band = (size_t)rows * W, total = (size_t)nd * band;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t d = (size_t)d0 + i / band, r = i % band;
        int y = y0 + (int)(r / (size_t)W), x = (int)(r % (size_t)W);
        const float *box = boxes + 4 * d;
        float v = 0.0f;
        int inside = p.rule == MR_PASTE_DETECTRON2
                         ? paste_detectron2(&p, probs + d * M * M, box, H, W, y, x, &v)
                         : paste_torchvision(&p, padded + d * P * P, box, H, W, y, x, &v);
        if (soft) soft[i] = inside ? v : 0.0f;
        bin[i] = (uint8_t)(inside && (p.cmp == MR_MASK_GE ? v >= p.threshold : v > p.threshold));
    }
}

static void mask_pad(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, int D, float *padded)
{
    int P = p->mask_size + 2 * p->padding;
    pad_kernel<<<cuda_grid((size_t)D * P * P), MR_CUDA_BLOCK, 0, s>>>(probs, padded, D, p->mask_size, p->padding);
}

static void mask_paste(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, const float *padded,
                       const float *boxes, int H, int W, int d0, int nd, int y0, int rows, uint8_t *bin, float *soft)
{
    paste_kernel<<<cuda_grid((size_t)nd * rows * W), MR_CUDA_BLOCK, 0, s>>>(*p, probs, padded, boxes, H, W, d0, nd,
                                                                            y0, rows, bin, soft);
}

extern "C" mr_status cuda_mask_pad_launch(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, int D,
                                          float *padded, mr_error *err)
{
    if (D <= 0 || p->rule == MR_PASTE_DETECTRON2) return MR_OK;
    mask_pad(s, p, probs, D, padded);
    return cuda_launch_status("mask_paste", err);
}

extern "C" mr_status cuda_mask_paste_launch(cudaStream_t s, const mr_mask_paste_params *p, const float *probs,
                                            const float *padded, const float *boxes, int H, int W, int d0, int nd,
                                            int y0, int rows, uint8_t *bin, float *soft, mr_error *err)
{
    if (nd <= 0 || rows <= 0 || W <= 0 || H <= 0) return MR_OK;
    if (d0 < 0 || y0 < 0 || y0 + rows > H)
        return mr_fail(err, MR_ERR_INTERNAL, "mask_paste: chunk rows %d..%d of %d, planes from %d", y0, y0 + rows, H,
                       d0);
    mask_paste(s, p, probs, padded, boxes, H, W, d0, nd, y0, rows, bin, soft);
    return cuda_launch_status("mask_paste", err);
}
