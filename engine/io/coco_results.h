/* Detections as a COCO "results" file: what pycocotools' COCO.loadRes and
 * COCOeval (iouType "segm" or "bbox") read, and what Detectron and
 * detectron2 write for the COCO evaluation server.
 *
 * The file is one JSON array, one entry per detection, one entry a line:
 *   {"image_id": int, "category_id": int,
 *    "bbox": [x, y, w, h],            original-image pixels, (x1, y1, x2-x1, y2-y1)
 *    "score": float,
 *    "segmentation": {"size": [h, w], "counts": "<compressed RLE>"}}
 * The counts string is rle.h's (pycocotools' rleToString of the mask in
 * column-major order); a detection without a mask (mask NULL) has no
 * "segmentation", and loadRes then makes a polygon of its box. Floats are
 * printed with %.9g, which round-trips float32 (w and h are the float32
 * differences, as torch computes them). The C locale's decimal point is
 * assumed (the command never calls setlocale).
 *
 * Note that pycocotools' loadRes fails on an empty array (it reads
 * anns[0]); an empty document is still written as `[]`, which is valid
 * JSON and what the file means. */
#ifndef MR_COCO_RESULTS_H
#define MR_COCO_RESULTS_H

#include <stddef.h>

#include "core/config.h"
#include "core/result.h"
#include "core/status.h"

/* COCO's category id for one of our class ids. With cfg->classes.num_classes
 * == 81 the model is taken to be in COCO's contiguous order (index 0
 * background, 1..80 = person..toothbrush, as config.c's default class names)
 * and class_id maps through COCO's 91-id table (1 -> 1, 12 stop sign -> 13,
 * 80 toothbrush -> 90). Any other num_classes is a dataset of its own, whose
 * category ids are taken to be the class ids themselves. Returns -1 for a
 * class_id outside 1..num_classes-1 (0 is the background). */
int coco_category_id(const mr_config *cfg, int class_id);

/* COCO's image id for an image file. COCO names its files by id
 * ("val2017/000000397133.jpg" is image 397133): if the file name, without
 * its directory and its last extension, is all decimal digits and at most
 * 9 of them remain after the leading zeros (so it fits an int), that number;
 * otherwise `index` (the caller's running number for the image). Mixing
 * the two can give two images the same id; numbering is the caller's to
 * keep consistent with its annotation file. */
int coco_image_id(const char *path, int index);

typedef struct coco_results coco_results;

mr_status coco_results_create(coco_results **out, mr_error *err);
void coco_results_free(coco_results *doc);

/* Appends one entry per detection of res (in res's order), RLE-encoding
 * the masks. Errors, with the document left as it was: a class id that
 * coco_category_id rejects, a non-finite score or box coordinate, a mask
 * too large for rle.h's int counts (MR_ERR_RANGE, naming image_id and the
 * detection's index); out of memory (MR_ERR_OOM). The document keeps the
 * entries as text, so its memory is about the size of the file. */
mr_status coco_results_add(coco_results *doc, int image_id, const mr_result *res, const mr_config *cfg,
                           mr_error *err);

/* Number of entries (detections) added so far. */
size_t coco_results_count(const coco_results *doc);

/* Writes the document to `path`, streaming it chunk by chunk through
 * atomic_file.h: a regular file (or a new path) is written as
 * `path.tmp.<pid>`, synced and renamed over `path`, so an interrupted run
 * never leaves a half-written file, and the temporary is removed on any
 * failure; a device or FIFO (/dev/stdout) is written in place. Every write,
 * flush and close is checked: a full disk, a missing directory or a
 * directory as path is MR_ERR_IO naming the path and the system's reason. */
mr_status coco_results_write(const coco_results *doc, const char *path, mr_error *err);

#endif
