"""Comparison helpers for the parity tests: errors, box matching, mask IoU.

Everything here compares our engine's outputs with torchvision's; nothing
produces expected values itself."""

import numpy as np


def normalised_l2(ours, ref):
    """||ours - ref|| / ||ref|| over all elements (float64)."""
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    assert np.isfinite(ours).all(), "NaN or Inf in our output"
    return float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-30))


def nchw_to_nhwc(a):
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1)))


def iou_matrix(a, b):
    """Pairwise IoU of boxes a [N,4] and b [M,4] (x1,y1,x2,y2; no +1)."""
    a = np.asarray(a, np.float64)[:, None, :]
    b = np.asarray(b, np.float64)[None, :, :]
    iw = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    ih = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = iw * ih
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    return inter / np.maximum(area_a + area_b - inter, 1e-12)


def proposal_recall(ours, ref, iou=0.99):
    """Fraction of the reference proposals that one of ours overlaps with IoU >= iou."""
    if len(ref) == 0:
        return 1.0
    if len(ours) == 0:
        return 0.0
    return float((iou_matrix(ref, ours).max(axis=1) >= iou).mean())


def match_detections(ref_boxes, ref_scores, ref_labels, boxes, scores, labels, iou=0.99, score_tol=1e-3):
    """Greedy matching of each reference detection (in descending score) to
    an unused one of ours with the same label, the highest IoU >= iou and a
    score within score_tol. Returns (pairs [(ref_i, our_j)], unmatched ref
    indices, unmatched our indices)."""
    order = np.argsort(-np.asarray(ref_scores), kind="stable")
    ious = iou_matrix(ref_boxes, boxes) if len(ref_boxes) and len(boxes) else np.zeros((len(ref_boxes), len(boxes)))
    used = np.zeros(len(boxes), bool)
    pairs, missed = [], []
    for i in order:
        ok = (~used) & (np.asarray(labels) == ref_labels[i]) & (ious[i] >= iou) & \
             (np.abs(np.asarray(scores) - ref_scores[i]) <= score_tol)
        if ok.any():
            j = int(np.argmax(np.where(ok, ious[i], -1)))
            used[j] = True
            pairs.append((int(i), j))
        else:
            missed.append(int(i))
    return pairs, missed, [int(j) for j in np.nonzero(~used)[0]]


def near_tie(score, cutoff_scores, eps):
    """True when a score sits within eps of a cut: the score threshold or
    the score of the last kept detection (the detections-per-image cap)."""
    return any(abs(float(score) - float(c)) <= eps for c in cutoff_scores)


def mask_iou(a, b):
    a = np.asarray(a, bool)
    b = np.asarray(b, bool)
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)
