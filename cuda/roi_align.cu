/* Multi-level RoIAlign in one launch: every RoI of every FPN level, one
 * thread per output element (roi, bin y, bin x, channel); consecutive
 * threads take consecutive channels, so each bilinear tap is a coalesced
 * read of an NHWC pixel. The geometry (level mapping, bins, sampling grid,
 * bilinear taps) is roi_align.h's MR_HD math, the same functions the CPU
 * runs, and the per-channel sum is evaluated in the CPU's order,
 *   o += ((w1*f1 + w2*f2) + w3*f3) + w4*f4,   then o /= count,
 * which with -fmad=false (Makefile) is the CPU's (and torchvision's)
 * arithmetic, except that log2f in the level mapping may differ by an ulp.
 * With fp16 feature maps (--precision fp16) the levels and the output are
 * halves; the taps are read as float and the sum rounded once. With the
 * RoIs' count on the device (backend.h), the rows past it are zeros: the
 * layers after RoIAlign run over the capacity and must see finite input. */
#include <string.h>

#include "cuda_launch.cuh"
#include "elem.cuh"
#include "ops/roi_align.h"

#define ROI_MAX_LEVELS 8

/* The feature maps, by value in the kernel's arguments. */
template <typename T>
struct roi_levels {
    const T *data[ROI_MAX_LEVELS];
    int h[ROI_MAX_LEVELS], w[ROI_MAX_LEVELS];
};

template <typename T>
static __global__ void roi_align_kernel(mr_roi_align_params p, mr_level_map map, roi_levels<T> lv, const float *rois,
                                        const int *rois_count, int n, int C, T *out)
{
    size_t total = (size_t)n * p.out_h * p.out_w * C;
    const int rows = rois_count ? *rois_count : n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C);
        size_t bin = i / (size_t)C;
        int pw = (int)(bin % (size_t)p.out_w), ph = (int)((bin / (size_t)p.out_w) % (size_t)p.out_h);
        int r = (int)(bin / ((size_t)p.out_w * (size_t)p.out_h));
        if (r >= rows) { /* padding (its RoI may be anything) */
            elem_store(out, i, 0.0f);
            continue;
        }
        const float *roi = rois + 4 * (size_t)r;
        int lvl = roi_level(&map, roi), li = lvl - map.min_level;
        const int H = lv.h[li], W = lv.w[li];
        const T *fd = lv.data[li];
        mr_roi_geom g = roi_align_geom(&p, roi, ldexpf(1.0f, -lvl));
        if (H <= 0 || W <= 0) g.grid_h = g.grid_w = 0; /* an empty map has nothing to sample: zeros */
        float o = 0.0f;
        for (int iy = 0; iy < g.grid_h; iy++) {
            int ylo = 0, yhi = 0;
            float ly = 0.0f;
            float y = roi_align_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
            if (!roi_align_axis(y, H, &ylo, &yhi, &ly)) continue;
            float hy = 1.0f - ly;
            for (int ix = 0; ix < g.grid_w; ix++) {
                int xlo = 0, xhi = 0;
                float lx = 0.0f;
                float x = roi_align_coord(g.start_w, pw, g.bin_w, ix, g.grid_w);
                if (!roi_align_axis(x, W, &xlo, &xhi, &lx)) continue;
                float hx = 1.0f - lx;
                float w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
                float f1 = elem_load(fd, ((size_t)ylo * W + xlo) * C + c);
                float f2 = elem_load(fd, ((size_t)ylo * W + xhi) * C + c);
                float f3 = elem_load(fd, ((size_t)yhi * W + xlo) * C + c);
                float f4 = elem_load(fd, ((size_t)yhi * W + xhi) * C + c);
                o += w1 * f1 + w2 * f2 + w3 * f3 + w4 * f4;
            }
        }
        elem_store(out, i, o / g.count);
    }
}

/* Gathers the levels' pointers as T and launches. */
template <typename T>
static void roi_align(cudaStream_t s, const mr_roi_align_params *p, const mr_level_map *map,
                      const mr_tensor *const *levels, int count, const float *rois, const int *rois_count, int n,
                      int C, T *out)
{
    roi_levels<T> lv;
    memset(&lv, 0, sizeof lv);
    for (int l = 0; l < count; l++) {
        lv.data[l] = (const T *)(const void *)levels[l]->data;
        lv.h[l] = levels[l]->h;
        lv.w[l] = levels[l]->w;
    }
    size_t total = (size_t)n * p->out_h * p->out_w * C;
    roi_align_kernel<T><<<cuda_grid(total), MR_CUDA_BLOCK, 0, s>>>(*p, *map, lv, rois, rois_count, n, C, out);
}

extern "C" mr_status cuda_roi_align_launch(cudaStream_t s, const mr_roi_align_params *p, const mr_level_map *map,
                                           const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out,
                                           mr_error *err)
{
    int count = map->max_level - map->min_level + 1, C = levels[0]->c;
    if (count < 1 || count > ROI_MAX_LEVELS)
        return mr_fail(err, MR_ERR_RANGE, "roi_align: levels %d..%d: 1 to %d levels are supported", map->min_level,
                       map->max_level, ROI_MAX_LEVELS);
    if (p->out_h < 1 || p->out_w < 1) return mr_fail(err, MR_ERR_SHAPE, "roi_align: %dx%d bins", p->out_h, p->out_w);
    if (out->n != rois->n || out->h != p->out_h || out->w != p->out_w || out->c != C)
        return mr_fail(err, MR_ERR_SHAPE, "roi_align: output must be [%d,%d,%d,%d]", rois->n, p->out_h, p->out_w, C);
    for (int l = 0; l < count; l++) {
        if (levels[l]->c != C)
            return mr_fail(err, MR_ERR_SHAPE, "roi_align: level %d has %d channels, level %d has %d",
                           map->min_level + l, levels[l]->c, map->min_level, C);
        if (levels[l]->dtype != out->dtype)
            return mr_fail(err, MR_ERR_SHAPE, "roi_align: level %d and the output are of different types",
                           map->min_level + l);
    }
    if (rois->dtype != MR_ELEM_F32) return mr_fail(err, MR_ERR_SHAPE, "roi_align: the boxes must be fp32");
    if (rois->n == 0 || C == 0) return MR_OK;
    if (out->dtype == MR_ELEM_F16)
        roi_align(s, p, map, levels, count, rois->data, rois->device_count, rois->n, C, elem_f16(out));
    else
        roi_align(s, p, map, levels, count, rois->data, rois->device_count, rois->n, C, out->data);
    return cuda_launch_status("roi_align", err);
}
