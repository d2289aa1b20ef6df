/* CPU NMS; see nms.h for the contract. */
#include "ops/nms.h"

#include "ops/box_coder.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Sort key: nms_sort_key (nms.h, the order the CUDA NMS sorts by too),
 * then the index. qsort's comparator gets no context pointer, so
 * everything the order depends on lives in the key. */
typedef struct {
    uint64_t key;
    int idx;
} nms_key;

static int nms_key_cmp(const void *pa, const void *pb)
{
    const nms_key *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Scratch layout, each part 16-byte aligned:
 *   keys  nms_key[n]
 *   soa   float[6n]  x1, y1, x2, y2, area of the live candidates, in visiting
 *                    order, and their IoU with the current kept box
 *   id    int[n]     their original indices */
static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

size_t nms_scratch_bytes(int n)
{
    if (n <= 0) return 0;
    size_t un = (size_t)n;
    return align16(un * sizeof(nms_key)) + 6 * align16(un * sizeof(float)) + align16(un * sizeof(int));
}

typedef struct {
    nms_key *keys;
    float *x1, *y1, *x2, *y2, *area, *iou;
    int *id;
} nms_work;

static nms_work nms_work_layout(void *scratch, int n)
{
    nms_work w;
    char *p = scratch;
    size_t fl = align16((size_t)n * sizeof(float));
    w.keys = (nms_key *)p;
    p += align16((size_t)n * sizeof(nms_key));
    w.x1 = (float *)p;
    w.y1 = (float *)(p + fl);
    w.x2 = (float *)(p + 2 * fl);
    w.y2 = (float *)(p + 3 * fl);
    w.area = (float *)(p + 4 * fl);
    w.iou = (float *)(p + 5 * fl);
    w.id = (int *)(p + 6 * fl);
    return w;
}

/* Greedy NMS over keys[lo, hi) (already in visiting order). Appends the
 * kept original indices to keep and returns how many. The live candidates
 * are kept compacted (struct of arrays, streamed once per kept box); this
 * makes the same decisions as the reference's suppressed[] flags, because
 * whether j is suppressed by i depends on i and j alone. */
static int nms_range(const nms_work *w, const float *boxes, int lo, int hi, float thr_f, int plus_one, int *keep)
{
    float *restrict x1 = w->x1, *restrict y1 = w->y1, *restrict x2 = w->x2, *restrict y2 = w->y2;
    float *restrict area = w->area, *restrict iou = w->iou;
    int *id = w->id;
    int nalive = hi - lo, nkeep = 0;
    for (int t = 0; t < nalive; t++) {
        int i = w->keys[lo + t].idx;
        const float *b = boxes + 4 * (size_t)i;
        x1[t] = b[0];
        y1[t] = b[1];
        x2[t] = b[2];
        y2[t] = b[3];
        area[t] = box_area(b, plus_one);
        id[t] = i;
    }
    /* the live list is [base, base + nalive) */
    int base = 0;
    while (nalive > 0) {
        keep[nkeep++] = id[base];
        const float ix1 = x1[base], iy1 = y1[base], ix2 = x2[base], iy2 = y2[base], ai = area[base];
        const int b1 = base + 1, end = base + nalive;
        /* the IoUs in one SIMD pass ... */
        int nsup = 0;
#pragma omp simd reduction(+ : nsup)
        for (int t = b1; t < end; t++) {
            iou[t] = box_iou_coords(ix1, iy1, ix2, iy2, ai, x1[t], y1[t], x2[t], y2[t], area[t], plus_one);
            nsup += nms_suppresses(iou[t], thr_f);
        }
        /* ... then, only if something was suppressed, a branch-free
         * compaction that always copies and advances past survivors */
        int out = b1;
        if (nsup == 0) {
            out = end;
        } else {
            for (int t = b1; t < end; t++) {
                x1[out] = x1[t];
                y1[out] = y1[t];
                x2[out] = x2[t];
                y2[out] = y2[t];
                area[out] = area[t];
                id[out] = id[t];
                out += !nms_suppresses(iou[t], thr_f);
            }
        }
        base = b1;
        nalive = out - b1;
    }
    return nkeep;
}

int nms_cpu(const float *boxes, const float *scores, int n, double iou_thresh, int flags, int *keep, void *scratch)
{
    if (n <= 0) return 0;
    nms_work w = nms_work_layout(scratch, n);
    for (int i = 0; i < n; i++) {
        w.keys[i].key = nms_sort_key(0, scores[i]);
        w.keys[i].idx = i;
    }
    qsort(w.keys, (size_t)n, sizeof(nms_key), nms_key_cmp);
    return nms_range(&w, boxes, 0, n, nms_float_threshold(iou_thresh, flags), flags & MR_NMS_PLUS_ONE, keep);
}

int nms_ordered_cpu(const float *boxes, const int *order, int n, double iou_thresh, int flags, int *keep,
                    void *scratch)
{
    if (n <= 0) return 0;
    nms_work w = nms_work_layout(scratch, n);
    for (int i = 0; i < n; i++) w.keys[i].idx = order[i];
    /* nms_range copies every index out of keys before it writes keep */
    return nms_range(&w, boxes, 0, n, nms_float_threshold(iou_thresh, flags), flags & MR_NMS_PLUS_ONE, keep);
}

int batched_nms_cpu(const float *boxes, const float *scores, const int *groups, int n, double iou_thresh, int flags,
                    int *keep, void *scratch)
{
    if (n <= 0) return 0;
    nms_work w = nms_work_layout(scratch, n);
    for (int i = 0; i < n; i++) {
        w.keys[i].key = nms_sort_key(groups[i], scores[i]);
        w.keys[i].idx = i;
    }
    /* (group, score desc, index): each group's run is in visiting order */
    qsort(w.keys, (size_t)n, sizeof(nms_key), nms_key_cmp);
    int nkeep = 0;
    for (int lo = 0; lo < n;) {
        int hi = lo + 1;
        while (hi < n && groups[w.keys[hi].idx] == groups[w.keys[lo].idx]) hi++;
        nkeep += nms_range(&w, boxes, lo, hi, nms_float_threshold(iou_thresh, flags), flags & MR_NMS_PLUS_ONE,
                           keep + nkeep);
        lo = hi;
    }
    /* merge the groups: all kept, by descending score, ties by index */
    for (int k = 0; k < nkeep; k++) {
        w.keys[k].key = nms_sort_key(0, scores[keep[k]]);
        w.keys[k].idx = keep[k];
    }
    qsort(w.keys, (size_t)nkeep, sizeof(nms_key), nms_key_cmp);
    for (int k = 0; k < nkeep; k++) keep[k] = w.keys[k].idx;
    return nkeep;
}
