#include "ops/proposals.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/anchors.h"
#include "ops/nms.h"
#include "core/scratch.h"

typedef struct {
    float value;
    int index;
} scored_index;

/* Descending value; ties by ascending index so the order is reproducible. */
static int cmp_scored_desc(const void *a, const void *b)
{
    const scored_index *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static inline int scored_before(scored_index x, scored_index y)
{
    return x.value != y.value ? x.value > y.value : x.index < y.index;
}

/* Reorders a[0, n) so that its first k entries are the k first of the
 * sorted order (cmp_scored_desc), in any order: a quickselect on that
 * total order (ties broken by index, so the k are unique). P2's 182,400
 * anchors at 800x1216 took ~25 ms to sort whole for the 1000 kept; the
 * selection is linear. Past a depth bound (an adversarial order) the rest
 * is sorted whole, which is also correct. */
static void select_first(scored_index *a, int n, int k)
{
    int lo = 0, hi = n - 1, depth = 64;
    while (lo < hi && k > lo && k <= hi) {
        if (--depth == 0) {
            qsort(a + lo, (size_t)(hi - lo + 1), sizeof *a, cmp_scored_desc);
            return;
        }
        /* median of three as the pivot value */
        scored_index x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi], t;
        if (scored_before(y, x)) t = x, x = y, y = t;
        if (scored_before(z, y)) t = y, y = z, z = t;
        if (scored_before(y, x)) y = x;
        const scored_index pivot = y;
        int i = lo, j = hi;
        while (i <= j) { /* Hoare: [lo, j] before-or-equal pivot, [i, hi] after-or-equal */
            while (scored_before(a[i], pivot)) i++;
            while (scored_before(pivot, a[j])) j--;
            if (i <= j) {
                t = a[i], a[i] = a[j], a[j] = t;
                i++, j--;
            }
        }
        if (k <= j) hi = j;      /* the boundary lies in the left part */
        else if (k >= i) lo = i; /* in the right part */
        else return;             /* between: [j+1, i-1] equal the pivot, in place */
    }
}

static int level_count(const mr_proposal_params *p, int l)
{
    return p->grid_h[l] * p->grid_w[l] * p->num_anchors;
}

static int level_top_n(const mr_proposal_params *p, int l)
{
    int n = level_count(p, l);
    return n < p->pre_nms_top_n ? n : p->pre_nms_top_n;
}

/* Layout of the scratch area, in order. */
typedef struct {
    scored_index *ranked; /* the largest level's anchors */
    int *order;           /* every level's top anchor indices, level after level */
    float *boxes;         /* candidates [total,4] */
    float *scores;
    int *groups;
    int *keep;
    void *nms;
} proposal_scratch;

static size_t layout(const mr_proposal_params *p, void *base, proposal_scratch *s)
{
    int largest = 0, total = 0;
    for (int l = 0; l < p->num_levels; l++) {
        if (level_count(p, l) > largest) largest = level_count(p, l);
        total += level_top_n(p, l);
    }
    mr_scratch sc = {base, 0};
    s->ranked = scratch_take(&sc, sizeof(scored_index) * (size_t)largest);
    s->order = scratch_take(&sc, sizeof(int) * (size_t)total);
    s->boxes = scratch_take(&sc, sizeof(float) * 4 * (size_t)total);
    s->scores = scratch_take(&sc, sizeof(float) * (size_t)total);
    s->groups = scratch_take(&sc, sizeof(int) * (size_t)total);
    s->keep = scratch_take(&sc, sizeof(int) * (size_t)total);
    s->nms = scratch_take(&sc, nms_scratch_bytes(total));
    return sc.used;
}

size_t proposals_scratch_bytes(const mr_proposal_params *p)
{
    proposal_scratch unused;
    return layout(p, NULL, &unused);
}

int proposals_select(const mr_proposal_params *p, const int *const *ranked, const float *const *logits,
                     const float *const *deltas, float *out_boxes, float *out_scores, void *scratch)
{
    proposal_scratch s;
    layout(p, scratch, &s);
    int n = 0;
    for (int l = 0; l < p->num_levels; l++) {
        int top = level_top_n(p, l);
        for (int r = 0; r < top; r++) {
            int i = ranked[l][r];
            if (!proposal_candidate(p, l, p->cell_anchors[l], i, logits[l][i], deltas[l] + 4 * (size_t)i,
                                    s.boxes + 4 * (size_t)n, s.scores + n))
                continue;
            s.groups[n] = l;
            n++;
        }
    }
    int kept = batched_nms_cpu(s.boxes, s.scores, s.groups, n, p->nms_thresh, p->nms_flags, s.keep, s.nms);
    int per_level[MR_PROPOSAL_MAX_LEVELS] = {0}, out = 0;
    for (int k = 0; k < kept && out < p->post_nms_top_n; k++) {
        int i = s.keep[k];
        if (p->post_nms_per_level && per_level[s.groups[i]]++ >= p->post_nms_top_n) continue;
        memcpy(out_boxes + 4 * (size_t)out, s.boxes + 4 * (size_t)i, 4 * sizeof(float));
        out_scores[out++] = s.scores[i];
    }
    return out;
}

int proposals_cpu(const mr_proposal_params *p, const float *const *logits, const float *const *deltas,
                  float *out_boxes, float *out_scores, void *scratch)
{
    proposal_scratch s;
    layout(p, scratch, &s);
    const int *ranked[MR_PROPOSAL_MAX_LEVELS];
    int base = 0;
    for (int l = 0; l < p->num_levels; l++) {
        int count = level_count(p, l), top = level_top_n(p, l);
        for (int i = 0; i < count; i++) {
            s.ranked[i].value = logits[l][i];
            s.ranked[i].index = i;
        }
        /* the top ones found first (linear), then only they are sorted */
        if (top < count) select_first(s.ranked, count, top);
        qsort(s.ranked, (size_t)top, sizeof *s.ranked, cmp_scored_desc);
        for (int r = 0; r < top; r++) s.order[base + r] = s.ranked[r].index;
        ranked[l] = s.order + base;
        base += top;
    }
    return proposals_select(p, ranked, logits, deltas, out_boxes, out_scores, scratch);
}
