/* Results as documents: the JSON of `detect --json` and one line of text
 * per detection.
 *
 * JSON: {"images": [{"file", "width", "height", "detections": [{"class_id",
 * "class", "score", "box": [x1, y1, x2, y2], "mask": {"size": [h, w],
 * "counts": "<COCO compressed RLE>"}}]}]}. Masks are column-major RLE exactly
 * as pycocotools encodes them; boxes are in original-image pixels. */
#ifndef MR_OUTPUT_H
#define MR_OUTPUT_H

#include <stdio.h>

#include "config.h"
#include "model.h"
#include "status.h"

typedef struct output_doc output_doc;

mr_status output_doc_create(output_doc **out, mr_error *err);
void output_doc_free(output_doc *doc);

/* Appends one image's detections (RLE-encoding the masks). */
mr_status output_doc_add(output_doc *doc, const char *file, const mr_result *res, const mr_config *cfg,
                         mr_error *err);

/* Writes the document to `path` through a temporary file and a rename, so
 * an interrupted run never leaves a half-written file. */
mr_status output_doc_write(const output_doc *doc, const char *path, mr_error *err);

/* One line per detection: "file: class score x1,y1,x2,y2 (mask N px)". */
void output_print_text(FILE *f, const char *file, const mr_result *res, const mr_config *cfg);

#endif
