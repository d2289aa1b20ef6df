/* stage_runner: runs the engine stage by stage and dumps every stage
 * boundary as .npy, for the parity tests against torchvision. A stage can
 * be fed the reference's output of the previous stage instead of ours, so
 * each stage is tested in isolation:
 *
 *   stage_runner --config C --weights W --image I.png --out DIR
 *       [--feed-input input.npy]      NCHW [1,3,Hp,Wp]: the backbone's input
 *       [--feed-fpn DIR]              DIR/04_p2..p6.npy (NCHW): the RPN's and heads' features
 *       [--feed-proposals P.npy]      [N,4]: the box head's RoIs
 *       [--feed-detections DIR]       DIR/10_det_{boxes,labels,scores}.npy: the mask head's boxes
 *       [--threads N]
 *       [--device cpu|cuda] [--precision fp32|tf32] [--no-fold]   (CUDA: device 0)
 *
 * Every stage still runs and is dumped; a feed then replaces its output
 * before the next stage, so one run tests all stages in isolation.
 *
 * Dumps (NHWC float32 unless noted): input, c2..c5, p2..p6, proposals [N,4],
 * proposal_scores [N], det_boxes [D,4], det_scores [D], det_labels [D],
 * mask_probs [D,28,28], final_boxes [D,4], final_scores, final_labels,
 * final_masks [D,H,W] float32 pasted probabilities, final_masks_bin uint8. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "io/image.h"
#include "ops/image_preprocess.h"
#include "model/model.h"
#include "backend/backend_registry.h"

typedef struct {
    int ndim;
    long shape[8];
    char dtype[8];
    void *data;
} npy;

static int npy_write(const char *dir, const char *name, const char *dtype, size_t elem, const void *data, int ndim,
                     const long *shape)
{
    char path[1024], header[256], shp[128] = "";
    size_t at = 0, n = 1;
    for (int d = 0; d < ndim; d++) {
        at += (size_t)snprintf(shp + at, sizeof shp - at, "%ld,%s", shape[d], d + 1 < ndim ? " " : "");
        n *= (size_t)shape[d];
    }
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", dtype, shp);
    int total = 10 + hl + 1, pad = (64 - total % 64) % 64;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    unsigned short hlen = (unsigned short)(hl + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fwrite(header, 1, (size_t)hl, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, elem, n, f);
    return fclose(f);
}

/* Reads a little-endian float32/float64/int64 .npy as float32. */
static int npy_read(const char *path, npy *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) { fclose(f); return -1; }
    size_t hl = pre[8] | (pre[9] << 8);
    char *h = calloc(1, hl + 1);
    if (fread(h, 1, hl, f) != hl) { fclose(f); free(h); return -1; }
    char *d = strstr(h, "'descr': '"), *s = strstr(h, "'shape': (");
    if (!d || !s || strstr(h, "'fortran_order': True")) { fclose(f); free(h); return -1; }
    snprintf(out->dtype, sizeof out->dtype, "%.3s", d + 10);
    out->ndim = 0;
    size_t n = 1;
    for (char *p = s + 10; *p && *p != ')';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) { p++; continue; }
        out->shape[out->ndim++] = v;
        n *= (size_t)v;
        p = end;
    }
    free(h);
    size_t esz = strcmp(out->dtype, "<f4") == 0 ? 4 : 8;
    void *raw = malloc(esz * n + 1);
    float *vals = malloc(sizeof(float) * n + 1);
    if (fread(raw, esz, n, f) != n) { fclose(f); free(raw); free(vals); return -1; }
    fclose(f);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(out->dtype, "<f4") == 0) vals[i] = ((float *)raw)[i];
        else if (strcmp(out->dtype, "<f8") == 0) vals[i] = (float)((double *)raw)[i];
        else vals[i] = (float)((int64_t *)raw)[i];
    }
    free(raw);
    out->data = vals;
    return 0;
}

/* Host buffers to and from the backend's memory (device memory on CUDA). */
static int to_backend(mr_backend *be, float *dst, const float *src, size_t count)
{
    mr_error err = {0};
    if (be->i->copy_to_device(be->ctx, dst, src, sizeof(float) * count, &err) == MR_OK) return 0;
    fprintf(stderr, "stage_runner: %s\n", err.msg);
    return -1;
}

static float *from_backend(mr_backend *be, const float *src, size_t count)
{
    mr_error err = {0};
    float *h = malloc(sizeof(float) * (count ? count : 1));
    if (h && be->i->sync(be->ctx, &err) == MR_OK &&
        be->i->copy_to_host(be->ctx, h, src, sizeof(float) * count, &err) == MR_OK)
        return h;
    fprintf(stderr, "stage_runner: %s\n", h ? err.msg : "out of memory");
    exit(2);
}

/* NCHW [1,C,H,W] -> the NHWC tensor t (shape must match). */
static int feed_nchw(mr_backend *be, const char *path, mr_tensor *t)
{
    npy a;
    if (npy_read(path, &a) || a.ndim != 4 || a.shape[1] != t->c || a.shape[2] != t->h || a.shape[3] != t->w) {
        fprintf(stderr, "stage_runner: %s: missing or not [1,%d,%d,%d]\n", path, t->c, t->h, t->w);
        return -1;
    }
    const float *src = a.data;
    size_t count = (size_t)t->c * (size_t)t->h * (size_t)t->w;
    float *nhwc = malloc(sizeof(float) * (count ? count : 1));
    if (!nhwc) return -1;
    for (int c = 0; c < t->c; c++)
        for (int y = 0; y < t->h; y++)
            for (int x = 0; x < t->w; x++)
                nhwc[((size_t)y * t->w + x) * t->c + c] = src[((size_t)c * t->h + y) * t->w + x];
    int rc = to_backend(be, t->data, nhwc, count);
    free(nhwc);
    free(a.data);
    return rc;
}

static int feed_rows(mr_backend *be, mr_model *m, const char *path, const char *tensor, const char *count_name, int cols)
{
    npy a;
    mr_error err = {0};
    if (npy_read(path, &a) || (cols > 1 && (a.ndim != 2 || a.shape[1] != cols))) {
        fprintf(stderr, "stage_runner: %s: missing or not [N,%d]\n", path, cols);
        return -1;
    }
    if (count_name && model_set_count(m, count_name, (int)a.shape[0], &err) != MR_OK) {
        fprintf(stderr, "stage_runner: %s\n", err.msg);
        return -1;
    }
    int rc = to_backend(be, model_tensor(m, tensor)->data, a.data, (size_t)a.shape[0] * (size_t)cols);
    free(a.data);
    return rc;
}

static void dump(mr_backend *be, const char *dir, const char *name, const mr_tensor *t, int ndim_rows)
{
    long shape[4] = {t->n, t->h, t->w, t->c};
    float *data = from_backend(be, t->data, mr_tensor_numel(t));
    if (ndim_rows == 2) {
        long s2[2] = {t->n, t->c};
        npy_write(dir, name, "<f4", 4, data, 2, s2);
    } else if (ndim_rows == 1) {
        long s1[1] = {t->n};
        npy_write(dir, name, "<f4", 4, data, 1, s1);
    } else {
        npy_write(dir, name, "<f4", 4, data, 4, shape);
    }
    free(data);
}

#define CHECK(call)                                                 \
    do {                                                            \
        if ((call) != MR_OK) {                                      \
            fprintf(stderr, "stage_runner: %s\n", err.msg);         \
            return 2;                                               \
        }                                                           \
    } while (0)

int main(int argc, char **argv)
{
    const char *config = NULL, *weights = NULL, *image = NULL, *out = NULL;
    const char *feed_input = NULL, *feed_fpn = NULL, *feed_props = NULL, *feed_dets = NULL;
    int threads = 0, fold = 1;
    const char *device = "cpu", *precision = "fp32";
    static const struct option longs[] = {
        {"device", 1, 0, 'd'}, {"precision", 1, 0, 'p'}, {"no-fold", 0, 0, 'n'},
        {"config", 1, 0, 'c'}, {"weights", 1, 0, 'w'}, {"image", 1, 0, 'i'}, {"out", 1, 0, 'o'},
        {"feed-input", 1, 0, 'I'}, {"feed-fpn", 1, 0, 'F'}, {"feed-proposals", 1, 0, 'P'},
        {"feed-detections", 1, 0, 'D'}, {"threads", 1, 0, 't'}, {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'w': weights = optarg; break;
        case 'i': image = optarg; break;
        case 'o': out = optarg; break;
        case 'I': feed_input = optarg; break;
        case 'F': feed_fpn = optarg; break;
        case 'P': feed_props = optarg; break;
        case 'D': feed_dets = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'd': device = optarg; break;
        case 'p': precision = optarg; break;
        case 'n': fold = 0; break;
        default: return 2;
        }
    }
    if (!config || !weights || !image || !out) {
        fprintf(stderr, "usage: stage_runner --config C --weights W --image I --out DIR [--feed-...]\n");
        return 2;
    }
    static mr_config cfg;
    mr_error err = {0};
    mr_backend be;
    mr_model *m;
    mr_image img = {0};
    CHECK(config_load(&cfg, config, &err));
    if (strcmp(device, "cuda") == 0) {
#ifdef MR_HAVE_CUDA
        if (strcmp(precision, "fp32") != 0 && strcmp(precision, "tf32") != 0) {
            /* fp16 feature maps are compared end to end (tests/gpu/gpu_parity.py), not dumped */
            fprintf(stderr, "stage_runner: --precision %s: fp32 or tf32 only\n", precision);
            return 2;
        }
        mr_backend_params bp = {.precision = strcmp(precision, "tf32") == 0 ? MR_PRECISION_TF32 : MR_PRECISION_FP32,
                                .no_fold = !fold};
        CHECK(backend_open("cuda", &bp, &be, &err));
#else
        (void)precision;
        (void)fold;
        fprintf(stderr, "stage_runner: --device cuda: this build has no CUDA backend\n");
        return 2;
#endif
    } else {
        mr_backend_params bp = {.threads = threads};
        CHECK(backend_open("cpu", &bp, &be, &err));
    }
    CHECK(model_load(&m, &cfg, weights, be, NULL, &err));
    CHECK(image_load(image, cfg.input.max_image_side, &img, &err));

    CHECK(model_stage_input(m, feed_input ? NULL : &img, img.h, img.w, &err));
    if (feed_input && feed_nchw(&be, feed_input, model_tensor(m, "input"))) return 2;
    dump(&be, out, "input", model_tensor(m, "input"), 4);

    /* Each stage runs on the previous stage's tensors, dumps its own, and
     * then (when fed) has them replaced by the reference's. */
    static const char *const levels[] = {"p2", "p3", "p4", "p5", "p6"};
    CHECK(model_stage_backbone(m, &err));
    dump(&be, out, "c2", model_tensor(m, "c2"), 4);
    dump(&be, out, "c3", model_tensor(m, "c3"), 4);
    dump(&be, out, "c4", model_tensor(m, "c4"), 4);
    dump(&be, out, "c5", model_tensor(m, "c5"), 4);
    CHECK(model_stage_fpn(m, &err));
    for (int l = 0; l < 5; l++) dump(&be, out, levels[l], model_tensor(m, levels[l]), 4);
    for (int l = 0; feed_fpn && l < 5; l++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/04_%s.npy", feed_fpn, levels[l]);
        if (feed_nchw(&be, path, model_tensor(m, levels[l]))) return 2;
    }

    CHECK(model_stage_rpn(m, &err));
    dump(&be, out, "proposals", model_tensor(m, "proposals"), 2);
    dump(&be, out, "proposal_scores", model_tensor(m, "proposal_scores"), 1);
    if (feed_props && feed_rows(&be, m, feed_props, "proposals", "proposals", 4)) return 2;

    CHECK(model_stage_box_head(m, &err));
    dump(&be, out, "det_boxes", model_tensor(m, "detections"), 2);
    dump(&be, out, "det_scores", model_tensor(m, "detection_scores"), 1);
    dump(&be, out, "det_labels", model_tensor(m, "detection_labels"), 1);
    if (feed_dets) {
        char path[1024];
        snprintf(path, sizeof path, "%s/10_det_boxes.npy", feed_dets);
        if (feed_rows(&be, m, path, "detections", "detections", 4)) return 2;
        snprintf(path, sizeof path, "%s/10_det_scores.npy", feed_dets);
        if (feed_rows(&be, m, path, "detection_scores", NULL, 1)) return 2;
        snprintf(path, sizeof path, "%s/10_det_labels.npy", feed_dets);
        if (feed_rows(&be, m, path, "detection_labels", NULL, 1)) return 2;
    }

    CHECK(model_stage_mask_head(m, &err));
    mr_tensor *probs = model_tensor(m, "mask_probs");
    long pshape[3] = {probs->n, probs->h, probs->w};
    float *hprobs = from_backend(&be, probs->data, mr_tensor_numel(probs));
    npy_write(out, "mask_probs", "<f4", 4, hprobs, 3, pshape);
    free(hprobs);

    int D = probs->n;
    size_t plane = (size_t)img.h * (size_t)img.w;
    float *soft = malloc(sizeof(float) * plane * (size_t)(D ? D : 1));
    mr_result res;
    CHECK(model_stage_paste(m, &res, soft, &err));
    float *boxes = malloc(sizeof(float) * 4 * (size_t)(D + 1)), *scores = malloc(sizeof(float) * (size_t)(D + 1));
    float *labels = malloc(sizeof(float) * (size_t)(D + 1));
    uint8_t *bin = malloc(plane * (size_t)(D ? D : 1));
    for (int d = 0; d < res.count; d++) {
        memcpy(boxes + 4 * d, res.dets[d].box, 4 * sizeof(float));
        scores[d] = res.dets[d].score;
        labels[d] = (float)res.dets[d].class_id;
        mask_window_to_plane_u8(res.dets[d].mask_win, res.dets[d].mask, img.h, img.w, bin + plane * (size_t)d);
    }
    long bshape[2] = {res.count, 4}, sshape[1] = {res.count}, mshape[3] = {res.count, img.h, img.w};
    npy_write(out, "final_boxes", "<f4", 4, boxes, 2, bshape);
    npy_write(out, "final_scores", "<f4", 4, scores, 1, sshape);
    npy_write(out, "final_labels", "<f4", 4, labels, 1, sshape);
    npy_write(out, "final_masks", "<f4", 4, soft, 3, mshape);
    npy_write(out, "final_masks_bin", "|u1", 1, bin, 3, mshape);
    free(boxes);
    free(scores);
    free(labels);
    free(bin);
    free(soft);
    result_free(&res);
    image_free(&img);
    model_free(m);
    be.i->destroy(be.ctx);
    return 0;
}
