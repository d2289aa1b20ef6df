/* The network input on the GPU: one pass that reads the uint8 HWC image and
 * writes the resized, normalised, channel-ordered, zero-padded NHWC float
 * input [1, padded_h, padded_w, 3], one thread per output pixel. The
 * per-pixel math is engine/ops/preprocess.h's (mr_pre_pixel), which
 * engine/io/image.c runs on the CPU, so both give the same bits (the build's
 * -fmad=false keeps every product and sum rounded as on the CPU; the lerps'
 * fmaf is exact on both). Which samplers come here, and from which image,
 * is decided in backend_cuda_preprocess.c. With fp16 feature maps the
 * input is written as halves (each float rounded once).
 *
 * The job and the image's size come from device memory (the per-image
 * parameters, cuda_internal.h), so a graph captured for one image serves
 * every image of its padded size: upload_kernel copies the image's bytes
 * (in_h x in_w x 3 of this job) from the pinned staging, and both kernels
 * do nothing when the input was uploaded another way (skip). */
#include "cuda_launch.cuh"
#include "elem.cuh"

/* Each block first builds the 3x256 table of normalised levels in shared
 * memory (3 normalisations per thread), then samples from it. */
static __global__ void upload_kernel(const mr_pre_job *job, const int *skip, const uint8_t *__restrict__ src,
                                     uint8_t *__restrict__ dst)
{
    if (*skip) return;
    grid_copy_bytes(src, dst, (size_t)job->in_h * (size_t)job->in_w * 3); /* both: allocations' starts */
}

template <typename T>
static __global__ void preprocess_kernel(const mr_pre_job *job_in, const int *skip, const uint8_t *__restrict__ img,
                                         T *__restrict__ out)
{
    if (*skip) return;
    const mr_pre_job job = *job_in;
    __shared__ float lut[3 * 256];
    mr_pre_lut_fill(&job.norm, lut, (int)threadIdx.x, (int)blockDim.x);
    __syncthreads();
    const size_t total = (size_t)job.padded_h * (size_t)job.padded_w;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int y = (int)(i / (size_t)job.padded_w), x = (int)(i % (size_t)job.padded_w);
        float v[3];
        mr_pre_pixel(&job, lut, img, y, x, v);
        elem_store(out, i * 3, v[0]);
        elem_store(out, i * 3 + 1, v[1]);
        elem_store(out, i * 3 + 2, v[2]);
    }
}

template <typename T>
static void preprocess(cudaStream_t s, const mr_pre_job *job, const mr_pre_job *d_job, const int *d_skip,
                       const uint8_t *img, T *out)
{
    const size_t total = (size_t)job->padded_h * (size_t)job->padded_w;
    preprocess_kernel<T><<<cuda_grid(total), MR_CUDA_BLOCK, 0, s>>>(d_job, d_skip, img, out);
}

extern "C" mr_status cuda_preprocess_launch(cudaStream_t s, const mr_pre_job *job, const mr_pre_job *d_job,
                                            const int *d_skip, const uint8_t *h_img, uint8_t *d_img,
                                            size_t staging_bytes, mr_elem_type t, void *d_out, mr_error *err)
{
    if (job->in_h < 1 || job->in_w < 1 || job->resized_h < 1 || job->resized_w < 1 ||
        job->padded_h < job->resized_h || job->padded_w < job->resized_w)
        return mr_fail(err, MR_ERR_SHAPE, "preprocess: bad sizes (image %dx%d, resized %dx%d, padded %dx%d)",
                       job->in_h, job->in_w, job->resized_h, job->resized_w, job->padded_h, job->padded_w);
    if (job->sampler == MR_PRE_COPY && (job->in_h != job->resized_h || job->in_w != job->resized_w))
        return mr_fail(err, MR_ERR_SHAPE, "preprocess: a copy from a %dx%d image cannot give %dx%d", job->in_h,
                       job->in_w, job->resized_h, job->resized_w);
    /* the upload's grid covers the staging's words: any image that fits it */
    upload_kernel<<<cuda_grid(staging_bytes / 16), MR_CUDA_BLOCK, 0, s>>>(d_job, d_skip, h_img, d_img);
    if (t == MR_ELEM_F16)
        preprocess(s, job, d_job, d_skip, d_img, (__half *)d_out);
    else
        preprocess(s, job, d_job, d_skip, d_img, (float *)d_out);
    return cuda_launch_status("preprocess", err);
}
