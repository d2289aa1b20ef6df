/* Weights in the safetensors format: an 8-byte little-endian header
 * length, a JSON header {name: {"dtype", "shape", "data_offsets": [b, e]},
 * "__metadata__": {...}}, then raw little-endian data. The file is mmapped
 * and every header field is validated before any tensor is touched: header
 * length within the file, known dtypes, non-negative shapes whose byte size
 * matches the offsets, offsets inside the data area, no overlaps, no
 * duplicate names. Tensor names are the canonical scheme of
 * models/README.md.
 *
 * Lookups take the expected shape, so a missing or mis-shaped tensor is an
 * error that names it; every lookup marks the tensor used, and
 * weights_unused() lists what the model never asked for. */
#ifndef MR_WEIGHTS_H
#define MR_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define MR_WEIGHTS_MAX_DIMS 8

typedef enum { MR_DTYPE_F32 = 0, MR_DTYPE_F16, MR_DTYPE_BF16, MR_DTYPE_F64 } mr_dtype;

typedef struct {
    char *name;
    mr_dtype dtype;
    int ndim;
    int64_t shape[MR_WEIGHTS_MAX_DIMS];
    const unsigned char *data; /* points into the mapping */
    size_t nbytes;
    int used;
} mr_weight_entry;

typedef struct {
    char path[1024];
    void *map;
    size_t map_size;
    mr_weight_entry *entries; /* sorted by name */
    int count;
    char *metadata_json;      /* the "__metadata__" object as JSON text, or NULL */
} mr_weights;

mr_status weights_open(mr_weights *w, const char *path, mr_error *err);
void weights_close(mr_weights *w);

const mr_weight_entry *weights_find(const mr_weights *w, const char *name);

/* The whole file's fingerprint: FNV-1a-64 over its 8-byte little-endian
 * words (the last one zero-padded), so that files which differ anywhere
 * differ here (almost surely). Reads every byte: about 0.1 s per 170 MB.
 * It ties int8 activation ranges to the weights they were measured on. */
uint64_t weights_fingerprint(const mr_weights *w);

/* Copies tensor `name` as float32 into `out` (numel floats), checking that
 * its shape is exactly shape[0..ndim). Marks it used. */
mr_status weights_read_f32(mr_weights *w, const char *name, int ndim, const int64_t *shape,
                           float *out, mr_error *err);

/* Reads a per-channel normalisation at `prefix` (e.g.
 * "backbone.res2.0.conv1.norm") as y = x*scale + shift: either a batchnorm
 * (weight, bias, running_mean, running_var; scale = weight/sqrt(var+eps),
 * shift = bias - mean*scale) or an AffineChannel (scale, shift) stored as
 * is. The backends receive this affine (conv_init_affine), never a
 * batchnorm's four tensors. */
mr_status weights_read_affine(mr_weights *w, const char *prefix, int channels, float eps,
                              float *scale, float *shift, mr_error *err);

/* Writes the names of tensors never read, comma separated, into buf;
 * returns how many there are. */
int weights_unused(const mr_weights *w, char *buf, size_t cap);

#endif
