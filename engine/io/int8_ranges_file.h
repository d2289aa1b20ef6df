/* The int8 activation ranges' file (core/int8_ranges.h), kept beside the
 * weights: `<weights without .safetensors>.int8.json`.
 *
 *   {"format": "detect int8 ranges 1",
 *    "weights": {"file": "model.safetensors", "bytes": N, "fnv1a64": "<16 hex digits>"},
 *    "calibration": {"images": N, "method": "..."},
 *    "layers": {"backbone.res2.0.conv1": {"range": 4.25, "signed": false}, ...}}
 *
 * "weights" ties the ranges to the file they were measured on
 * (weights_fingerprint): model_load refuses ranges of other weights. */
#ifndef MR_INT8_RANGES_FILE_H
#define MR_INT8_RANGES_FILE_H

#include <stddef.h>

#include "core/int8_ranges.h"
#include "core/status.h"

/* Where the ranges of `weights_path` live. */
void int8_ranges_path_for(const char *weights_path, char *out, size_t out_len);

/* Reads `path`, with the stamp of the weights it was made for (checked
 * against the weights where they are loaded: int8_ranges_check_weights).
 * A missing file is MR_ERR_IO naming it. */
mr_status int8_ranges_load(mr_int8_ranges *r, const char *path, mr_error *err);

/* Writes r to `path` (atomically: complete or absent), stamped with the
 * fingerprint of `weights_path` and how the ranges were measured. */
mr_status int8_ranges_save(const mr_int8_ranges *r, const char *path, const char *weights_path, int images,
                           const char *method, mr_error *err);

#endif
