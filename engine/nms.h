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
 * Cost O(n log n + kept * n), the IoU pass vectorised: 100k random boxes
 * with 54k kept take 6 s on one core (torchvision: 69 s); 1000 boxes a few
 * ms. No allocation: scratch must hold nms_scratch_bytes(n) bytes (one size
 * serves both functions); boxes, scores, groups are not modified. */
#ifndef MR_NMS_H
#define MR_NMS_H

#include <stddef.h>

/* Bits of the `flags` argument. 0 and 1 are the plain plus_one values, so
 * a caller passing box_coder's plus_one gets the default rule. */
#define MR_NMS_PLUS_ONE 1    /* Detectron widths: x2 - x1 + 1 */
#define MR_NMS_SUPPRESS_GE 2 /* suppress at IoU >= (float)iou_thresh (cython_nms) */

size_t nms_scratch_bytes(int n);

int nms_cpu(const float *boxes, const float *scores, int n, double iou_thresh, int flags, int *keep, void *scratch);

int batched_nms_cpu(const float *boxes, const float *scores, const int *groups, int n, double iou_thresh, int flags,
                    int *keep, void *scratch);

#endif
