#include "ops/box_post.h"

#include <math.h>
#include <string.h>

#include "ops/nms.h"
#include "core/scratch.h"

typedef struct {
    float *probs;  /* [n,K] */
    float *boxes;  /* candidates [n*(K-1), 4] */
    float *scores;
    int *groups;
    int *keep;
    void *nms;
} box_post_scratch;

static size_t layout(const mr_box_post_params *p, int n, void *base, box_post_scratch *s)
{
    size_t cand = (size_t)n * (size_t)(p->num_classes - 1);
    mr_scratch sc = {base, 0};
    s->probs = scratch_take(&sc, sizeof(float) * (size_t)n * (size_t)p->num_classes);
    s->boxes = scratch_take(&sc, sizeof(float) * 4 * cand);
    s->scores = scratch_take(&sc, sizeof(float) * cand);
    s->groups = scratch_take(&sc, sizeof(int) * cand);
    s->keep = scratch_take(&sc, sizeof(int) * cand);
    s->nms = scratch_take(&sc, nms_scratch_bytes((int)cand));
    return sc.used;
}

size_t box_post_scratch_bytes(const mr_box_post_params *p, int n)
{
    box_post_scratch unused;
    return layout(p, n, NULL, &unused);
}

int box_post_cpu(const mr_box_post_params *p, const float *rois, const float *logits, const float *deltas, int n,
                 float *out_boxes, float *out_scores, float *out_labels, void *scratch)
{
    box_post_scratch s;
    layout(p, n, scratch, &s);
    int K = p->num_classes, cand = 0;
    for (int r = 0; r < n; r++) softmax_row(logits + (size_t)r * K, K, s.probs + (size_t)r * K);
    /* Candidates in RoI-major, class-minor order, as torchvision flattens them. */
    for (int r = 0; r < n; r++) {
        for (int k = 1; k < K; k++) {
            float score = s.probs[(size_t)r * K + k];
            if (!(score > p->score_thresh)) continue;
            float *box = s.boxes + 4 * (size_t)cand;
            const float *delta = deltas + box_post_delta_offset(p, (size_t)r, k);
            if (!box_post_candidate(p, rois + 4 * (size_t)r, delta, box)) continue;
            s.scores[cand] = score;
            s.groups[cand] = k;
            cand++;
        }
    }
    return box_post_select(p, s.boxes, s.scores, s.groups, cand, out_boxes, out_scores, out_labels, s.keep, s.nms);
}

int box_post_select(const mr_box_post_params *p, const float *boxes, const float *scores, const int *groups, int cand,
                    float *out_boxes, float *out_scores, float *out_labels, int *keep, void *nms_scratch)
{
    int kept = batched_nms_cpu(boxes, scores, groups, cand, p->nms_thresh, p->nms_flags, keep, nms_scratch);
    if (p->agnostic_nms)
        kept = nms_ordered_cpu(boxes, keep, kept, p->agnostic_nms_thresh, p->nms_flags, keep, nms_scratch);
    int d = box_post_count(p, scores, 1, keep, kept);
    for (int i = 0; i < d; i++) {
        int c = keep[i];
        memcpy(out_boxes + 4 * (size_t)i, boxes + 4 * (size_t)c, 4 * sizeof(float));
        out_scores[i] = scores[c];
        out_labels[i] = (float)groups[c];
    }
    return d;
}
