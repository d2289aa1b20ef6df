/* The RPN's per-level ranking on the GPU: every level's anchors sorted by
 * descending objectness logit with CUB (cub::DeviceRadixSort, from the CUDA
 * toolkit), and the first pre_nms_top_n indices of each level copied, level
 * after level, into one device array, where cuda/proposals.cu decodes and
 * filters them (proposals_select's order: engine/ops/proposals.c). Nothing
 * comes to the host. Radix sort is stable, so equal logits stay in
 * ascending anchor order: the CPU's tie rule. (Differences only at exotic
 * keys: CUB orders NaN logits by their bits, and may order -0.0 below
 * +0.0.)
 *
 * Device scratch, sized by cub's own size query (cuda_rank_scratch_bytes):
 * sorted keys, sorted indices and 0..n-1 for the largest level, and cub's
 * temporary storage for the largest query. */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_launch.cuh"

static __global__ void iota_kernel(int *v, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = i;
}

typedef struct {
    size_t keys, values, iota, temp, total; /* byte offsets (keys at 0), total size */
    int largest;
} rank_layout;

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static cudaError_t rank_layout_of(const int *counts, int levels, rank_layout *L)
{
    size_t temp = 0;
    L->largest = 0;
    for (int l = 0; l < levels; l++) {
        if (counts[l] > L->largest) L->largest = counts[l];
        size_t bytes = 0;
        cudaError_t e = cub::DeviceRadixSort::SortPairsDescending(NULL, bytes, (const float *)NULL, (float *)NULL,
                                                                  (const int *)NULL, (int *)NULL, counts[l]);
        if (e != cudaSuccess) return e;
        if (bytes > temp) temp = bytes;
    }
    size_t n = (size_t)(L->largest > 0 ? L->largest : 1);
    L->keys = 0;
    L->values = align256(sizeof(float) * n);
    L->iota = L->values + align256(sizeof(int) * n);
    L->temp = L->iota + align256(sizeof(int) * n);
    L->total = L->temp + align256(temp > 0 ? temp : 1);
    return cudaSuccess;
}

extern "C" mr_status cuda_rank_scratch_bytes(const int *counts, int levels, size_t *bytes, mr_error *err)
{
    rank_layout L;
    cudaError_t e = rank_layout_of(counts, levels, &L);
    if (e != cudaSuccess)
        return mr_fail(err, MR_ERR_BACKEND, "rpn_proposals: cub size query failed: %s", cudaGetErrorString(e));
    *bytes = L.total;
    return MR_OK;
}

/* Sorts one level and copies its first `top` indices to d_ranked. The next
 * level's sort reuses the buffers after the copy, in stream order. */
static cudaError_t rank_level(cudaStream_t s, char *scratch, const rank_layout *L, const float *d_logits, int count,
                              int top, int *d_ranked)
{
    size_t temp_bytes = L->total - L->temp;
    cudaError_t e = cub::DeviceRadixSort::SortPairsDescending(
        scratch + L->temp, temp_bytes, d_logits, (float *)(scratch + L->keys), (const int *)(scratch + L->iota),
        (int *)(scratch + L->values), count, 0, 32, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d_ranked, scratch + L->values, sizeof(int) * (size_t)top, cudaMemcpyDeviceToDevice, s);
    return e;
}

extern "C" mr_status cuda_rank_launch(cudaStream_t s, void *d_scratch, const float *const *d_logits,
                                      const int *counts, const int *tops, int levels, int *d_ranked, mr_error *err)
{
    rank_layout L;
    cudaError_t e = rank_layout_of(counts, levels, &L);
    if (e != cudaSuccess)
        return mr_fail(err, MR_ERR_BACKEND, "rpn_proposals: cub size query failed: %s", cudaGetErrorString(e));
    char *scratch = (char *)d_scratch;
    if (L.largest > 0) {
        iota_kernel<<<cuda_grid((size_t)L.largest), MR_CUDA_BLOCK, 0, s>>>((int *)(scratch + L.iota), L.largest);
        MR_TRY(cuda_launch_status("rpn_proposals (iota)", err));
    }
    size_t base = 0;
    for (int l = 0; l < levels; l++) {
        if (tops[l] > counts[l] || tops[l] < 0)
            return mr_fail(err, MR_ERR_INTERNAL, "rpn_proposals: top %d of %d anchors", tops[l], counts[l]);
        if (tops[l] == 0) continue;
        e = rank_level(s, scratch, &L, d_logits[l], counts[l], tops[l], d_ranked + base);
        if (e != cudaSuccess)
            return mr_fail(err, MR_ERR_BACKEND, "rpn_proposals: ranking level %d failed: %s", l,
                           cudaGetErrorString(e));
        base += (size_t)tops[l];
    }
    return MR_OK;
}
