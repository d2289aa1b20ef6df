/* Image geometry (sizes through resize and padding) and preprocessing to
 * the network input, on the host. Contracts in image_preprocess.h; the per-pixel
 * math is preprocess.h's, shared with cuda/preprocess.cu. Decoding is
 * image.c. */
#include "ops/image_preprocess.h"
#include "ops/resize_cv2.h"
#include "ops/resize_cv2_uint8.h"
#include "ops/resize_pil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/scratch.h"

/* ---- Geometry ----------------------------------------------------------- */

mr_status image_geometry(const mr_input_config *cfg, int h, int w, mr_input_geometry *out,
                         mr_error *err)
{
    memset(out, 0, sizeof *out);
    if (h <= 0 || w <= 0)
        return mr_fail(err, MR_ERR_RANGE, "image size %dx%d (HxW): sides must be positive", h, w);
    if (cfg->max_image_side > 0 && (h > cfg->max_image_side || w > cfg->max_image_side))
        return mr_fail(err, MR_ERR_RANGE, "image size %dx%d (HxW) exceeds input.max_image_side %d",
                       h, w, cfg->max_image_side);
    if (cfg->min_size <= 0 || cfg->max_size <= 0)
        return mr_fail(err, MR_ERR_CONFIG, "input.min_size %d and input.max_size %d must be positive",
                       cfg->min_size, cfg->max_size);
    int short_side = h < w ? h : w, long_side = h < w ? w : h;
    double rh, rw, fh, fw;
    float sh, sw;
    if (cfg->resize_rounding == MR_RESIZE_FLOOR) {
        /* transform.py: scale = torch.min(self_min_size / min_size, ...) with
         * float32 tensors; `float / tensor` is reciprocal(tensor) * float,
         * which differs from a plain division in the last bit for about a
         * third of sizes, enough to move floor() below by one pixel. */
        float s_short = (1.0f / (float)short_side) * (float)cfg->min_size;
        float s_long = (1.0f / (float)long_side) * (float)cfg->max_size;
        double s = (double)(s_short < s_long ? s_short : s_long);
        rh = floor((double)h * s);
        rw = floor((double)w * s);
        sh = (float)rh / (float)h;
        sw = (float)rw / (float)w;
        fh = rh / (double)h;
        fw = rw / (double)w;
    } else if (cfg->resize_rounding == MR_RESIZE_ROUND) {
        double s = (double)cfg->min_size / (double)short_side;
        if (rint(s * (double)long_side) > (double)cfg->max_size)
            s = (double)cfg->max_size / (double)long_side;
        rh = rint((double)h * s);
        rw = rint((double)w * s);
        sh = sw = (float)s;
        fh = fw = s; /* cv2.resize(fx=s, fy=s) gets s itself */
    } else if (cfg->resize_rounding == MR_RESIZE_MASKRCNN_BENCHMARK) {
        /* maskrcnn_benchmark/data/transforms/transforms.py Resize.get_size,
         * Python 3: round() is half to even (rint), int() truncates, and
         * size * long / short is an exact integer product over a double. */
        double size = (double)cfg->min_size;
        if ((double)long_side / (double)short_side * size > (double)cfg->max_size)
            size = rint((double)cfg->max_size * (double)short_side / (double)long_side);
        /* a short side already equal to size is returned unchanged */
        double other = size == (double)short_side ? (double)long_side
                                                  : trunc(size * (double)long_side / (double)short_side);
        rh = h < w ? size : other;
        rw = h < w ? other : size;
        sh = (float)rh / (float)h;
        sw = (float)rw / (float)w;
        fh = rh / (double)h;
        fw = rw / (double)w;
    } else if (cfg->resize_rounding == MR_RESIZE_MMDET) {
        /* mmcv/image/geometric.py rescale_size with scale (max_size,
         * min_size): scale_factor = min(max_long_edge / max(h, w),
         * max_short_edge / min(h, w)) in Python floats, then _scale_size:
         * int(w * s + 0.5), int(h * s + 0.5), floor for these positive
         * values. mmdet's scale_factor is then new/old per axis
         * (Resize._resize_img: w_scale = new_w / w, h_scale = new_h / h). */
        const double long_edge = cfg->max_size > cfg->min_size ? cfg->max_size : cfg->min_size;
        const double short_edge = cfg->max_size > cfg->min_size ? cfg->min_size : cfg->max_size;
        const double s_long = long_edge / (double)long_side, s_short = short_edge / (double)short_side;
        const double s = s_long < s_short ? s_long : s_short;
        rh = floor((double)h * s + 0.5);
        rw = floor((double)w * s + 0.5);
        sh = (float)rh / (float)h;
        sw = (float)rw / (float)w;
        fh = rh / (double)h;
        fw = rw / (double)w;
    } else {
        /* detectron2 ResizeShortestEdge.get_output_shape, in Python floats:
         * the short side becomes min_size exactly, the long one scale * long;
         * both are multiplied by max_size / the larger when it exceeds max_size;
         * then int(x + 0.5), which is floor for these positive values. */
        const double size = (double)cfg->min_size;
        double scale = size / (double)short_side;
        double nh, nw;
        if (h < w) {
            nh = size;
            nw = scale * (double)w;
        } else {
            nh = scale * (double)h;
            nw = size;
        }
        const double longest = nh > nw ? nh : nw;
        if (longest > (double)cfg->max_size) {
            scale = (double)cfg->max_size / longest;
            nh = nh * scale;
            nw = nw * scale;
        }
        rh = floor(nh + 0.5);
        rw = floor(nw + 0.5);
        sh = (float)rh / (float)h;
        sw = (float)rw / (float)w;
        fh = rh / (double)h;
        fw = rw / (double)w;
    }
    /* The resized long side is at most about max_size, so these fit an int. */
    if (rh < 1 || rw < 1 || rh > 1e8 || rw > 1e8)
        return mr_fail(err, MR_ERR_RANGE,
                       "image size %dx%d (HxW) is too elongated: it would resize to %.0fx%.0f", h, w,
                       rh, rw);
    out->in_h = h;
    out->in_w = w;
    out->resized_h = (int)rh;
    out->resized_w = (int)rw;
    int d = cfg->size_divisibility > 1 ? cfg->size_divisibility : 1;
    out->padded_h = (out->resized_h + d - 1) / d * d;
    out->padded_w = (out->resized_w + d - 1) / d * d;
    if (cfg->canvas_h > 0 && out->padded_h <= cfg->canvas_h && out->padded_w <= cfg->canvas_w) {
        out->padded_h = cfg->canvas_h; /* config.h: one canvas for every image that fits */
        out->padded_w = cfg->canvas_w;
    }
    out->scale_h = sh;
    out->scale_w = sw;
    out->method = cfg->resize_method;
    out->factor_h = fh;
    out->factor_w = fw;
    return MR_OK;
}

/* ---- Preprocessing ------------------------------------------------------ */

/* The resamplers of the uint8 image (Pillow's, OpenCV's) write a uint8
 * image of the resized size first, then use their own scratch. */
static void uint8_layout(const mr_input_geometry *g, mr_scratch *sc, uint8_t **resized, void **work)
{
    *resized = scratch_take(sc, (size_t)g->resized_h * (size_t)g->resized_w * 3);
    if (g->method == MR_RESIZE_PIL_BILINEAR) {
        const mr_resize_pil p = {g->in_h, g->in_w, g->resized_h, g->resized_w};
        *work = scratch_take(sc, resize_pil_scratch_bytes(&p));
    } else {
        const mr_resize_cv2_uint8 p = {g->in_h, g->in_w, g->resized_h, g->resized_w};
        *work = scratch_take(sc, resize_cv2_uint8_scratch_bytes(&p));
    }
}

static mr_resize_cv2 cv2_params(const mr_input_geometry *g)
{
    mr_resize_cv2 p = {g->in_h, g->in_w, g->resized_h, g->resized_w, g->factor_w, g->factor_h};
    return p;
}

mr_status image_preprocess_check(const mr_image *img, const mr_input_geometry *geo, const mr_tensor *input,
                                 mr_error *err)
{
    if (img->h != geo->in_h || img->w != geo->in_w || !img->pixels)
        return mr_fail(err, MR_ERR_SHAPE, "preprocess: a %dx%d image does not match its %dx%d geometry", img->h,
                       img->w, geo->in_h, geo->in_w);
    if (input->n != 1 || input->h != geo->padded_h || input->w != geo->padded_w || input->c != 3 || !input->data)
        return mr_fail(err, MR_ERR_SHAPE, "preprocess: the input tensor is not [1,%d,%d,3]", geo->padded_h,
                       geo->padded_w);
    return MR_OK;
}

size_t image_preprocess_scratch_bytes(const mr_input_geometry *g)
{
    switch (g->method) {
    case MR_RESIZE_PIL_BILINEAR:
    case MR_RESIZE_CV2_LINEAR_UINT8: {
        mr_scratch sc = {NULL, 0};
        uint8_t *resized;
        void *work;
        uint8_layout(g, &sc, &resized, &work);
        return sc.used;
    }
    case MR_RESIZE_CV2_LINEAR: {
        const mr_resize_cv2 p = cv2_params(g);
        return resize_cv2_scratch_bytes(&p);
    }
    default:
        return (size_t)g->resized_w * sizeof(mr_lerp_tap);
    }
}

/* Normalisation is per pixel and depends only on the 8-bit level, so a
 * table of 3x256 values (preprocess.h: mr_pre_normalise) gives exactly the
 * normalised image, and a resize reads it without a full-size float
 * intermediate. */
static void build_lut(const mr_input_config *cfg, mr_pixel_lut *lut)
{
    const mr_pre_norm n =
        mr_pre_norm_make(cfg->pixel_mean, cfg->pixel_std, cfg->pixel_scale, cfg->channel_order == MR_CHANNELS_BGR);
    for (int c = 0; c < 3; c++) lut->src_ch[c] = n.src_ch[c];
    mr_pre_lut_fill(&n, &lut->v[0][0], 0, 1);
}

void image_preprocess_job(const mr_input_config *cfg, const mr_input_geometry *g, mr_pre_job *job)
{
    memset(job, 0, sizeof *job);
    job->norm =
        mr_pre_norm_make(cfg->pixel_mean, cfg->pixel_std, cfg->pixel_scale, cfg->channel_order == MR_CHANNELS_BGR);
    job->in_h = g->in_h;
    job->in_w = g->in_w;
    job->resized_h = g->resized_h;
    job->resized_w = g->resized_w;
    job->padded_h = g->padded_h;
    job->padded_w = g->padded_w;
    const int same = g->in_h == g->resized_h && g->in_w == g->resized_w;
    switch (g->method) {
    case MR_RESIZE_PIL_BILINEAR:
    case MR_RESIZE_CV2_LINEAR_UINT8:
        job->sampler = MR_PRE_COPY;
        job->in_h = g->resized_h;
        job->in_w = g->resized_w;
        break;
    case MR_RESIZE_CV2_LINEAR:
        job->sampler = same ? MR_PRE_COPY : MR_PRE_CV2;
        /* OpenCV's scale_x = 1./inv_scale_x, in double (resize_cv2.c). */
        job->inv_fx = 1.0 / g->factor_w;
        job->inv_fy = 1.0 / g->factor_h;
        break;
    default:
        job->sampler = MR_PRE_TORCH;
        job->ratio_w = mr_lerp_ratio(g->in_w, g->resized_w);
        job->ratio_h = mr_lerp_ratio(g->in_h, g->resized_h);
        break;
    }
}

/* One row of torch's F.interpolate on the normalised image. Built for
 * x86-64-v3 (AVX2 and FMA) too, picked at load: the lerps' fmaf is a libm
 * call at the x86-64 baseline (bench/NOTES.md section 40); a fused
 * multiply-add is exact either way, so the bits are the same. A function
 * of its own because OpenMP's outlined loop body would not inherit the
 * clones. */
__attribute__((target_clones("arch=x86-64-v3", "default"))) static void
resize_torch_row(const mr_pixel_lut *lut, const uint8_t *r0, const uint8_t *r1, mr_lerp_tap ty, const mr_lerp_tap *xt,
                 int rw, float *row)
{
    for (int x = 0; x < rw; x++) {
        const mr_lerp_tap tx = xt[x];
        for (int c = 0; c < 3; c++) row[x * 3 + c] = mr_pre_torch_sample(lut->v[c], r0, r1, tx, ty, lut->src_ch[c]);
    }
}

/* torch's F.interpolate on the normalised image, rows [0, rh). */
static void resize_torch(const mr_pixel_lut *lut, const mr_image *img, const mr_input_geometry *g,
                         void *scratch, float *dst, size_t row_stride)
{
    const int in_h = g->in_h, in_w = g->in_w, rh = g->resized_h, rw = g->resized_w;
    mr_lerp_tap *xt = scratch;
    const float ratio_w = mr_lerp_ratio(in_w, rw), ratio_h = mr_lerp_ratio(in_h, rh);
    for (int x = 0; x < rw; x++) xt[x] = mr_lerp_tap_at(in_w, rw, ratio_w, x);
    const uint8_t *pix = img->pixels;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < rh; y++) {
        mr_lerp_tap ty = mr_lerp_tap_at(in_h, rh, ratio_h, y);
        resize_torch_row(lut, pix + (size_t)ty.i0 * in_w * 3, pix + (size_t)ty.i1 * in_w * 3, ty, xt, rw,
                         dst + (size_t)y * row_stride);
    }
}

/* A resize of the uint8 image (Pillow's or OpenCV's), then the
 * normalisation, rows [0, rh): detectron2 and mmdetection convert the
 * resized uint8 image to float and normalise it afterwards
 * (GeneralizedRCNN.preprocess_image; mmdet's DetDataPreprocessor). */
static void resize_uint8(const mr_pixel_lut *lut, const mr_image *img, const mr_input_geometry *g,
                         void *scratch, float *dst, size_t row_stride)
{
    mr_scratch sc = {scratch, 0};
    uint8_t *resized;
    void *work;
    uint8_layout(g, &sc, &resized, &work);
    if (g->method == MR_RESIZE_PIL_BILINEAR) {
        const mr_resize_pil p = {g->in_h, g->in_w, g->resized_h, g->resized_w};
        resize_pil_bilinear(&p, img->pixels, resized, work);
    } else {
        const mr_resize_cv2_uint8 p = {g->in_h, g->in_w, g->resized_h, g->resized_w};
        resize_cv2_linear_uint8(&p, img->pixels, resized, work);
    }
    pixel_lut_apply(lut, resized, g->resized_h, g->resized_w, dst, row_stride);
}

void image_preprocess(const mr_input_config *cfg, const mr_image *img, const mr_input_geometry *g,
                      void *scratch, mr_tensor *out)
{
    mr_pixel_lut lut;
    build_lut(cfg, &lut);
    const int rh = g->resized_h, rw = g->resized_w, ph = g->padded_h, pw = g->padded_w;
    const size_t stride = (size_t)pw * 3;
    float *dst = out->data;
    switch (g->method) {
    case MR_RESIZE_PIL_BILINEAR:
    case MR_RESIZE_CV2_LINEAR_UINT8:
        resize_uint8(&lut, img, g, scratch, dst, stride);
        break;
    case MR_RESIZE_CV2_LINEAR: {
        const mr_resize_cv2 p = cv2_params(g);
        resize_cv2_linear(&p, img->pixels, &lut, dst, stride, scratch);
        break;
    }
    default:
        resize_torch(&lut, img, g, scratch, dst, stride);
        break;
    }
    /* Zero padding after normalisation, bottom and right. */
#pragma omp parallel for schedule(static)
    for (int y = 0; y < ph; y++) {
        float *row = dst + (size_t)y * stride;
        if (y >= rh)
            memset(row, 0, stride * sizeof *row);
        else
            memset(row + (size_t)rw * 3, 0, (size_t)(pw - rw) * 3 * sizeof *row);
    }
}
