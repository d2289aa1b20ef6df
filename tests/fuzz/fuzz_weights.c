/* libFuzzer target: bytes -> a file -> weights_open (engine/core/weights.c).
 *
 * On success every tensor is read with its own shape through
 * weights_read_f32 into a buffer of exactly shape-product floats (ASan
 * catches a read or write past either end), weights_read_affine is tried
 * on the prefixes of the tensors that look like normalisations (NaN and
 * Inf are not the loader's business: the model refuses them after folding,
 * model_check_finite), and the
 * header's promises are checked: entries sorted and unique, each inside
 * the mapping, nbytes = numel * dtype size. */
#include <string.h>

#include "fuzz_common.h"
#include "core/weights.h"

static size_t dtype_bytes(mr_dtype d)
{
    return d == MR_DTYPE_F64 ? 8 : d == MR_DTYPE_F32 ? 4 : 2;
}

/* Calls weights_read_affine on the prefix of `name` if it ends in one of
 * the normalisation parameter names, with the channel count of its shape. */
static void try_affine(mr_weights *w, const mr_weight_entry *e)
{
    static const char *const suffixes[] = {".weight", ".bias", ".running_mean", ".running_var", ".scale",
                                           ".shift"};
    size_t n = strlen(e->name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t s = strlen(suffixes[i]);
        if (n <= s || strcmp(e->name + n - s, suffixes[i]) != 0) continue;
        if (e->ndim != 1 || e->shape[0] > (1 << 20)) return;
        char prefix[512];
        if (n - s >= sizeof prefix) return;
        memcpy(prefix, e->name, n - s);
        prefix[n - s] = '\0';
        int c = (int)e->shape[0];
        float *scale = malloc(sizeof(float) * (size_t)(c ? c : 1));
        float *shift = malloc(sizeof(float) * (size_t)(c ? c : 1));
        if (scale && shift) {
            /* Only memory safety is checked: the folded values may overflow to
             * Inf (the model refuses them after folding, model_check_finite),
             * and messages quote the caller's prefix as given. */
            mr_error err = {MR_OK, ""};
            weights_read_affine(w, prefix, c, 1e-5f, scale, shift, &err);
        }
        free(scale);
        free(shift);
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    fuzz_memfile(data, size, path);
    mr_weights w;
    mr_error err = {MR_OK, ""};
    if (weights_open(&w, path, &err) != MR_OK) {
        FUZZ_CHECK(w.map == NULL && w.entries == NULL && w.count == 0, "failed open left state behind");
        FUZZ_CHECK(!strchr(err.msg, '\n'), "message has more than one line: %s", err.msg);
        return 0;
    }
    const unsigned char *lo = w.map, *hi = lo + w.map_size;
    for (int i = 0; i < w.count; i++) {
        const mr_weight_entry *e = &w.entries[i];
        FUZZ_CHECK(e->ndim >= 0 && e->ndim <= MR_WEIGHTS_MAX_DIMS, "ndim %d", e->ndim);
        FUZZ_CHECK(i == 0 || strcmp(w.entries[i - 1].name, e->name) < 0, "entries not sorted and unique");
        FUZZ_CHECK(e->data >= lo + 8 && e->data <= hi && e->nbytes <= (size_t)(hi - e->data),
                   "tensor %s outside the mapping", e->name);
        FUZZ_CHECK(weights_find(&w, e->name) == e, "weights_find misses %s", e->name);
        uint64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
        FUZZ_CHECK(numel * dtype_bytes(e->dtype) == e->nbytes, "tensor %s: %llu elements in %zu bytes", e->name,
                   (unsigned long long)numel, e->nbytes);
        float *out = malloc(numel ? (size_t)numel * sizeof(float) : 1);
        if (!out) continue;
        mr_error rerr = {MR_OK, ""};
        mr_status st = weights_read_f32(&w, e->name, e->ndim, e->shape, out, &rerr);
        FUZZ_CHECK(st == MR_OK || st == MR_ERR_FORMAT, "reading %s with its own shape: %s", e->name, rerr.msg);
        free(out);
        /* The wrong shape must be refused without touching the buffer. */
        int64_t other[MR_WEIGHTS_MAX_DIMS + 1] = {0};
        memcpy(other, e->shape, sizeof(int64_t) * (size_t)e->ndim);
        other[e->ndim] = 2;
        float dummy = 0;
        st = weights_read_f32(&w, e->name, e->ndim + 1, other, &dummy, &rerr);
        FUZZ_CHECK(st == MR_ERR_SHAPE, "a wrong shape was accepted for %s", e->name);
    }
    for (int i = 0; i < w.count && i < 16; i++) try_affine(&w, &w.entries[i]);
    char unused[256];
    weights_unused(&w, unused, sizeof unused);
    weights_close(&w);
    return 0;
}
