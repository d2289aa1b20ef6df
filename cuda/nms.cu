/* Batched (per-group) NMS on the GPU: batched_nms_cpu's result and order
 * (engine/ops/nms.c), with the bitmask algorithm of Detectron's and
 * maskrcnn-benchmark's GPU NMS, and no host round trip.
 *
 * Input: n candidate slots (cuda_box_cand: box, score, group) and valid[n];
 * invalid slots take no part. Groups must lie in 0..groups-1 (class ids,
 * FPN levels) and no group may hold more than max_group valid slots.
 * Output: keep[0..*kept) the kept slots by descending score, ties by slot
 * (the CPU's order: its candidate indices are the valid slots in slot
 * order); *kept = -1 when the group limits were broken (nothing else is
 * then meaningful).
 *
 * Steps, all on the stream:
 *  1. key_kernel: nms_sort_key(group, score) per valid slot (nms.h, the key
 *     batched_nms_cpu sorts by), UINT64_MAX for the rest; a per-group count.
 *  2. a stable CUB radix sort of (key, slot): (group, score desc, slot),
 *     batched_nms_cpu's visiting order; the invalid slots sort last.
 *  3. seg_kernel (one thread, `groups` steps): each group's start, size,
 *     64-bit words per mask row, mask offset, first row block.
 *  4. mask_kernel: per group, the upper triangle of 64x64 tiles; thread r
 *     of a tile computes row r's word (nms_mask_word: the CPU's IoU and
 *     suppression test, box_iou_areas and nms_suppresses).
 *  5. reduce_kernel: one block per group visits its rows in order, a tile
 *     of 64 rows at a time in shared memory: nms_block_keep decides the 64
 *     rows (sequential, over one word), then the kept rows' later words are
 *     ORed into the removed bits in parallel. Kept slots are flagged.
 *  6. merge: keys nms_score_key(score) for the kept slots (0xFFFFFFFF for
 *     the rest), stably radix-sorted with their slots: descending score,
 *     ties by slot, as batched_nms_cpu's final sort.
 * cuda_nms_ordered_launch: the box head's class-agnostic pass over the
 * kept slots of a batched NMS, in their order (nms_ordered_cpu's result,
 * up to a cap); see ordered_kernel.
 * Per group, not by offsetting boxes by class (torchvision's trick), which
 * would add float rounding to the coordinates: this is exactly the greedy
 * NMS of nms.c (tests/unit/test_nms_bitmask.c runs steps 2-6 in C with
 * the same header functions against batched_nms_cpu). */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_launch.cuh"
#include "ops/nms.h"

typedef struct {
    int start, size, words, rb; /* first sorted position, valid slots, words per row, first row block */
    unsigned long long base;    /* the group's mask offset, in words */
} nms_seg;

typedef struct {
    size_t keys, keys_sorted, slots, order, hist, bad, total_rb, segs, mask, flags, key32, key32_sorted, temp, total;
    int words; /* words per row of the largest group */
} nms_layout;

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static cudaError_t nms_layout_of(int n, int max_group, int groups, nms_layout *L)
{
    size_t un = (size_t)(n > 0 ? n : 1), t64 = 0, t32 = 0;
    if (n > 0) {
        cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, t64, (const uint64_t *)NULL, (uint64_t *)NULL,
                                                        (const int *)NULL, (int *)NULL, n);
        if (e == cudaSuccess)
            e = cub::DeviceRadixSort::SortPairs(NULL, t32, (const uint32_t *)NULL, (uint32_t *)NULL,
                                                (const int *)NULL, (int *)NULL, n);
        if (e != cudaSuccess) return e;
    }
    L->words = (max_group + 63) / 64;
    size_t o = 0;
    L->keys = o, o += align256(sizeof(uint64_t) * un);
    L->keys_sorted = o, o += align256(sizeof(uint64_t) * un);
    L->slots = o, o += align256(sizeof(int) * un);
    L->order = o, o += align256(sizeof(int) * un);
    /* hist, bad and total_rb are contiguous: one memset clears them */
    L->hist = o;
    L->bad = o + sizeof(int) * (size_t)groups;
    L->total_rb = L->bad + sizeof(int);
    o += align256(sizeof(int) * ((size_t)groups + 2));
    L->segs = o, o += align256(sizeof(nms_seg) * (size_t)groups);
    L->mask = o, o += align256(sizeof(uint64_t) * un * (size_t)(L->words > 0 ? L->words : 1));
    L->flags = o, o += align256(un);
    L->key32 = o, o += align256(sizeof(uint32_t) * un);
    L->key32_sorted = o, o += align256(sizeof(uint32_t) * un);
    L->temp = o, o += align256((t64 > t32 ? t64 : t32) + 1);
    L->total = o;
    return cudaSuccess;
}

static __global__ void key_kernel(const cuda_box_cand *cand, const unsigned char *valid, int n, int groups,
                                  uint64_t *keys, int *slots, int *hist, int *bad)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint64_t key = ~(uint64_t)0;
        if (valid[i]) {
            int g = cand[i].group;
            if (g >= 0 && g < groups) {
                key = nms_sort_key(g, cand[i].score);
                atomicAdd(hist + g, 1);
            } else {
                atomicOr(bad, 1);
            }
        }
        keys[i] = key;
        slots[i] = i;
    }
}

/* One thread: `groups` steps of prefix sums. */
static __global__ void seg_kernel(const int *hist, int groups, int max_group, nms_seg *segs, int *total_rb, int *bad)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int start = 0, rb = 0;
    unsigned long long base = 0;
    for (int g = 0; g < groups; g++) {
        nms_seg s;
        s.start = start;
        s.size = hist[g];
        if (s.size > max_group) {
            *bad = 1;
            s.size = 0; /* never read past the planned mask */
        }
        s.words = (s.size + 63) / 64;
        s.rb = rb;
        s.base = base;
        segs[g] = s;
        start += hist[g];
        rb += s.words;
        base += (unsigned long long)s.size * (unsigned long long)s.words;
    }
    *total_rb = rb;
}

/* Block (x, y): column block x of row block y (counted over all groups). */
static __global__ void mask_kernel(const cuda_box_cand *cand, const int *order, const nms_seg *segs, int groups,
                                   const int *total_rb, float thr, int plus_one, uint64_t *mask)
{
    __shared__ float cols[64 * 4], areas[64];
    const int cb = blockIdx.x, t = threadIdx.x, total = *total_rb;
    for (int y = blockIdx.y; y < total; y += gridDim.y) {
        int lo = 0, hi = groups; /* the last group whose first row block is <= y */
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (segs[mid].rb <= y) lo = mid;
            else hi = mid;
        }
        const nms_seg s = segs[lo];
        const int rb = y - s.rb;
        if (cb < rb || cb >= s.words) continue; /* block-uniform: the lower triangle is never read */
        const int ncols = min(64, s.size - cb * 64), nrows = min(64, s.size - rb * 64);
        if (t < ncols) {
            const cuda_box_cand c = cand[order[s.start + cb * 64 + t]];
            for (int k = 0; k < 4; k++) cols[4 * t + k] = c.box[k];
            areas[t] = box_area(c.box, plus_one);
        }
        __syncthreads();
        if (t < nrows) {
            const int a = rb * 64 + t;
            const cuda_box_cand c = cand[order[s.start + a]];
            mask[s.base + (size_t)a * (size_t)s.words + (size_t)cb] =
                nms_mask_word(c.box, box_area(c.box, plus_one), cols, areas, cb == rb ? t + 1 : 0, ncols, thr,
                              plus_one);
        }
        __syncthreads();
    }
}

/* Block g: group g's rows in order. Shared: removed[words], tile[64 * words]. */
static __global__ void reduce_kernel(const int *order, const nms_seg *segs, int groups, const uint64_t *mask,
                                     int max_words, unsigned char *flags, int *kept)
{
    extern __shared__ uint64_t shared[];
    uint64_t *removed = shared, *tile = shared + max_words;
    const int t = threadIdx.x, bd = blockDim.x;
    for (int g = blockIdx.x; g < groups; g += gridDim.x) {
        const nms_seg s = segs[g];
        const int W = s.words;
        const uint64_t *m = mask + s.base;
        for (int w = t; w < W; w += bd) removed[w] = 0;
        __syncthreads();
        for (int rb = 0; rb < W; rb++) {
            const int rows = min(64, s.size - rb * 64), width = W - rb;
            for (int i = t; i < rows * width; i += bd)
                tile[i] = m[(size_t)(rb * 64 + i / width) * (size_t)W + (size_t)(rb + i % width)];
            __syncthreads();
            /* every thread decides the same 64 rows from shared memory */
            const uint64_t kb = nms_block_keep(removed[rb], tile, (size_t)width, rows);
            for (int w = t + 1; w < width; w += bd) {
                uint64_t acc = removed[rb + w];
                for (int r = 0; r < rows; r++)
                    if ((kb >> r) & 1) acc |= tile[(size_t)r * (size_t)width + (size_t)w];
                removed[rb + w] = acc;
            }
            for (int r = t; r < rows; r += bd)
                if ((kb >> r) & 1) flags[order[s.start + rb * 64 + r]] = 1;
            if (t == 0) atomicAdd(kept, __popcll((unsigned long long)kb));
            __syncthreads();
        }
    }
}

static __global__ void merge_key_kernel(const cuda_box_cand *cand, const unsigned char *flags, int n, uint32_t *keys)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        keys[i] = flags[i] ? nms_score_key(cand[i].score) : 0xFFFFFFFFu;
}

static __global__ void finish_kernel(const int *bad, int *kept)
{
    if (blockIdx.x == 0 && threadIdx.x == 0 && *bad) *kept = -1;
}

/* One block of 64 threads: greedy NMS over cand[order[0..*n)] visited in
 * that order (nms_ordered_cpu), stopping once `cap` boxes are kept, which
 * leaves the first `cap` kept as they are. 64 boxes at a time: each thread
 * tests its box against the boxes kept so far (nms_any_suppresses) and
 * computes its row of the tile's mask (nms_mask_word); thread 0 decides
 * the tile in order (nms_block_keep) and appends the kept. kept_boxes
 * [cap][4] and kept_areas [cap] are scratch. *n < 0 (the NMS before it
 * failed) gives *kept = -1. */
static __global__ void ordered_kernel(const cuda_box_cand *cand, const int *order, const int *n_in, int cap,
                                      float thr, int plus_one, float *kept_boxes, float *kept_areas, int *keep,
                                      int *kept)
{
    __shared__ float cols[64 * 4], areas[64];
    __shared__ uint64_t rows[64];
    __shared__ int sup[64], nk;
    const int t = threadIdx.x, n = *n_in;
    if (n < 0) {
        if (t == 0) *kept = -1;
        return;
    }
    if (t == 0) nk = 0;
    __syncthreads();
    for (int base = 0; base < n && nk < cap; base += 64) { /* nk: the same in every thread here */
        const int count = min(64, n - base);
        if (t < count) {
            const cuda_box_cand c = cand[order[base + t]];
            for (int k = 0; k < 4; k++) cols[4 * t + k] = c.box[k];
            areas[t] = box_area(c.box, plus_one);
            sup[t] = nms_any_suppresses(kept_boxes, kept_areas, nk, c.box, areas[t], thr, plus_one);
        }
        __syncthreads();
        if (t < count) rows[t] = nms_mask_word(cols + 4 * t, areas[t], cols, areas, t + 1, count, thr, plus_one);
        __syncthreads();
        if (t == 0) {
            uint64_t removed = 0;
            for (int r = 0; r < count; r++)
                if (sup[r]) removed |= (uint64_t)1 << r;
            const uint64_t kb = nms_block_keep(removed, rows, 1, count);
            for (int r = 0; r < count && nk < cap; r++) {
                if (!((kb >> r) & 1)) continue;
                keep[nk] = order[base + r];
                for (int k = 0; k < 4; k++) kept_boxes[4 * nk + k] = cols[4 * r + k];
                kept_areas[nk] = areas[r];
                nk++;
            }
        }
        __syncthreads();
    }
    if (t == 0) *kept = nk;
}

extern "C" mr_status cuda_nms_ordered_launch(cudaStream_t s, const cuda_box_cand *cand, const int *order,
                                             const int *n, int cap, double iou_thresh, int flags, float *d_scratch,
                                             int *keep, int *kept, const char *op, mr_error *err)
{
    if (cap < 1) return mr_fail(err, MR_ERR_INTERNAL, "%s: ordered NMS keeping %d boxes", op, cap);
    ordered_kernel<<<1, 64, 0, s>>>(cand, order, n, cap, nms_float_threshold(iou_thresh, flags),
                                    flags & MR_NMS_PLUS_ONE, d_scratch, d_scratch + 4 * (size_t)cap, keep, kept);
    return cuda_launch_status(op, err);
}

extern "C" mr_status cuda_nms_scratch_bytes(int n, int max_group, int groups, size_t *bytes, mr_error *err)
{
    nms_layout L;
    cudaError_t e = nms_layout_of(n, max_group, groups, &L);
    if (e != cudaSuccess) return mr_fail(err, MR_ERR_BACKEND, "nms: cub size query failed: %s", cudaGetErrorString(e));
    *bytes = L.total;
    return MR_OK;
}

static mr_status nms_fail(mr_error *err, const char *op, const char *what, cudaError_t e)
{
    return mr_fail(err, MR_ERR_BACKEND, "%s: NMS %s failed: %s", op, what, cudaGetErrorString(e));
}

extern "C" mr_status cuda_batched_nms_launch(cudaStream_t s, void *d_scratch, const cuda_box_cand *cand,
                                             const unsigned char *valid, int n, int max_group, int groups,
                                             double iou_thresh, int flags, int *keep, int *kept, const char *op,
                                             mr_error *err)
{
    if (n < 0 || max_group < 0 || groups < 1)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: NMS of %d slots, groups of %d, %d groups", op, n, max_group, groups);
    cudaError_t e = cudaMemsetAsync(kept, 0, sizeof(int), s);
    if (e != cudaSuccess) return nms_fail(err, op, "clear", e);
    if (n == 0 || max_group == 0) return MR_OK;
    nms_layout L;
    e = nms_layout_of(n, max_group, groups, &L);
    if (e != cudaSuccess) return nms_fail(err, op, "size query", e);
    char *base = (char *)d_scratch;
    uint64_t *keys = (uint64_t *)(base + L.keys), *keys_sorted = (uint64_t *)(base + L.keys_sorted);
    int *slots = (int *)(base + L.slots), *order = (int *)(base + L.order), *hist = (int *)(base + L.hist);
    int *bad = (int *)(base + L.bad), *total_rb = (int *)(base + L.total_rb);
    nms_seg *segs = (nms_seg *)(base + L.segs);
    uint64_t *mask = (uint64_t *)(base + L.mask);
    unsigned char *keep_flags = (unsigned char *)(base + L.flags);
    uint32_t *key32 = (uint32_t *)(base + L.key32), *key32_sorted = (uint32_t *)(base + L.key32_sorted);
    size_t temp_bytes = L.total - L.temp;
    size_t shared = sizeof(uint64_t) * 65 * (size_t)L.words;

    e = cudaMemsetAsync(hist, 0, sizeof(int) * ((size_t)groups + 2), s);
    if (e == cudaSuccess) e = cudaMemsetAsync(keep_flags, 0, (size_t)n, s);
    if (e != cudaSuccess) return nms_fail(err, op, "clear", e);
    key_kernel<<<cuda_grid((size_t)n), MR_CUDA_BLOCK, 0, s>>>(cand, valid, n, groups, keys, slots, hist, bad);
    MR_TRY(cuda_launch_status(op, err));
    e = cub::DeviceRadixSort::SortPairs(base + L.temp, temp_bytes, keys, keys_sorted, slots, order, n, 0, 64, s);
    if (e != cudaSuccess) return nms_fail(err, op, "sort", e);
    seg_kernel<<<1, 1, 0, s>>>(hist, groups, max_group, segs, total_rb, bad);
    /* row blocks: at most one partial block per group beyond n / 64 */
    size_t rbs = ((size_t)n + 63) / 64 + (size_t)groups;
    dim3 grid((unsigned)L.words, (unsigned)(rbs < 65535 ? rbs : 65535));
    mask_kernel<<<grid, 64, 0, s>>>(cand, order, segs, groups, total_rb, nms_float_threshold(iou_thresh, flags),
                                    flags & MR_NMS_PLUS_ONE, mask);
    MR_TRY(cuda_launch_status(op, err));
    if (shared > 48 * 1024) {
        e = cudaFuncSetAttribute(reduce_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared);
        if (e != cudaSuccess) return nms_fail(err, op, "shared memory for groups this large", e);
    }
    reduce_kernel<<<(unsigned)(groups < 65535 ? groups : 65535), 64, shared, s>>>(order, segs, groups, mask,
                                                                                   L.words, keep_flags, kept);
    merge_key_kernel<<<cuda_grid((size_t)n), MR_CUDA_BLOCK, 0, s>>>(cand, keep_flags, n, key32);
    MR_TRY(cuda_launch_status(op, err));
    e = cub::DeviceRadixSort::SortPairs(base + L.temp, temp_bytes, key32, key32_sorted, slots, keep, n, 0, 32, s);
    if (e != cudaSuccess) return nms_fail(err, op, "merge sort", e);
    finish_kernel<<<1, 1, 0, s>>>(bad, kept);
    return cuda_launch_status(op, err);
}
