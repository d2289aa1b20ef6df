/* Mask pasting on the GPU: every detection's M x M probabilities pasted
 * into its window of the image (mask_paste_window: the part its paste can
 * touch), one thread per window pixel, with mask_paste.h's MR_HD math: the
 * torchvision rule (padded mask, expanded and truncated box, bilinear
 * resize with the double-precision taps of torch's CPU kernel) or the
 * detectron2 rule (grid_sample of the unpadded mask). The same functions as
 * engine/ops/mask_paste.c, in the same operation order (-fmad=false), so the
 * windows equal the CPU's. Binary output: prob > threshold (GT) or >=
 * (GE); the soft windows (tests) are the probabilities.
 *
 * Two kernels: the masks padded into scratch [D, P, P] (torchvision rule,
 * P = M + 2*padding), once; then the paste of one chunk (mask_paste_chunk.h:
 * whole windows packed back to back, or a band of rows of one window), one
 * block row per window, into the device region, which the caller copies to
 * the host before the next chunk. */
#include <stdint.h>

#include "cuda_launch.cuh"
#include "ops/mask_paste.h"
#include "ops/mask_paste_chunk.h"

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

/* win[d] is the window of d's box; rows < 0: all rows of each window, at
 * offset[d] - base in the region; else rows [row0, row0 + rows) of window
 * d0 alone, from the region's start. */
static __global__ void paste_kernel(mr_mask_paste_params p, const float *probs, const float *padded,
                                    const float *boxes, const mr_mask_window *win, const size_t *offset, int H, int W,
                                    int d0, int row0, int rows, size_t base, uint8_t *bin, float *soft)
{
    const int d = d0 + (int)blockIdx.y, M = p.mask_size, P = M + 2 * p.padding;
    const mr_mask_window w = win[d];
    const int first_row = rows < 0 ? 0 : row0;
    const size_t n = (size_t)(rows < 0 ? w.h : rows) * (size_t)w.w, out = rows < 0 ? offset[d] - base : 0;
    const float *box = boxes + 4 * (size_t)d;
    const mr_paste_geom g = mask_paste_geom(M, p.padding, box, H, W);
    const float *mask = probs + (size_t)d * M * M, *pmask = padded + (size_t)d * P * P;
    /* The caller's window is its box's (backend.h); were it not, the taps
     * below could fall outside the padded mask: such a window is left 0
     * (the CPU backend reports the mismatch as an internal error). */
    const mr_mask_window own = mask_paste_window(&p, box, H, W);
    const int consistent = own.x0 == w.x0 && own.y0 == w.y0 && own.w == w.w && own.h == w.h;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int y = w.y0 + first_row + (int)(i / (size_t)w.w), x = w.x0 + (int)(i % (size_t)w.w);
        float v = 0.0f;
        if (consistent && p.rule == MR_PASTE_DETECTRON2) {
            v = mask_paste_d2_sample(mask, M, mask_paste_d2_coord(x, box[0], box[2], M),
                                     mask_paste_d2_coord(y, box[1], box[3], M));
        } else if (consistent) {
            int yi0, yi1, xi0, xi1;
            float ly0, ly1, lx0, lx1;
            mask_resize_axis(P, g.h, y - g.by0, &yi0, &yi1, &ly0, &ly1);
            mask_resize_axis(P, g.w, x - g.bx0, &xi0, &xi1, &lx0, &lx1);
            v = mask_resize_tap(pmask, P, yi0, yi1, ly0, ly1, xi0, xi1, lx0, lx1);
        }
        if (soft) soft[out + i] = v;
        bin[out + i] = (uint8_t)(p.cmp == MR_MASK_GE ? v >= p.threshold : v > p.threshold);
    }
}

static void mask_pad(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, int D, float *padded)
{
    int P = p->mask_size + 2 * p->padding;
    pad_kernel<<<cuda_grid((size_t)D * P * P), MR_CUDA_BLOCK, 0, s>>>(probs, padded, D, p->mask_size, p->padding);
}

static void mask_paste(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, const float *padded,
                       const float *boxes, const mr_mask_window *win, const size_t *offset, int H, int W,
                       const mr_paste_chunk *ch, size_t max_window_px, size_t base, uint8_t *bin, float *soft)
{
    dim3 grid(cuda_grid(max_window_px), (unsigned int)ch->nd);
    paste_kernel<<<grid, MR_CUDA_BLOCK, 0, s>>>(*p, probs, padded, boxes, win, offset, H, W, ch->d0, ch->row0,
                                                ch->rows, base, bin, soft);
}

extern "C" mr_status cuda_mask_pad_launch(cudaStream_t s, const mr_mask_paste_params *p, const float *probs, int D,
                                          float *padded, mr_error *err)
{
    if (D <= 0 || p->rule == MR_PASTE_DETECTRON2) return MR_OK;
    mask_pad(s, p, probs, D, padded);
    return cuda_launch_status("mask_paste", err);
}

extern "C" mr_status cuda_mask_paste_launch(cudaStream_t s, const mr_mask_paste_params *p, const float *probs,
                                            const float *padded, const float *boxes, const mr_mask_window *win,
                                            const size_t *offset, int H, int W, const mr_paste_chunk *ch,
                                            size_t max_window_px, size_t base, uint8_t *bin, float *soft,
                                            mr_error *err)
{
    if (ch->nd <= 0 || ch->pixels == 0) return MR_OK;
    if (ch->nd > MR_PASTE_CHUNK_MAX_WINDOWS || (ch->rows >= 0 && (ch->nd != 1 || ch->row0 < 0)))
        return mr_fail(err, MR_ERR_INTERNAL, "mask_paste: chunk of %d windows from %d, rows %d+%d", ch->nd, ch->d0,
                       ch->row0, ch->rows);
    mask_paste(s, p, probs, padded, boxes, win, offset, H, W, ch, max_window_px, base, bin, soft);
    return cuda_launch_status("mask_paste", err);
}
