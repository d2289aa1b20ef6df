/* detect: Mask R-CNN instance segmentation from the command line.
 *
 *   detect --config C.json --weights W.safetensors [--json out.json] img.png...
 *
 * Prints one line per detection on stdout and, with --json, writes every
 * image's detections (boxes, scores, classes, COCO RLE masks) to one file.
 * Exit status: 0 all images done, 1 some images failed (each named on
 * stderr), 2 usage, config or weights error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "image.h"
#include "model.h"
#include "output.h"

#define DETECT_VERSION "0.1.0"

typedef struct {
    const char *config_path, *weights_path, *json_path, *device;
    int threads, quiet, profile;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: detect [options] IMAGE...\n"
            "Mask R-CNN R-101-FPN instance segmentation.\n\n"
            "  --config FILE     model config JSON (default configs/mask_rcnn_R-101-FPN_torchvision.json)\n"
            "  --weights FILE    converted weights, .safetensors (default model.safetensors)\n"
            "  --device DEV      cpu | cuda (default cpu)\n"
            "  --json FILE       write all detections, with COCO RLE masks, to FILE\n"
            "  --threads N       CPU threads (default: all cores)\n"
            "  --profile         print seconds per stage for each image on stderr\n"
            "  -q, --quiet       no per-detection lines on stdout\n"
            "  -h, --help        this text\n"
            "  --version         print the version\n");
}

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"config", required_argument, 0, 'c'}, {"weights", required_argument, 0, 'w'},
        {"device", required_argument, 0, 'd'}, {"json", required_argument, 0, 'j'},
        {"threads", required_argument, 0, 't'}, {"profile", no_argument, 0, 'p'},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    *o = (options){"configs/mask_rcnn_R-101-FPN_torchvision.json", "model.safetensors", NULL, "cpu", 0, 0, 0};
    int c;
    while ((c = getopt_long(argc, argv, "qh", longs, NULL)) != -1) {
        switch (c) {
        case 'c': o->config_path = optarg; break;
        case 'w': o->weights_path = optarg; break;
        case 'd': o->device = optarg; break;
        case 'j': o->json_path = optarg; break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "detect: --threads: expected a number from 1 to 1024, got \"%s\"\n", optarg);
                return 2;
            }
            o->threads = (int)v;
            break;
        }
        case 'p': o->profile = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("detect %s\n", DETECT_VERSION); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "detect: no input images (see --help)\n");
        return 2;
    }
    return 0;
}

static mr_status create_backend(const options *o, mr_backend *be, mr_error *err)
{
    if (strcmp(o->device, "cpu") == 0) return backend_cpu_create(be, o->threads, err);
    if (strncmp(o->device, "cuda", 4) == 0) {
        fprintf(stderr, "detect: notice: --device %s: this build has no CUDA backend yet; using the CPU\n", o->device);
        return backend_cpu_create(be, o->threads, err);
    }
    return mr_fail(err, MR_ERR_CONFIG, "--device %s: expected cpu or cuda", o->device);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc;

    static mr_config cfg; /* large (class names): keep it off the stack */
    mr_error err = {0};
    mr_backend be = {0};
    mr_model *model = NULL;
    output_doc *doc = NULL;
    if (config_load(&cfg, o.config_path, &err) != MR_OK || create_backend(&o, &be, &err) != MR_OK ||
        model_load(&model, &cfg, o.weights_path, be, &err) != MR_OK ||
        (o.json_path && output_doc_create(&doc, &err) != MR_OK)) {
        fprintf(stderr, "detect: %s\n", err.msg);
        if (be.i) be.i->destroy(be.ctx);
        return 2;
    }

    int failed = 0;
    for (int i = optind; i < argc; i++) {
        const char *path = argv[i];
        mr_image img = {0};
        mr_result res = {0};
        mr_stage_times t;
        if (image_load(path, cfg.input.max_image_side, &img, &err) != MR_OK ||
            model_detect(model, &img, &res, &t, &err) != MR_OK ||
            (doc && output_doc_add(doc, path, &res, &cfg, &err) != MR_OK)) {
            fprintf(stderr, "detect: %s\n", err.msg);
            failed++;
        } else {
            if (!o.quiet) output_print_text(stdout, path, &res, &cfg);
            if (o.profile)
                fprintf(stderr, "%s: preprocess %.3f backbone %.3f fpn %.3f rpn %.3f box %.3f mask %.3f paste %.3f s\n",
                        path, t.preprocess, t.backbone, t.fpn, t.rpn, t.box_head, t.mask_head, t.paste);
        }
        result_free(&res);
        image_free(&img);
    }
    if (doc && output_doc_write(doc, o.json_path, &err) != MR_OK) {
        fprintf(stderr, "detect: %s\n", err.msg);
        failed++;
    }
    output_doc_free(doc);
    model_free(model);
    be.i->destroy(be.ctx);
    return failed ? 1 : 0;
}
