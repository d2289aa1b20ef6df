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
 * the host before the next chunk.
 *
 * The paste on the device (backend.h paste_on_device: the count on the
 * device, no host in between; the final boxes' parameters read from device
 * memory, the per-image parameters): plan_kernel, one block, makes each
 * final box (final_boxes.h), its window and the offsets (a running sum in
 * detection order) into the device table and the host result block; the
 * masks are padded over the capacity; paste_all_kernel then pastes every
 * window into a device region (one block row per detection up to the
 * capacity; those past the count return), unless the windows overflow it;
 * copy_out_kernel copies the pixels used (their total is known only on the
 * device) into the block's mask region in host memory, 16 bytes a store
 * (bench/NOTES.md section 25). */
#include <stdint.h>

#include "cuda_launch.cuh"
#include "ops/final_boxes.h"
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

/* Detection d's window rows [first_row, first_row + rows), its pixels n,
 * into bin[0..n) (and soft), this block's share. */
static __device__ void paste_window(const mr_mask_paste_params &p, const float *probs, const float *padded,
                                    const float *boxes, mr_mask_window w, int d, int H, int W, int first_row,
                                    size_t n, uint8_t *bin, float *soft)
{
    const int M = p.mask_size, P = M + 2 * p.padding;
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
        if (soft) soft[i] = v;
        bin[i] = (uint8_t)(p.cmp == MR_MASK_GE ? v >= p.threshold : v > p.threshold);
    }
}

/* win[d] is the window of d's box; rows < 0: all rows of each window, at
 * offset[d] - base in the region; else rows [row0, row0 + rows) of window
 * d0 alone, from the region's start. */
static __global__ void paste_kernel(mr_mask_paste_params p, const float *probs, const float *padded,
                                    const float *boxes, const mr_mask_window *win, const size_t *offset, int H, int W,
                                    int d0, int row0, int rows, size_t base, uint8_t *bin, float *soft)
{
    const int d = d0 + (int)blockIdx.y;
    const mr_mask_window w = win[d];
    const size_t n = (size_t)(rows < 0 ? w.h : rows) * (size_t)w.w, out = rows < 0 ? offset[d] - base : 0;
    paste_window(p, probs, padded, boxes, w, d, H, W, rows < 0 ? 0 : row0, n, bin + out, soft ? soft + out : NULL);
}

/* state: [0] the count (-1: broken), [1] overflow; total: the windows'
 * pixels; written for paste_all_kernel and copy_out_kernel. */
static __global__ void plan_kernel(mr_mask_paste_params p, const mr_final_box_params *fb_in, const float *boxes,
                                   const float *scores, const float *labels, const int *count, int cap, size_t region,
                                   float *final_boxes, mr_mask_window *win, size_t *offset, int *state,
                                   size_t *total, mr_paste_block_header *header, mr_paste_block_row *rows)
{
    __shared__ int n;
    const mr_final_box_params fb = *fb_in;
    if (threadIdx.x == 0) {
        int c = *count;
        n = c < 0 || c > cap ? -1 : c;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < n; d += blockDim.x) {
        float b[4] = {boxes[4 * (size_t)d], boxes[4 * (size_t)d + 1], boxes[4 * (size_t)d + 2],
                      boxes[4 * (size_t)d + 3]};
        final_box(&fb, b);
        const mr_mask_window w = mask_paste_window(&p, b, fb.img_h, fb.img_w);
        for (int k = 0; k < 4; k++) {
            final_boxes[4 * (size_t)d + k] = b[k];
            rows[d].box[k] = b[k];
        }
        rows[d].score = scores[d];
        rows[d].label = labels[d];
        rows[d].win = w;
        win[d] = w;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        size_t at = 0;
        for (int d = 0; d < n; d++) {
            offset[d] = at;
            rows[d].offset = at;
            at += mask_window_pixels(win[d]);
        }
        int overflow = at > region;
        state[0] = n;
        state[1] = overflow;
        *total = at;
        header->count = n;
        header->overflow = overflow;
        header->pixels = at;
    }
}

static __global__ void paste_all_kernel(mr_mask_paste_params p, const float *probs, const float *padded,
                                        const float *final_boxes, const mr_mask_window *win, const size_t *offset,
                                        const int *state, const mr_final_box_params *fb, uint8_t *masks)
{
    const int d = (int)blockIdx.y;
    if (d >= state[0] || state[1]) return;
    const mr_mask_window w = win[d];
    paste_window(p, probs, padded, final_boxes, w, d, fb->img_h, fb->img_w, 0, mask_window_pixels(w),
                 masks + offset[d], NULL);
}

/* The total pixels from the device region to the host block (both start 256-aligned). */
static __global__ void copy_out_kernel(const int *state, const size_t *total, const uint8_t *__restrict__ src,
                                       uint8_t *__restrict__ dst)
{
    if (state[0] <= 0 || state[1]) return;
    grid_copy_bytes(src, dst, *total);
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

extern "C" mr_status cuda_paste_on_device_launch(cudaStream_t s, const mr_mask_paste_params *p,
                                                const mr_final_box_params *d_fb, const float *boxes, const float *scores,
                                                const float *labels, const int *count, const float *probs, int cap,
                                                float *padded, float *final_boxes, mr_mask_window *win,
                                                size_t *offset, int *state, size_t *total,
                                                mr_paste_block_header *header, mr_paste_block_row *rows,
                                                uint8_t *d_masks, uint8_t *masks, size_t region, mr_error *err)
{
    if (cap <= 0) return MR_OK;
    plan_kernel<<<1, MR_CUDA_BLOCK, 0, s>>>(*p, d_fb, boxes, scores, labels, count, cap, region, final_boxes, win,
                                            offset, state, total, header, rows);
    if (p->rule != MR_PASTE_DETECTRON2) mask_pad(s, p, probs, cap, padded);
    /* a window is at most the image: blocks enough for one of a typical size, grid-striding over larger ones */
    dim3 grid(cuda_grid((size_t)64 * MR_CUDA_BLOCK), (unsigned int)cap);
    paste_all_kernel<<<grid, MR_CUDA_BLOCK, 0, s>>>(*p, probs, padded, final_boxes, win, offset, state, d_fb,
                                                    d_masks);
    copy_out_kernel<<<cuda_grid(region / 16), MR_CUDA_BLOCK, 0, s>>>(state, total, d_masks, masks);
    return cuda_launch_status("paste_on_device", err);
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
