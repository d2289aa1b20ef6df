/* The CUDA backend's context, memory plan, copies and function table. The
 * helpers every cuda/backend_cuda*.c calls (errors, launch checks,
 * allocation) are below it in backend_cuda_common.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* cuBLAS's workspace: NVIDIA's recommendation for Hopper (32 MiB; 4 MiB
 * suffices before it); ours are plain sgemms. */
#define CUDA_CUBLAS_WS ((size_t)32 << 20)

/* A planned buffer: exactly `bytes` (the old contents, if any, dropped). */
static mr_status plan_buffer(cuda_ctx *c, void **buf, size_t *size, size_t bytes, const char *what, mr_error *err)
{
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *size = 0;
    MR_TRY(cuda_alloc(c, buf, bytes, what, err));
    *size = bytes;
    return MR_OK;
}

/* Allocates all the backend's scratch once, for the largest input and
 * batches (p) and the layers' largest shapes (need_ws, need_tmp, gathered
 * by their init); afterwards the forward pass allocates nothing. */
static mr_status cuda_plan(void *vctx, const mr_backend_plan *p, mr_error *err)
{
    cuda_ctx *c = vctx;
    size_t post_dev = 0, post_host = 0;
    cuda_graphs_drop(c); /* they hold the buffers about to be replaced */
    MR_TRY(cuda_plan_post_scratch(c, p, &post_dev, &post_host, err));
    /* mask_probs stages the D labels on the host */
    size_t host = sizeof(float) * (size_t)(p->max_dets > 0 ? p->max_dets : 1);
    if (post_host > host) host = post_host;
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) return cuda_fail(err, "plan", "stream synchronise", e);
    MR_TRY(plan_buffer(c, &c->d_ws, &c->ws_size, c->need_ws, "the cuDNN workspace", err));
    MR_TRY(plan_buffer(c, (void **)&c->d_tmp, &c->tmp_size, c->need_tmp, "the layer temporaries (deconv GEMM, "
                       "no-fold residual)", err));
    MR_TRY(plan_buffer(c, &c->d_post, &c->post_size, post_dev, "the RPN/box post-processing scratch", err));
    size_t paste_dev = 0, paste_host = 0;
    cuda_plan_paste_bytes(p, &paste_dev, &paste_host);
    if (paste_host > host) host = paste_host;
    MR_TRY(plan_buffer(c, &c->d_paste, &c->paste_size, paste_dev, "the mask paste buffer", err));
    MR_TRY(cuda_plan_paste_block(c, p, err));
    /* the decoded image's device buffer and pinned staging (backend_cuda_preprocess.c) */
    MR_TRY(cuda_preprocess_reserve(c, NULL, 2 * (size_t)p->max_h * (size_t)p->max_w, err));
    MR_TRY(plan_buffer(c, &c->d_cublas_ws, &c->cublas_ws_size, CUDA_CUBLAS_WS, "the cuBLAS workspace", err));
    size_t counts_size = 0;
    MR_TRY(plan_buffer(c, (void **)&c->d_counts, &counts_size, 2 * sizeof(int), "the detection counts", err));
    for (; c->marks_made < MR_STAGE_MARKS; c->marks_made++) {
        e = cudaEventCreateWithFlags(&c->marks[c->marks_made], cudaEventDefault);
        if (e != cudaSuccess) return cuda_fail(err, "plan", "create the stage events", e);
    }
    c->device_counts = c->counts_wanted;
    cublasStatus_t s = cublasSetWorkspace(c->cublas, c->d_cublas_ws, c->cublas_ws_size);
    if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail(err, "plan", "set workspace", s);
    void *h = realloc(c->host, host);
    if (!h) return mr_fail(err, MR_ERR_OOM, "out of memory allocating the CUDA backend's host staging: %zu bytes",
                           host);
    c->host = h;
    c->host_size = host;
    c->planned = 1;
    return MR_OK;
}

static mr_status cuda_buffer_alloc(void *vctx, size_t bytes, void **out, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_use_device(c, "buffer_alloc", err));
    void *p = NULL;
    MR_TRY(cuda_alloc(c, &p, bytes, "device memory", err));
    /* The contract promises a zeroed block. */
    cudaError_t e = cudaMemsetAsync(p, 0, bytes, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        cudaFree(p);
        return cuda_fail(err, "buffer_alloc", "cudaMemset", e);
    }
    *out = p;
    return MR_OK;
}

static void cuda_buffer_free(void *vctx, void *ptr)
{
    cuda_ctx *c = vctx;
    if (!ptr) return;
    cuda_graphs_drop(c); /* a graph may hold this buffer */
    cudaStreamSynchronize(c->stream);
    cudaFree(ptr);
}

/* Copies are ordered on the context's stream and complete before returning
 * (host memory here is pageable and reused by the caller at once). */
static mr_status cuda_copy(cuda_ctx *c, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                           const char *op, mr_error *err)
{
    MR_TRY(cuda_graph_forbid(c, op, err));
    if (!bytes) return MR_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "cudaMemcpy", e);
}

static mr_status cuda_copy_to_device(void *vctx, void *dst, const void *src, size_t bytes, mr_error *err)
{
    return cuda_copy(vctx, dst, src, bytes, cudaMemcpyHostToDevice, "copy_to_device", err);
}

static mr_status cuda_copy_to_host(void *vctx, void *dst, const void *src, size_t bytes, mr_error *err)
{
    return cuda_copy(vctx, dst, src, bytes, cudaMemcpyDeviceToHost, "copy_to_host", err);
}

static mr_status cuda_sync(void *vctx, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_graph_forbid(c, "sync", err));
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? MR_OK : cuda_fail(err, "sync", "a queued kernel (set MR_CUDA_SYNC=1 to name it)", e);
}

static mr_elem_type cuda_feature_dtype(void *vctx) { return cuda_feature_type(vctx); }

static int cuda_counts_on_device(void *vctx) { return ((const cuda_ctx *)vctx)->device_counts; }

/* Stage marks are events on the stream; recorded during a capture they
 * become the graph's own event nodes (cudaEventRecordExternal), stamped at
 * each replay, so a replayed pass is timed without waiting between its
 * stages. While a graph replays, the model's marks inside it only return. */
static mr_status cuda_stage_mark(void *vctx, int mark, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (mark < 0 || mark >= c->marks_made)
        return mr_fail(err, MR_ERR_INTERNAL, "stage_mark %d: %d marks were made at plan", mark, c->marks_made);
    if (c->graph_mode == CUDA_GRAPH_REPLAYING) return MR_OK;
    cudaError_t e = c->graph_mode == CUDA_GRAPH_CAPTURING
                        ? cudaEventRecordWithFlags(c->marks[mark], c->stream, cudaEventRecordExternal)
                        : cudaEventRecord(c->marks[mark], c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, "stage_mark", "record an event", e);
}

static mr_status cuda_stage_seconds(void *vctx, int marks, double *seconds, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_graph_forbid(c, "stage_seconds", err));
    if (marks < 1 || marks > c->marks_made)
        return mr_fail(err, MR_ERR_INTERNAL, "stage_seconds: %d marks of %d", marks, c->marks_made);
    cudaError_t e = cudaEventSynchronize(c->marks[marks - 1]);
    if (e != cudaSuccess) return cuda_fail(err, "stage_seconds", "a queued kernel (set MR_CUDA_SYNC=1 to name it)", e);
    for (int k = 0; k + 1 < marks; k++) {
        float ms = 0.0f;
        e = cudaEventElapsedTime(&ms, c->marks[k], c->marks[k + 1]);
        if (e != cudaSuccess) return cuda_fail(err, "stage_seconds", "the time between two events", e);
        seconds[k] = 1e-3 * (double)ms;
    }
    return MR_OK;
}

static void cuda_destroy(void *vctx)
{
    cuda_ctx *c = vctx;
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    cuda_graphs_free(c);
    cuda_preprocess_free(c);
    for (int k = 0; k < c->marks_made; k++) cudaEventDestroy(c->marks[k]);
    if (c->d_counts) cudaFree(c->d_counts);
    if (c->h_block) cudaFreeHost(c->h_block);
    for (int k = 0; k < CUDA_IMAGE_PARTS; k++)
        if (c->image_copied[k]) cudaEventDestroy(c->image_copied[k]);
    if (c->h_image) cudaFreeHost(c->h_image);
    if (c->d_image) cudaFree(c->d_image);
    if (c->d_ws) cudaFree(c->d_ws);
    if (c->d_tmp) cudaFree(c->d_tmp);
    if (c->d_post) cudaFree(c->d_post);
    if (c->d_paste) cudaFree(c->d_paste);
    if (c->cublas) cublasDestroy(c->cublas);
    if (c->d_cublas_ws) cudaFree(c->d_cublas_ws);
    if (c->cudnn) cudnnDestroy(c->cudnn);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->host);
    free(c);
}

static mr_status cuda_device_memory(void *vctx, size_t *used, size_t *free_bytes, size_t *total, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_use_device(c, "device memory", err));
    size_t free_now = 0, all = 0;
    cudaError_t e = cudaMemGetInfo(&free_now, &all);
    if (e != cudaSuccess) return cuda_fail(err, "device memory", "cudaMemGetInfo", e);
    *used = c->free_at_open > free_now ? c->free_at_open - free_now : 0;
    *free_bytes = free_now;
    *total = all;
    return MR_OK;
}

static const mr_backend_i cuda_backend_i = {
    .name = "cuda",
    .destroy = cuda_destroy,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .copy_to_device = cuda_copy_to_device,
    .copy_to_host = cuda_copy_to_host,
    .sync = cuda_sync,
    .feature_dtype = cuda_feature_dtype,
    .replayable = cuda_replayable,
    .counts_on_device = cuda_counts_on_device,
    .stage_mark = cuda_stage_mark,
    .stage_seconds = cuda_stage_seconds,
    .plan = cuda_plan,
    .conv_init = cuda_conv_init,
    .conv_init_affine = cuda_conv_init_affine,
    .linear_init = cuda_linear_init,
    .deconv2x2_init = cuda_deconv2x2_init,
    .group_norm_init = cuda_group_norm_init,
    .layer_free = cuda_layer_free,
    .conv = cuda_conv,
    .linear = cuda_linear,
    .deconv2x2 = cuda_deconv2x2,
    .group_norm = cuda_group_norm,
    .max_pool = cuda_max_pool,
    .upsample_nearest = cuda_upsample_nearest,
    .roi_align = cuda_roi_align,
    .rpn_proposals = cuda_rpn_proposals,
    .box_detections = cuda_box_detections,
    .mask_probs = cuda_mask_probs,
    .mask_paste = cuda_mask_paste,
    .paste_on_device = cuda_paste_on_device,
    .paste_block = cuda_paste_block,
    .preprocess = cuda_preprocess,
    .device_memory = cuda_device_memory,
    .replay_stats = cuda_replay_stats,
};

static int cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why) snprintf(why, why_len, "%s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0 && why) snprintf(why, why_len, "the CUDA runtime found no device");
    return n;
}

/* The device's compute capability major version (0 when it cannot be read). */
static int compute_major(int device)
{
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return major;
}

static int cuda_has_tf32(int device) { return compute_major(device) >= 8; }

/* The device's compute capability as major * 10 + minor (75 for 7.5), 0
 * when it cannot be read. */
static int compute_sm(int device)
{
    int minor = 0;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return compute_major(device) * 10 + minor;
}

/* The oldest compute capability this build has kernels for: the first of
 * the Makefile's CUDA_ARCHS (ascending). An older device would open, then
 * fail its first launch with "no kernel image": refused at open instead. */
#ifndef MR_CUDA_MIN_SM
#define MR_CUDA_MIN_SM 75
#endif

static int cuda_has_fp16_tensor_cores(int device) { return compute_major(device) >= 7; }

static int env_flag(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    return strcmp(v, "0") != 0;
}

static mr_status cuda_create(const mr_backend_params *p, mr_backend *out, mr_error *err)
{
    char why[256];
    int count = cuda_device_count(why, sizeof why);
    if (count == 0) return mr_fail(err, MR_ERR_BACKEND, "no CUDA device: %s", why);
    if (p->device < 0 || p->device >= count)
        return mr_fail(err, MR_ERR_CONFIG, "cuda:%d: no such device (%d present)", p->device, count);
    int sm = compute_sm(p->device);
    if (sm < MR_CUDA_MIN_SM)
        return mr_fail(err, MR_ERR_BACKEND, "cuda:%d: too old a GPU: compute capability %d.%d, and this build's "
                       "kernels need %d.%d or later (Makefile CUDA_ARCHS)", p->device, sm / 10, sm % 10,
                       MR_CUDA_MIN_SM / 10, MR_CUDA_MIN_SM % 10);
    if (p->precision != MR_PRECISION_DEFAULT && p->precision != MR_PRECISION_FP32 &&
        p->precision != MR_PRECISION_TF32 && p->precision != MR_PRECISION_FP16)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "cuda:%d: precision %d is not one of fp32, tf32, fp16", p->device,
                       (int)p->precision);
    int fp16 = p->precision == MR_PRECISION_FP16;
    /* The default is the device's best fp32-range math: TF32 where it has it. */
    int tf32 = p->precision == MR_PRECISION_TF32 ||
               (p->precision == MR_PRECISION_DEFAULT && cuda_has_tf32(p->device));
    if (tf32 && !cuda_has_tf32(p->device))
        return mr_fail(err, MR_ERR_UNSUPPORTED, "cuda:%d: TF32 needs compute capability 8.0 or later", p->device);
    if (fp16 && !cuda_has_fp16_tensor_cores(p->device))
        return mr_fail(err, MR_ERR_UNSUPPORTED, "cuda:%d: --precision fp16 needs fp16 tensor cores (compute "
                       "capability 7.0 or later)", p->device);
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return mr_fail(err, MR_ERR_OOM, "out of memory");
    c->device = p->device;
    c->fp16 = fp16;
    c->tf32 = fp16 ? 0 : tf32; /* fp16 runs every layer in fp16; no fp32 GEMM is left for TF32 */
    c->fold = !p->no_fold;
    c->sync_each = env_flag("MR_CUDA_SYNC", 0);
    c->fuse_z = env_flag("MR_CUDA_FUSED_Z", 0);
    c->conv_find = env_flag("MR_CUDA_CONV_FIND", 0);
    c->host_post = env_flag("MR_CUDA_HOST_POST", 0);
    c->use_graphs = env_flag("MR_CUDA_GRAPHS", 1);
    c->counts_wanted = env_flag("MR_CUDA_DEVICE_COUNTS", 1) && !c->host_post;
    mr_status st = MR_OK;
    cudaError_t e = cudaSetDevice(c->device);
    /* before this context allocates anything: what it takes is measured from here (cuda_device_memory) */
    size_t total = 0;
    if (e == cudaSuccess) e = cudaMemGetInfo(&c->free_at_open, &total);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) st = cuda_fail(err, "cuda backend", "device/stream setup", e);
    if (st == MR_OK) {
        cudnnStatus_t s = cudnnCreate(&c->cudnn);
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetStream(c->cudnn, c->stream);
        if (s != CUDNN_STATUS_SUCCESS) st = cudnn_fail(err, "cuda backend", "handle setup", s);
    }
    if (st == MR_OK) {
        /* the per-image parameters (cuda_internal.h): one small block each side */
        e = cudaMallocHost((void **)&c->h_image, sizeof *c->h_image);
        if (e == cudaSuccess) {
            memset(c->h_image, 0, sizeof *c->h_image);
            e = cudaMalloc((void **)&c->d_image, sizeof *c->d_image);
        }
        for (int k = 0; k < CUDA_IMAGE_PARTS && e == cudaSuccess; k++)
            e = cudaEventCreateWithFlags(&c->image_copied[k], cudaEventDisableTiming);
        if (e != cudaSuccess) st = cuda_fail(err, "cuda backend", "the per-image parameter block", e);
    }
    if (st == MR_OK) {
        cublasStatus_t s = cublasCreate(&c->cublas);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(c->cublas, c->stream);
        /* cuBLAS's default math is strict fp32; TF32 only when asked. */
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasSetMathMode(c->cublas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
        if (s != CUBLAS_STATUS_SUCCESS) st = cublas_fail(err, "cuda backend", "handle setup", s);
    }
    if (st != MR_OK) {
        cuda_destroy(c);
        return st;
    }
    out->i = &cuda_backend_i;
    out->ctx = c;
    return MR_OK;
}

/* The one symbol engine/backend/backend_cuda_loader.c looks up in libdetect_cuda.so. */
const mr_cuda_entry *mr_cuda_backend_entry(void)
{
    static const mr_cuda_entry entry = {MR_CUDA_ENTRY_VERSION, cuda_device_count, cuda_has_tf32, cuda_create};
    return &entry;
}
