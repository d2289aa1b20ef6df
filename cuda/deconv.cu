/* The second half of the 2x2 stride-2 transposed convolution: the GEMM's
 * [n*h*w, 4*cout] output (column k*cout + co, k = ki*2 + kj) scattered to
 * y [n, 2h, 2w, cout] (input pixel (i, j) -> output (2i + ki, 2j + kj)),
 * with the bias and ReLU in the same pass. One thread per output element;
 * consecutive threads write consecutive channels. tmp and y are float, or
 * both half (--precision fp16: the GEMM wrote halves), the bias float. */
#include "cuda_launch.cuh"
#include "elem.cuh"

template <typename T>
static __global__ void depth_to_space_kernel(const T *tmp, const float *bias, T *y, int n, int h, int w, int cout,
                                             int relu)
{
    size_t total = (size_t)n * (2 * h) * (2 * w) * cout;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int co = (int)(i % (size_t)cout);
        size_t pix = i / (size_t)cout;
        int ox = (int)(pix % (size_t)(2 * w));
        int oy = (int)((pix / (size_t)(2 * w)) % (size_t)(2 * h));
        int b = (int)(pix / ((size_t)(2 * w) * (size_t)(2 * h)));
        int k = (oy & 1) * 2 + (ox & 1);
        size_t row = ((size_t)b * h + (size_t)(oy >> 1)) * (size_t)w + (size_t)(ox >> 1);
        float v = elem_load(tmp, row * (size_t)(4 * cout) + (size_t)k * cout + co) + bias[co];
        elem_store(y, i, relu && v < 0.0f ? 0.0f : v);
    }
}

template <typename T>
static void depth_to_space(cudaStream_t s, const T *tmp, const float *bias, T *y, int n, int h, int w, int cout,
                           int relu)
{
    size_t total = (size_t)n * (2 * h) * (2 * w) * cout;
    depth_to_space_kernel<T><<<cuda_grid(total), MR_CUDA_BLOCK, 0, s>>>(tmp, bias, y, n, h, w, cout, relu);
}

extern "C" mr_status cuda_depth_to_space_launch(cudaStream_t s, const char *op, mr_elem_type t, const void *tmp,
                                                const float *bias, void *y, int n, int h, int w, int cout, int relu,
                                                mr_error *err)
{
    if (n < 0 || h < 0 || w < 0 || cout <= 0)
        return mr_fail(err, MR_ERR_SHAPE, "%s: bad deconv output [%d,%d,%d,%d]", op, n, 2 * h, 2 * w, cout);
    if (n == 0 || h == 0 || w == 0) return MR_OK;
    if (t == MR_ELEM_F16)
        depth_to_space(s, (const __half *)tmp, bias, (__half *)y, n, h, w, cout, relu);
    else
        depth_to_space(s, (const float *)tmp, bias, (float *)y, n, h, w, cout, relu);
    return cuda_launch_status(op, err);
}
