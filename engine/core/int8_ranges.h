/* The activation ranges that --precision int8 quantizes with: for each
 * convolution (by its layer name, "backbone.res3.0.conv2"), the clip range
 * of its input in real units, measured by `detect calibrate` on example
 * images (engine/api/api_calibrate.c) and kept in a file beside the
 * weights (io/int8_ranges_file.h). A layer whose input had no negative
 * value in calibration is unsigned: u8 with scale range/255; else s8 with
 * range/127. */
#ifndef MR_INT8_RANGES_H
#define MR_INT8_RANGES_H

#include <stdint.h>

#include "core/status.h"
#include "core/weights.h"

#define MR_INT8_NAME_LEN 128

typedef struct {
    char name[MR_INT8_NAME_LEN];
    float range;   /* > 0: |x| is clipped at this */
    int is_signed; /* 1: the input went below 0 in calibration */
} mr_int8_range;

typedef struct {
    mr_int8_range *items;
    int count;
    char path[1024]; /* where they were read from (error messages) */
    /* the weights they were measured on: size and weights_fingerprint */
    double weights_bytes;
    uint64_t weights_fnv1a64;
} mr_int8_ranges;

/* The entry of `name`, or NULL. */
const mr_int8_range *int8_ranges_find(const mr_int8_ranges *r, const char *name);

/* MR_ERR_CONFIG naming r->path unless r was measured on w: its size and
 * `fp`, w's weights_fingerprint, which the caller computes (on a thread of
 * its own while the layers load: model_load). Ranges of other weights are
 * refused, not used. */
mr_status int8_ranges_check_weights(const mr_int8_ranges *r, const mr_weights *w, uint64_t fp, mr_error *err);

void int8_ranges_free(mr_int8_ranges *r);

#endif
