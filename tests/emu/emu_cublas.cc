/* The CUDA emulator's cuBLAS (tests/emu/README.md): the two GEMMs the
 * backend calls (cuda/backend_cuda_gemm.c), column-major as cuBLAS is.
 *
 * Checked as cuBLAS checks: m, n, k >= 0, leading dimensions at least the
 * stored rows, the type combinations cublasGemmEx supports here (A and B
 * both fp16 or both fp32, C fp16 or fp32, compute 32F or 32F_FAST_TF32),
 * and every operand inside one cudaMalloc allocation. Arithmetic: fp32
 * accumulation (oneDNN's sgemm in fixed tiles, emu_sgemm); fp32 operands rounded to TF32 when the handle's math mode
 * (CUBLAS_TF32_TENSOR_OP_MATH) or the compute type asks for it. */
#include <cublas_v2.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "emu_internal.h"

struct cublasContext {
    cudaStream_t stream;
    cublasMath_t math;
};

namespace {

size_t type_bytes(cudaDataType t) { return t == CUDA_R_16F ? 2 : 4; }

float load(cudaDataType t, const void *p, size_t i)
{
    if (t == CUDA_R_16F) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

struct gemm_work : emu_body {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, tf32;
    float alpha, beta;
    const void *A, *B;
    void *C;
    cudaDataType at, bt, ct;
    void run() override
    {
        /* op(A) as [m][k] and op(B) as [k][n], row-major floats */
        std::vector<float> a((size_t)m * k), b((size_t)k * n);
        for (int i = 0; i < m; i++)
            for (int p = 0; p < k; p++) {
                float v = load(at, A, ta == CUBLAS_OP_N ? (size_t)p * lda + i : (size_t)i * lda + p);
                a[(size_t)i * k + p] = tf32 ? emu_tf32(v) : v;
            }
        for (int p = 0; p < k; p++)
            for (int j = 0; j < n; j++) {
                float v = load(bt, B, tb == CUBLAS_OP_N ? (size_t)j * ldb + p : (size_t)p * ldb + j);
                b[(size_t)p * n + j] = tf32 ? emu_tf32(v) : v;
            }
        std::vector<float> c((size_t)m * n);
        emu_sgemm('N', 'N', m, n, k, a.data(), k, b.data(), n, c.data(), n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                size_t ci = (size_t)j * ldc + i;
                float v = alpha * c[(size_t)i * n + j];
                if (beta != 0.0f) v += beta * load(ct, C, ci);
                if (ct == CUDA_R_16F) ((__half *)C)[ci] = __float2half_rn(v);
                else ((float *)C)[ci] = v;
            }
    }
};

/* Elements a column-major [rows x cols] operand with leading dimension ld spans. */
size_t span(int rows, int cols, int ld) { return rows && cols ? (size_t)(cols - 1) * ld + rows : 0; }

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                    int ldb, const float *beta, void *C, cudaDataType ct, int ldc, int tf32)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
    const int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1) || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if ((k && (emu_check_device_range(A, type_bytes(at) * span(arows, acols, lda), "cuBLAS A") != cudaSuccess ||
               emu_check_device_range(B, type_bytes(bt) * span(brows, bcols, ldb), "cuBLAS B") != cudaSuccess)) ||
        emu_check_device_range(C, type_bytes(ct) * span(m, n, ldc), "cuBLAS C") != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    auto w = std::make_shared<gemm_work>();
    w->ta = ta, w->tb = tb, w->m = m, w->n = n, w->k = k, w->lda = lda, w->ldb = ldb, w->ldc = ldc;
    w->alpha = *alpha, w->beta = *beta, w->A = A, w->B = B, w->C = C, w->at = at, w->bt = bt, w->ct = ct;
    w->tf32 = tf32;
    return emu_submit(h->stream, "cuBLAS GEMM", w) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                   : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // namespace

void emu_sgemm(char transa, char transb, long M, long N, long K, const float *A, long lda, const float *B, long ldb,
               float *C, long ldc)
{
    const long tile = 256, row_tiles = (M + tile - 1) / tile, col_tiles = (N + tile - 1) / tile;
    /* inside the parallel loop oneDNN runs each call on its calling thread */
#pragma omp parallel for schedule(static)
    for (long t = 0; t < row_tiles * col_tiles; t++) {
        long r0 = t / col_tiles * tile, c0 = t % col_tiles * tile;
        long nr = M - r0 < tile ? M - r0 : tile, nc = N - c0 < tile ? N - c0 : tile;
        const float *a = transa == 'N' ? A + r0 * lda : A + r0;
        const float *b = transb == 'N' ? B + c0 : B + c0 * ldb;
        /* Every tile is copied into a whole 256 x 256 problem (zero-padded
         * where partial) in one layout: oneDNN's AVX2 sgemm sums an output
         * differently in a smaller problem or another layout (seen as other
         * bytes for a tile's rows when only the row count changed), so each
         * output is computed by the same call at the same place of a tile,
         * whatever M, N and the transpositions are. The copies are 1/128 of
         * the tile's arithmetic. */
        std::vector<float> ap((size_t)tile * K, 0.0f), bp((size_t)K * tile, 0.0f), cp((size_t)tile * tile);
        for (long i = 0; i < nr; i++)
            for (long p = 0; p < K; p++) ap[(size_t)i * K + p] = transa == 'N' ? a[i * lda + p] : a[p * lda + i];
        for (long p = 0; p < K; p++)
            for (long j = 0; j < nc; j++) bp[(size_t)p * tile + j] = transb == 'N' ? b[p * ldb + j] : b[j * ldb + p];
        dnnl_sgemm('N', 'N', tile, tile, K, 1.0f, ap.data(), K, bp.data(), tile, 0.0f, cp.data(), tile);
        for (long i = 0; i < nr; i++) memcpy(C + (r0 + i) * ldc + c0, &cp[(size_t)i * tile], sizeof(float) * nc);
    }
}

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = new cublasContext();
    (*h)->stream = nullptr;
    (*h)->math = CUBLAS_DEFAULT_MATH;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
    (void)h;
    if (bytes && emu_check_device_range(ws, bytes, "cublasSetWorkspace") != cudaSuccess)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS (emulated)";
    }
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    int tf32 = h && (h->math & CUBLAS_TF32_TENSOR_OP_MATH) && emu_device_sm() >= 80;
    return gemm(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc, tf32);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                            cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (at != bt || (at != CUDA_R_16F && at != CUDA_R_32F) || (ct != CUDA_R_16F && ct != CUDA_R_32F))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    int tf32 = at == CUDA_R_32F && emu_device_sm() >= 80 &&
               (compute == CUBLAS_COMPUTE_32F_FAST_TF32 || (h && (h->math & CUBLAS_TF32_TENSOR_OP_MATH)));
    return gemm(h, ta, tb, m, n, k, (const float *)alpha, A, at, lda, B, bt, ldb, (const float *)beta, C, ct, ldc,
                tf32);
}

} // extern "C"
