/* int8 calibration (detect.h): the CPU backend shows every convolution's
 * input to `observe` (backend.h observe_conv_inputs); per image, each layer
 * keeps the largest of its calls' percentiles of |x|, and the ranges are
 * the means over the images.
 *
 * The percentile comes from a histogram of |x| in 4096 bins over [0, max]:
 * the upper edge of the bin where the count reaches the percentile, so a
 * range is at most max / 4096 above the exact order statistic and never
 * below it. Why a percentile: the largest |x| of a ReLU map is a handful
 * of outliers, and a u8 scale set by them leaves most values a few steps
 * wide; ONNX Runtime's and TensorRT's percentile calibrators clip the same
 * way. The default (cmd/calibrate.c) was chosen on the demo model's
 * validation scenes, never the held-out ones (bench/NOTES.md section 22). */
#include "api/api_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/int8_ranges_file.h"

#define BINS 4096

typedef struct {
    char name[MR_INT8_NAME_LEN];
    double image_range; /* this image's: the largest of its calls' percentiles */
    int seen;           /* in this image */
    double sum;         /* of image_range over the images that ran it */
    int images;
    int is_signed;
} layer_stats;

struct detect_calibration {
    detect_model *model;
    double percentile;
    layer_stats *layers;
    int count, cap;
    int images;
    mr_status failed; /* out of memory inside observe: reported by add */
    uint32_t hist[BINS];
};

static layer_stats *find_or_add(detect_calibration *c, const char *name)
{
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->layers[i].name, name) == 0) return &c->layers[i];
    if (c->count == c->cap) {
        int cap = c->cap ? 2 * c->cap : 128;
        layer_stats *l = realloc(c->layers, sizeof *l * (size_t)cap);
        if (!l) return NULL;
        c->layers = l;
        c->cap = cap;
    }
    layer_stats *l = &c->layers[c->count++];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    return l;
}

/* The `percentile` of |x[0..n)| (upper bin edge; above). Sets *negative
 * when some x < 0. NaN never reaches here: weights are checked finite. */
static double abs_percentile(detect_calibration *c, const float *x, size_t n, int *negative)
{
    float amax = 0.0f;
    int neg = 0;
    for (size_t i = 0; i < n; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
        neg |= x[i] < 0.0f;
    }
    *negative = neg;
    if (amax == 0.0f || c->percentile >= 100.0) return amax;
    memset(c->hist, 0, sizeof c->hist);
    const float to_bin = (float)BINS / amax;
    for (size_t i = 0; i < n; i++) {
        int b = (int)(fabsf(x[i]) * to_bin);
        c->hist[b < BINS ? b : BINS - 1]++;
    }
    double want = ceil(c->percentile / 100.0 * (double)n);
    double seen = 0;
    int b = 0;
    for (; b < BINS - 1; b++) {
        seen += c->hist[b];
        if (seen >= want) break;
    }
    return (double)amax * (b + 1) / BINS;
}

static void observe(void *user, const char *layer, const float *x, size_t count)
{
    detect_calibration *c = user;
    layer_stats *l = find_or_add(c, layer);
    if (!l) {
        c->failed = MR_ERR_OOM;
        return;
    }
    int negative;
    double r = abs_percentile(c, x, count, &negative);
    if (!l->seen || r > l->image_range) l->image_range = r;
    l->seen = 1;
    l->is_signed |= negative;
}

detect_status detect_calibration_create(detect_model *m, double percentile, detect_calibration **out)
{
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_calibration_create: out is NULL");
    *out = NULL;
    if (!m) return api_failf(DETECT_ERR_ARGUMENT, "detect_calibration_create: model is NULL");
    if (!(percentile > 0.0 && percentile <= 100.0))
        return api_failf(DETECT_ERR_RANGE, "calibration percentile %g: expected a number in (0, 100]", percentile);
    if (!m->ctx[0].be.i->observe_conv_inputs || strcmp(m->device, "cpu") != 0)
        return api_failf(DETECT_ERR_UNSUPPORTED, "calibration runs on the CPU; this model is open on %s", m->device);
    if (m->precision[0] && strcmp(m->precision, "fp32") != 0)
        return api_failf(DETECT_ERR_UNSUPPORTED, "calibration measures fp32 activations; this model is open in %s",
                         m->precision);
    if (m->calibrating)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_calibration_create: the model is being calibrated already");
    if (m->contexts > 1) /* the observer watches the first context only */
        return api_failf(DETECT_ERR_UNSUPPORTED, "calibration runs one image at a time; this model runs %d in flight",
                         m->contexts);
    detect_calibration *c = calloc(1, sizeof *c);
    if (!c) return api_failf(DETECT_ERR_OOM, "out of memory");
    c->model = m;
    c->percentile = percentile;
    m->calibrating = 1;
    *out = c;
    return DETECT_OK;
}

detect_status detect_calibration_add(detect_calibration *c, const detect_image *img)
{
    if (!c || !img) return api_failf(DETECT_ERR_ARGUMENT, "detect_calibration_add: %s is NULL", c ? "image" : "calibration");
    for (int i = 0; i < c->count; i++) c->layers[i].seen = 0;
    detect_model *m = c->model;
    m->ctx[0].be.i->observe_conv_inputs(m->ctx[0].be.ctx, observe, c);
    detect_result *r = NULL;
    detect_status st = detect_run_image(m, img, &r);
    m->ctx[0].be.i->observe_conv_inputs(m->ctx[0].be.ctx, NULL, NULL);
    detect_result_free(r);
    if (st != DETECT_OK) return st;
    if (c->failed) return api_failf(DETECT_ERR_OOM, "out of memory in calibration");
    for (int i = 0; i < c->count; i++) {
        layer_stats *l = &c->layers[i];
        if (!l->seen) continue;
        l->sum += l->image_range;
        l->images++;
    }
    c->images++;
    return DETECT_OK;
}

detect_status detect_calibration_save(const detect_calibration *c, const char *path)
{
    if (!c) return api_failf(DETECT_ERR_ARGUMENT, "detect_calibration_save: calibration is NULL");
    if (c->images == 0) return api_failf(DETECT_ERR_ARGUMENT, "calibration: no image was added");
    char beside[1100];
    if (!path) {
        int8_ranges_path_for(c->model->weights_path, beside, sizeof beside);
        path = beside;
    }
    mr_int8_ranges r = {0};
    r.items = calloc((size_t)c->count + 1, sizeof *r.items);
    if (!r.items) return api_failf(DETECT_ERR_OOM, "out of memory");
    for (int i = 0; i < c->count; i++) {
        const layer_stats *l = &c->layers[i];
        mr_int8_range *it = &r.items[r.count++];
        snprintf(it->name, sizeof it->name, "%s", l->name);
        /* A map that was all zeros on every image: any positive range
         * quantizes it exactly. */
        double mean = l->sum / l->images;
        it->range = mean > 0.0 ? (float)mean : 1.0f;
        it->is_signed = l->is_signed;
    }
    char method[160];
    snprintf(method, sizeof method, "per image the largest %g-th percentile of |input| over the layer's calls; "
             "the mean over images", c->percentile);
    mr_error err = {0};
    mr_status st = int8_ranges_save(&r, path, c->model->weights_path, c->images, method, &err);
    int8_ranges_free(&r);
    return st == MR_OK ? DETECT_OK : api_fail(&err);
}

void detect_calibration_free(detect_calibration *c)
{
    if (!c) return;
    c->model->calibrating = 0;
    free(c->layers);
    free(c);
}
