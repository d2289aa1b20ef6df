/* Greedy non-maximum suppression on the CPU.
 *
 * Inputs: boxes [n,4] float [x1,y1,x2,y2] (any consistent pixel frame),
 * scores [n], optional groups [n] (class id or FPN level; any int values).
 * Output: keep[] receives the indices of the kept boxes, highest score
 * first; the return value is how many (0 for n <= 0). keep must hold n ints.
 *
 * Semantics (torchvision 0.14 `csrc/ops/cpu/nms_kernel.cpp`,
 * `ops/boxes.py: _batched_nms_vanilla`; Detectron `utils/cython_nms.pyx`
 * with plus_one):
 *  - boxes are visited by descending score; equal scores in ascending
 *    index order (a stable sort). NaN scores sort first, as in torch.sort.
 *    torch 1.13's CPU sort is not stable for more than ~16 equal scores,
 *    so for exact ties torchvision's order is implementation-defined and
 *    ours is the documented one.
 *  - a visited box that is not suppressed is kept and suppresses every
 *    later box j whose IoU with it (box_coder.h: box_iou_areas; the
 *    MR_NMS_PLUS_ONE flag selects +1 widths) is > iou_thresh. iou_thresh
 *    is a double because the references compare the float IoU with a
 *    Python (double) threshold: an IoU of exactly 0.3f (= 0.30000001) is
 *    > 0.3 but not > 0.3f. (The loops use the equivalent float test
 *    x > f, f the largest float <= iou_thresh.)
 *  - with the MR_NMS_SUPPRESS_GE flag the test is instead IoU >=
 *    (float)iou_thresh, as Detectron `utils/cython_nms.pyx` (`np.float32_t
 *    thresh`, `if ovr >= thresh`) and maskrcnn-benchmark's CPU
 *    `csrc/cpu/nms_cpu.cpp` (`const float threshold`, `ovr >= threshold`).
 *    The two rules differ only for an IoU exactly equal to (float)thresh
 *    (for 0.5 and 0.7; for 0.3 they agree, since 0.3f > 0.3). Its CUDA
 *    kernel (`csrc/cuda/nms.cu`) uses `> nms_overlap_thresh` (float), which
 *    the default rule reproduces for 0.5 and 0.7.
 *  - batched_nms_cpu runs that independently per group; the kept indices
 *    of all groups are returned sorted by descending score, ties by index.
 *    torchvision's batched_nms uses this algorithm (_batched_nms_vanilla)
 *    above 1000 boxes on the CPU and the coordinate-offset trick below;
 *    the trick adds float rounding to the coordinates, so for non-integer
 *    coordinates near an IoU tie it can decide differently.
 *
 *  - nms_ordered_cpu visits boxes in a given order instead of sorting
 *    them (the box head's class-agnostic pass over batched_nms_cpu's
 *    output, already in its visiting order); the CUDA backend's version
 *    (cuda/nms.cu) tests each box with nms_any_suppresses below.
 *  - the CUDA backend's batched NMS (cuda/nms.cu, the bitmask algorithm)
 *    returns the same kept indices in the same order; both sort by
 *    nms_sort_key and test with nms_suppresses below
 *    (tests/unit/test_nms_bitmask.c checks an emulation of it).
 *
 * Cost O(n log n + kept * n), the IoU pass vectorised: 100k random boxes
 * with 54k kept take 6 s on one core (torchvision: 69 s); 1000 boxes a few
 * ms. No allocation: scratch must hold nms_scratch_bytes(n) bytes (one size
 * serves both functions); boxes, scores, groups are not modified. */
#ifndef MR_NMS_H
#define MR_NMS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/box_coder.h"
#include "core/hd.h"

/* Bits of the `flags` argument. 0 and 1 are the plain plus_one values, so
 * a caller passing box_coder's plus_one gets the default rule. */
#define MR_NMS_PLUS_ONE 1    /* Detectron widths: x2 - x1 + 1 */
#define MR_NMS_SUPPRESS_GE 2 /* suppress at IoU >= (float)iou_thresh (cython_nms) */

/* ---- shared math: nms.c and the CUDA bitmask NMS (cuda/nms.cu) ---- */

/* The float threshold of the suppression test nms_suppresses(iou, f).
 * Default rule: for a float x, x > thr (in double, as the references
 * compare) exactly when x > f, f being the largest float <= thr: if f ==
 * thr trivially, and otherwise no float lies in (f, thr]. With
 * MR_NMS_SUPPRESS_GE (Detectron utils/cython_nms.pyx: `ovr >= thresh` with
 * a float32 thresh): x >= t, t = (float)thr, exactly when x > the float just
 * below t. Computed once per call, on the host. */
static inline float nms_float_threshold(double thr, int flags)
{
    float f = (float)thr;
    if (flags & MR_NMS_SUPPRESS_GE) return nextafterf(f, -INFINITY);
    if ((double)f > thr) f = nextafterf(f, -INFINITY);
    return f;
}

/* 1 if a kept box suppresses a later one at this IoU; NaN IoUs (zero
 * unions) fail, as in the references. */
MR_HD static inline int nms_suppresses(float iou, float thr_f) { return iou > thr_f; }

/* The visiting order as one unsigned key: ascending keys are descending
 * scores, NaN first (torch.sort(descending) puts NaN first), -0.0 equal to
 * +0.0. Equal keys are equal scores, left to the index tie rule. No
 * non-NaN score maps to 0 and none to 0xFFFFFFFF, so callers may use the
 * latter for "no candidate". */
MR_HD static inline uint32_t nms_score_key(float score)
{
    if (score != score) return 0u;
    union {
        float f;
        uint32_t u;
    } v;
    v.f = score == 0.0f ? 0.0f : score; /* -0.0 -> +0.0 */
    /* monotone ascending map of the float order, then reversed */
    uint32_t asc = (v.u & 0x80000000u) ? ~v.u : (v.u | 0x80000000u);
    return ~asc;
}

/* (group ascending as a signed int, then nms_score_key): the batched
 * visiting order. Sorting (key, index) ascending is batched_nms_cpu's sort. */
MR_HD static inline uint64_t nms_sort_key(int group, float score)
{
    return ((uint64_t)((uint32_t)group ^ 0x80000000u) << 32) | nms_score_key(score);
}

/* Bitmask NMS (Detectron's and maskrcnn-benchmark's GPU NMS): over one
 * group's boxes in visiting order, row a of the mask has one bit per later
 * box c, set when a would suppress c. nms_mask_word computes the 64 bits of
 * row a against one block of columns: cols [count][4] with their areas
 * (box_area), bits begin..count-1 tested (begin = a's position + 1 on the
 * diagonal block, else 0). `a` is the kept (earlier) box, as in nms.c. */
MR_HD static inline uint64_t nms_mask_word(const float *a, float area_a, const float *cols, const float *col_areas,
                                           int begin, int count, float thr_f, int plus_one)
{
    uint64_t word = 0;
    for (int c = begin; c < count; c++) {
        float iou = box_iou_areas(a, cols + 4 * c, area_a, col_areas[c], plus_one);
        if (nms_suppresses(iou, thr_f)) word |= (uint64_t)1 << c;
    }
    return word;
}

/* The sequential step of the bitmask reduction for one block of up to 64
 * rows: `removed` holds the block's bits suppressed by kept rows of earlier
 * blocks; row r's mask word for this same block is rows[r * stride]. Visits
 * the rows in order, keeps each one not yet removed and removes what it
 * suppresses; returns the kept rows' bits. (Their words for later blocks are
 * then ORed into those blocks' removed bits, which needs no order.) */
MR_HD static inline uint64_t nms_block_keep(uint64_t removed, const uint64_t *rows, size_t stride, int count)
{
    uint64_t kept = 0;
    for (int r = 0; r < count; r++) {
        if ((removed >> r) & 1) continue;
        kept |= (uint64_t)1 << r;
        removed |= rows[(size_t)r * stride];
    }
    return kept;
}

/* Greedy NMS's test for a box b visited after nk kept boxes (kept [nk][4],
 * their areas): 1 if one of them suppresses it. Each kept box is the
 * first IoU argument, as in nms.c. */
MR_HD static inline int nms_any_suppresses(const float *kept, const float *kept_areas, int nk, const float *b,
                                           float area_b, float thr_f, int plus_one)
{
    for (int j = 0; j < nk; j++)
        if (nms_suppresses(box_iou_areas(kept + 4 * j, b, kept_areas[j], area_b, plus_one), thr_f)) return 1;
    return 0;
}

size_t nms_scratch_bytes(int n);

int nms_cpu(const float *boxes, const float *scores, int n, double iou_thresh, int flags, int *keep, void *scratch);

/* Greedy NMS over boxes[order[0..n)] visited in that order (no sort; no
 * group). keep receives the kept indices in that order and may be `order`
 * itself; returns how many. */
int nms_ordered_cpu(const float *boxes, const int *order, int n, double iou_thresh, int flags, int *keep,
                    void *scratch);

int batched_nms_cpu(const float *boxes, const float *scores, const int *groups, int n, double iou_thresh, int flags,
                    int *keep, void *scratch);

#endif
