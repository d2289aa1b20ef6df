/* Results as documents: the JSON of `detect --json` (all images, streamed
 * to the file as they finish). The command's text lines are its own (cmd/detect.c).
 *
 * JSON: {"images": [{"file", "width", "height", "detections": [{"class_id",
 * "class", "score", "box": [x1, y1, x2, y2], "mask": {"size": [h, w],
 * "counts": "<COCO compressed RLE>"}}]}]}. Masks are column-major RLE exactly
 * as pycocotools encodes them; boxes are in original-image pixels. The file
 * appears only when closed (atomic_file.h): complete, or not at all. */
#ifndef MR_OUTPUT_H
#define MR_OUTPUT_H

#include <stdio.h>

#include "io/atomic_file.h"
#include "core/config.h"
#include "core/result.h"
#include "core/status.h"

typedef struct {
    atomic_file file;
    int images; /* written so far */
} output_json;

mr_status output_json_open(output_json *out, const char *path, mr_error *err);

/* One image's entry, {"file": ...}, as text: *text (malloc'ed, *len bytes,
 * NUL-terminated) is what output_json_add writes. */
mr_status output_json_entry(const char *file, const mr_result *res, const mr_config *cfg, char **text, size_t *len,
                            mr_error *err);

/* Appends one image's detections (masks RLE-encoded), in the order given. */
mr_status output_json_add(output_json *out, const char *file, const mr_result *res, const mr_config *cfg,
                          mr_error *err);

/* Ends the document and moves it into place. members (may be NULL): text
 * written after the "images" array, inside the top-level object
 * (", \"name\": value ..."). */
mr_status output_json_close(output_json *out, const char *members, mr_error *err);
void output_json_abort(output_json *out);


#endif
