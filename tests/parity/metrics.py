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


def precision_drift(ref, ours, top=20):
    """How far `ours` (a lower precision: fp16, TF32) strays from `ref`
    (fp32), both dicts of boxes, scores, labels and masks (bool HxW each):
    each of ref's detections matched to an unused one of ours of its class
    at the highest box IoU >= 0.5 (any score). Returns the counts, the share
    of ref's `top` highest scores found, and mean/min box IoU, mean/max
    |score difference| and mean/min mask IoU over the matched pairs, and
    `text`, all of it on one line."""
    rb, rs, rl = ref["boxes"], np.asarray(ref["scores"]), np.asarray(ref["labels"]).astype(int)
    ob, os_, ol = ours["boxes"], np.asarray(ours["scores"]), np.asarray(ours["labels"]).astype(int)
    pairs, _, _ = match_detections(rb, rs, rl, ob, os_, ol, iou=0.5, score_tol=2.0)
    ious = iou_matrix(rb, ob) if len(rb) and len(ob) else np.zeros((len(rb), len(ob)))
    box = [float(ious[i, j]) for i, j in pairs]
    dscore = [abs(float(os_[j]) - float(rs[i])) for i, j in pairs]
    miou = [mask_iou(ours["masks"][j], ref["masks"][i]) for i, j in pairs]
    top_ref = set(np.argsort(-rs, kind="stable")[:top].tolist())
    r = {"ref": len(rs), "ours": len(os_), "matched": len(pairs),
         "found_top": sum(1 for i, _ in pairs if i in top_ref) / max(1, len(top_ref)),
         "box_mean": float(np.mean(box)) if box else 0.0, "box_min": min(box, default=0.0),
         "score_mean": float(np.mean(dscore)) if dscore else 0.0, "score_max": max(dscore, default=0.0),
         "mask_mean": float(np.mean(miou)) if miou else 0.0, "mask_min": min(miou, default=0.0)}
    r["text"] = (f"fp32 {r['ref']} dets, other {r['ours']}, matched {r['matched']}; of fp32's top {top}: "
                 f"{r['found_top'] * 100:.0f}% found; box IoU mean {r['box_mean']:.4f} min {r['box_min']:.4f}; "
                 f"|score diff| mean {r['score_mean']:.2e} max {r['score_max']:.2e}; mask IoU mean "
                 f"{r['mask_mean']:.4f} min {r['mask_min']:.4f}")
    return r
