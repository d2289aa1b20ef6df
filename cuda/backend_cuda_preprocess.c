/* The CUDA backend's preprocess entry: decoded uint8 image (host) -> the
 * padded, normalised NHWC network input in device memory.
 *
 * Path per input.resize_method:
 *   torch_bilinear  the decoded image goes to the GPU (pinned staging, one
 *                   async copy); one kernel (preprocess.cu) resizes,
 *                   normalises, orders the channels and pads;
 *   cv2_linear      the same, with OpenCV's taps: its resize is per pixel
 *                   like torch's (resize_cv2.h), so it ports as is;
 *   pil_bilinear    Pillow's separable fixed-point resize runs on the host
 *                   (resize_pil_bilinear) straight into the pinned staging
 *                   buffer, then the resized uint8 image goes to the GPU and
 *                   the kernel normalises, orders and pads it (a copy
 *                   sampler). Porting its two integer passes is future work.
 *   cv2_linear_uint8  the same with OpenCV's fixed-point resize of the uint8
 *                   image (resize_cv2_linear_uint8) on the host.
 * Either way the result is image_preprocess's, bit for bit (the kernel runs
 * engine/ops/preprocess.h's math).
 *
 * Memory: the device image buffer and its pinned twin are sized once by
 * cuda_preprocess_reserve (on first use, or when the model's plan calls it
 * at load), never in a steady-state pass. An image that does not fit them
 * falls back to the host: image_preprocess into host memory, then a copy of
 * the float input. Inputs may be up to input.max_image_side (20000) pixels
 * a side; planning 20000x20000x3 bytes of device and pinned memory for the
 * rare huge photo would waste 1.2 GB twice over, and for such an image the
 * host resize is a small part of the pass. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "core/half.h"
#include "ops/image_preprocess.h"
#include "ops/resize_cv2_uint8.h"
#include "ops/resize_pil.h"

/* Pixels the image buffers hold at least: 16.7 MP covers the common camera
 * photo (12 MP, 4000x3000) at 48 MiB of device and 48 MiB of pinned
 * memory. */
#define CUDA_PRE_MIN_PIXELS ((size_t)4096 * 4096)

struct cuda_pre {
    size_t cap;         /* bytes of d_img and h_img                          */
    uint8_t *d_img;     /* the uint8 image the kernel samples                */
    uint8_t *h_img;     /* pinned staging of the same size                   */
    cudaEvent_t copied; /* recorded after the copy out of h_img              */
    int pending;        /* copied was recorded and h_img may still be in use */
    void *host;         /* host scratch: a uint8 resize's, or the fallback's */
    size_t host_size;
};

/* The largest resized image the config allows: the short side ends at most
 * at min_size (or max_size, when that is smaller), the long one at
 * max_size, one pixel more each for the rounding rules. */
static size_t max_resized_pixels(const mr_input_config *cfg)
{
    const size_t lo = (size_t)(cfg->min_size < cfg->max_size ? cfg->min_size : cfg->max_size);
    const size_t hi = (size_t)(cfg->max_size > 0 ? cfg->max_size : 0);
    return (lo + 1) * (hi + 1);
}

void cuda_preprocess_free(cuda_ctx *c)
{
    cuda_pre *p = c->pre;
    if (!p) return;
    if (p->pending) cudaEventSynchronize(p->copied);
    if (p->copied) cudaEventDestroy(p->copied);
    if (p->d_img) cudaFree(p->d_img);
    if (p->h_img) cudaFreeHost(p->h_img);
    free(p->host);
    free(p);
    c->pre = NULL;
}

/* ==== the reservation the model's plan may call at load ==== */
mr_status cuda_preprocess_reserve(cuda_ctx *c, const mr_input_config *cfg, size_t image_pixels, mr_error *err)
{
    size_t pixels = image_pixels ? image_pixels : 2 * max_resized_pixels(cfg);
    if (pixels < CUDA_PRE_MIN_PIXELS) pixels = CUDA_PRE_MIN_PIXELS;
    const size_t bytes = pixels * 3;
    cuda_pre *p = c->pre;
    if (p && p->cap >= bytes) return MR_OK;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return mr_fail(err, MR_ERR_OOM, "preprocess: out of memory");
        cudaError_t e = cudaEventCreateWithFlags(&p->copied, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            free(p);
            return cuda_fail(err, "preprocess", "cudaEventCreate", e);
        }
        c->pre = p;
    }
    /* Growing: queued work may still read the old buffers. */
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) return cuda_fail(err, "preprocess", "stream synchronise", e);
    p->pending = 0;
    if (p->d_img) cudaFree(p->d_img);
    if (p->h_img) cudaFreeHost(p->h_img);
    p->d_img = NULL;
    p->h_img = NULL;
    p->cap = 0;
    void *d = NULL, *h = NULL;
    e = cudaMalloc(&d, bytes);
    if (e == cudaSuccess) {
        e = cudaMallocHost(&h, bytes);
        if (e != cudaSuccess) cudaFree(d);
    }
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        return mr_fail(err, MR_ERR_OOM, "preprocess: out of %s memory (%zu bytes of image buffer)",
                       d ? "pinned host" : "GPU", bytes);
    }
    p->d_img = d;
    p->h_img = h;
    p->cap = bytes;
    return MR_OK;
}

static mr_status host_reserve(cuda_pre *p, size_t bytes, mr_error *err)
{
    if (bytes <= p->host_size) return MR_OK;
    void *h = realloc(p->host, bytes);
    if (!h) return mr_fail(err, MR_ERR_OOM, "preprocess: out of memory (%zu bytes of host scratch)", bytes);
    p->host = h;
    p->host_size = bytes;
    return MR_OK;
}

void cuda_preprocess_idle(cuda_ctx *c)
{
    if (c->pre) c->pre->pending = 0;
}

/* h_img is ours again once the last copy out of it has finished. */
static mr_status staging_wait(cuda_pre *p, mr_error *err)
{
    if (!p->pending) return MR_OK;
    cudaError_t e = cudaEventSynchronize(p->copied);
    if (e != cudaSuccess) return cuda_fail(err, "preprocess", "waiting for the staging copy", e);
    p->pending = 0;
    return MR_OK;
}

/* The image too large for the planned buffers: today's host path. */
static mr_status preprocess_on_host(cuda_ctx *c, const mr_input_config *cfg, const mr_image *img,
                                    const mr_input_geometry *geo, mr_tensor *input, mr_error *err)
{
    cuda_pre *p = c->pre;
    const size_t work = (image_preprocess_scratch_bytes(geo) + 63) & ~(size_t)63;
    const size_t count = mr_tensor_numel(input), bytes = sizeof(float) * count;
    const int f16 = input->dtype == MR_ELEM_F16;
    MR_TRY(host_reserve(p, work + bytes + (f16 ? 2 * count : 0), err));
    mr_tensor staged = *input;
    staged.data = (float *)((char *)p->host + work);
    staged.dtype = MR_ELEM_F32;
    image_preprocess(cfg, img, geo, p->host, &staged);
    const void *src = staged.data;
    if (f16) { /* fp16 features: each float rounded once, behind the floats */
        uint16_t *halves = (uint16_t *)(void *)((char *)p->host + work + bytes);
        mr_floats_to_halves(staged.data, halves, count);
        src = halves;
    }
    /* Pageable memory: the copy completes before p->host is reused. */
    cudaError_t e = cudaMemcpyAsync(input->data, src, count * mr_elem_size(input->dtype), cudaMemcpyHostToDevice,
                                    c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, "preprocess", "cudaMemcpy of the input", e);
}

mr_status cuda_preprocess(void *ctx, const mr_input_config *cfg, const mr_image *img, const mr_input_geometry *geo,
                          mr_tensor *input, mr_error *err)
{
    cuda_ctx *c = ctx;
    int replaying = 0;
    if (c->graph_mode == CUDA_GRAPH_EAGER) MR_TRY(cuda_use_device(c, "preprocess", err));
    MR_TRY(cuda_graph_op(c, "preprocess", &replaying, err));
    MR_TRY(image_preprocess_check(img, geo, input, err));
    /* after the plan the buffers stay as planned (a larger image takes the host path below) */
    if (!c->planned || !c->pre) MR_TRY(cuda_preprocess_reserve(c, cfg, 0, err));
    cuda_pre *p = c->pre;
    mr_pre_job job;
    image_preprocess_job(cfg, geo, &job);
    /* job's source: the decoded image, or the host's resized one (Pillow, OpenCV's uint8). */
    const size_t src_bytes = (size_t)job.in_h * (size_t)job.in_w * 3;
    MR_TRY(cuda_image_params_writable(c, CUDA_IMAGE_PRE, "preprocess", err));
    cuda_image_params *ip = c->h_image;
    if (src_bytes > p->cap) {
        /* A graph uploads from the staging: a larger image cannot be
         * captured (the model's unit then runs op by op this time), and a
         * replay keeps the input this path uploads (pre_skip). */
        if (c->graph_mode == CUDA_GRAPH_CAPTURING)
            return mr_fail(err, MR_ERR_UNSUPPORTED, "preprocess: a %zu-byte image is larger than the staging planned "
                           "at load; not captured", src_bytes);
        MR_TRY(preprocess_on_host(c, cfg, img, geo, input, err));
        ip->pre_skip = 1;
        return MR_OK;
    }

    MR_TRY(staging_wait(p, err));
    if (geo->method == MR_RESIZE_PIL_BILINEAR) {
        mr_resize_pil rp = {geo->in_h, geo->in_w, geo->resized_h, geo->resized_w};
        MR_TRY(host_reserve(p, resize_pil_scratch_bytes(&rp), err));
        resize_pil_bilinear(&rp, img->pixels, p->h_img, p->host);
    } else if (geo->method == MR_RESIZE_CV2_LINEAR_UINT8) {
        mr_resize_cv2_uint8 rp = {geo->in_h, geo->in_w, geo->resized_h, geo->resized_w};
        MR_TRY(host_reserve(p, resize_cv2_uint8_scratch_bytes(&rp), err));
        resize_cv2_linear_uint8(&rp, img->pixels, p->h_img, p->host);
    } else {
        memcpy(p->h_img, img->pixels, src_bytes);
    }
    /* Inside the forward unit (backend.h) the staging above and the job are
     * the host's part, done before each launch; the graph copies and
     * converts. The pass's own wait at its end (paste_block) frees the
     * staging again. */
    ip->job = job;
    ip->pre_skip = 0;
    const void *d_job = NULL;
    MR_TRY(cuda_image_params_upload(c, CUDA_IMAGE_PRE, &ip->job,
                                    offsetof(cuda_image_params, pre_skip) + sizeof ip->pre_skip, &d_job, "preprocess",
                                    err));
    if (replaying) return MR_OK;
    const int *d_skip = (const int *)((const char *)d_job + offsetof(cuda_image_params, pre_skip));
    MR_TRY(cuda_preprocess_launch(c->stream, &job, d_job, d_skip, p->h_img, p->d_img, p->cap, input->dtype,
                                  input->data, err));
    if (c->graph_mode == CUDA_GRAPH_EAGER) { /* the upload reads h_img until this event */
        cudaError_t e = cudaEventRecord(p->copied, c->stream);
        if (e != cudaSuccess) return cuda_fail(err, "preprocess", "record the staging's event", e);
        p->pending = 1;
    }
    return cuda_after_launch(c, "preprocess", err);
}
