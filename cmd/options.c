#include "options.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void usage(FILE *f)
{
    fprintf(f,
            "usage: detect [options] IMAGE|FOLDER...\n"
            "       detect merge --json FILE [--coco-results FILE] SHARD.json...  (see detect merge --help)\n"
            "       detect calibrate --config C --weights W IMAGE|FOLDER...  (int8 ranges; detect calibrate --help)\n"
            "Mask R-CNN R-101-FPN instance segmentation. Folders are walked recursively in sorted\n"
            "order, taking the regular files named as images (.png .jpg .jpeg .jpe .jfif .webp .tif\n"
            ".tiff .gif .bmp .dib .heic .heif .avif .jxl, any case), counting the others as skipped\n"
            "(-v names them) and naming FIFOs, sockets, broken links and link loops as they are\n"
            "skipped; files named on the command line are always tried. PNG, JPEG, WebP, TIFF, GIF\n"
            "and BMP are recognised by their content; HEIC and AVIF are named as unsupported.\n\n"
            "Model\n"
            "  --config FILE        model config (default configs/mask_rcnn_R-101-FPN_torchvision.json; a config\n"
            "                       named without a folder and not found here is taken from the installed\n"
            "                       PREFIX/share/detect/configs)\n"
            "  --weights FILE       converted weights, .safetensors (default model.safetensors)\n"
            "  --device DEV         cpu | cuda | cuda:N (default: cuda when a GPU is present, else cpu)\n"
            "  --precision P        GPU: fp32 | tf32 | fp16 (default: tf32 on GPUs that have it; fp16: fp16\n"
            "                       weights and feature maps, tensor cores, fp32 boxes and scores).\n"
            "                       CPU: fp32 (default) | bf16 (AVX512_BF16 or AMX: the backbone, FPN and RPN\n"
            "                       convs; the config's reduced_precision names what else) | int8 (the same\n"
            "                       convs, with the ranges detect calibrate wrote beside the weights)\n"
            "  --no-fold            GPU: batchnorm as its own AffineChannel pass, not folded (comparison)\n"
            "  --threads N          CPU threads (default: all cores)\n"
            "  --canvas HxW         pad every image that fits to one HxW canvas (multiples of the config's\n"
            "                       size_divisibility; 0x0: none), as torchvision pads a batch: one CUDA graph\n"
            "                       for every size (default: the config's input.canvas_h, canvas_w)\n"
            "  --in-flight N        images run at once, each on its own execution context (1..16; default:\n"
            "                       1 on the CPU, on a GPU as many as its memory holds, at most 4)\n"
            "  --score-thresh X     minimum score, 0..1 (default: the config's box_head.score_thresh)\n"
            "  --max-dets N         detections per image (default: the config's box_head.detections_per_image)\n"
            "  --agnostic-nms       after the per-class NMS, drop a box that overlaps a higher-scored box of any\n"
            "                       class (IoU above box_head.agnostic_nms_thresh; default: box_head.agnostic_nms)\n"
            "  --classes A,B        report only these classes, by name (default: all)\n"
            "Inputs\n"
            "  --list FILE          also read image paths from FILE, one per line ('#' comments), relative\n"
            "                       to the current folder as on the command line, not to FILE's folder\n"
            "  --skip-existing      skip images whose --output files already exist (their entries in --json\n"
            "                       and --coco-results are read back from DIR/NAME.json)\n"
            "  --shard K/N          only the K-th of N parts of the inputs (K = 0..N-1), by a hash of each\n"
            "                       path: N runs with the same inputs do each image once; --json then\n"
            "                       records the part for detect merge\n"
            "  --decode-threads N   decode the next images on N threads while the model runs; 0: decode\n"
            "                       each image in turn (default: the cores the model leaves free, up to 4)\n"
            "Outputs\n"
            "  --output DIR         per image: DIR/NAME.png (visualisation) and DIR/NAME.json\n"
            "  --json FILE          all images' detections in one JSON document\n"
            "  --coco-results FILE  COCO results format (pycocotools loadRes)\n"
            "  -q, --quiet          no per-detection lines and no progress\n"
            "  -v, --verbose        model summary, per-image timing and every file skipped in a folder\n"
            "Profiling\n"
            "  --profile            seconds per stage for each image, then a summary\n"
            "  --profile-runs N     run each image N times after one warm-up run (default 1, no warm-up)\n"
            "  --profile-json FILE  the same as JSON\n"
            "Other\n"
            "  -h, --help           this text\n"
            "  --version            print the version\n\n"
            "Exit status: 0 all images done, 1 some images failed (each named on stderr),\n"
            "2 usage, config or weights error, 130 interrupted (finished outputs are kept).\n");
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "detect: %s: expected a whole number from %d to %d, got \"%s\"\n", opt, lo, hi, s);
        return 0;
    }
    *out = (int)v;
    return 1;
}

void options_report_bad(const char *prog, const char *help, int argc, char **argv)
{
    /* A short option inside a cluster leaves optind on its word; the last
     * letter of a cluster, and a long option, move optind past it. */
    const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (optopt && optind < argc && argv[optind][0] == '-' && argv[optind][1] != '-' &&
        strchr(argv[optind] + 1, optopt))
        word = argv[optind];
    if (optopt && word[0] == '-' && word[1] != '-' && word[2]) /* -abc: say which letter, and what a file needs */
        fprintf(stderr,
                "%s: unknown option \"-%c\" in \"%s\" (see %s; a file whose name starts with '-' is written "
                "./%s, or after --)\n",
                prog, optopt, word, help, word);
    else
        fprintf(stderr, "%s: unknown or incomplete option \"%s\" (see %s)\n", prog, word, help);
}

/* A config named without a folder (the default, or --config NAME.json) that
 * is not in the current folder is looked for where make install puts the
 * configs, <prefix>/share/detect/configs, found from this program's own
 * path (<prefix>/bin/detect), so an installed detect runs from any folder.
 * Returns the path to use: `path` itself, or `buf`. */
static const char *resolve_config(const char *path, char *buf, size_t n)
{
    const char *base = strncmp(path, "configs/", 8) == 0 ? path + 8 : path;
    if (strchr(base, '/') || access(path, F_OK) == 0) return path;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return path;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return path;
    *slash = '\0'; /* <prefix>/bin */
    snprintf(buf, n, "%s/../share/detect/configs/%s", exe, base);
    return access(buf, F_OK) == 0 ? buf : path;
}

int options_parse(int argc, char **argv, options *o)
{
    enum { O_CONFIG = 256, O_WEIGHTS, O_DEVICE, O_JSON, O_COCO, O_OUTPUT, O_THREADS, O_SCORE, O_MAXDETS, O_CLASSES,
           O_LIST, O_SKIP, O_PROFILE, O_PROFILE_RUNS, O_PROFILE_JSON, O_VERSION, O_PRECISION, O_NO_FOLD,
           O_DECODE_THREADS, O_AGNOSTIC, O_SHARD, O_IN_FLIGHT, O_CANVAS };
    static const struct option longs[] = {
        {"config", required_argument, 0, O_CONFIG}, {"weights", required_argument, 0, O_WEIGHTS},
        {"device", required_argument, 0, O_DEVICE}, {"json", required_argument, 0, O_JSON},
        {"precision", required_argument, 0, O_PRECISION}, {"no-fold", no_argument, 0, O_NO_FOLD},
        {"coco-results", required_argument, 0, O_COCO}, {"output", required_argument, 0, O_OUTPUT},
        {"threads", required_argument, 0, O_THREADS}, {"score-thresh", required_argument, 0, O_SCORE},
        {"max-dets", required_argument, 0, O_MAXDETS}, {"classes", required_argument, 0, O_CLASSES},
        {"list", required_argument, 0, O_LIST}, {"skip-existing", no_argument, 0, O_SKIP},
        {"decode-threads", required_argument, 0, O_DECODE_THREADS}, {"agnostic-nms", no_argument, 0, O_AGNOSTIC},
        {"shard", required_argument, 0, O_SHARD}, {"in-flight", required_argument, 0, O_IN_FLIGHT},
        {"canvas", required_argument, 0, O_CANVAS},
        {"profile", no_argument, 0, O_PROFILE}, {"profile-runs", required_argument, 0, O_PROFILE_RUNS},
        {"profile-json", required_argument, 0, O_PROFILE_JSON}, {"quiet", no_argument, 0, 'q'},
        {"verbose", no_argument, 0, 'v'}, {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->config_path = "configs/mask_rcnn_R-101-FPN_torchvision.json";
    o->weights_path = "model.safetensors";
    o->device = NULL;
    o->score_thresh = -1;
    o->max_dets = -1;
    o->profile_runs = 1;
    o->decode_threads = -1;
    o->canvas_h = o->canvas_w = -1;
    const char *lists[64];
    int nlists = 0, c;
    cli_error err = {0};
    opterr = 0;
    while ((c = getopt_long(argc, argv, "qvh", longs, NULL)) != -1) {
        switch (c) {
        case O_CONFIG: o->config_path = optarg; break;
        case O_WEIGHTS: o->weights_path = optarg; break;
        case O_DEVICE: o->device = optarg; break;
        case O_PRECISION:
            if (strcmp(optarg, "fp32") != 0 && strcmp(optarg, "tf32") != 0 && strcmp(optarg, "fp16") != 0 &&
                strcmp(optarg, "bf16") != 0 && strcmp(optarg, "int8") != 0) {
                fprintf(stderr, "detect: --precision: expected fp32, tf32, fp16, bf16 or int8, got \"%s\"\n",
                        optarg);
                return 2;
            }
            o->precision = optarg;
            break;
        case O_NO_FOLD: o->no_fold = 1; break;
        case O_JSON: o->json_path = optarg; break;
        case O_COCO: o->coco_path = optarg; break;
        case O_OUTPUT: o->output_dir = optarg; break;
        case O_THREADS: if (!parse_int("--threads", optarg, 1, 1024, &o->threads)) return 2; break;
        case O_MAXDETS: if (!parse_int("--max-dets", optarg, 1, 100000, &o->max_dets)) return 2; break;
        case O_PROFILE_RUNS: if (!parse_int("--profile-runs", optarg, 1, 100000, &o->profile_runs)) return 2; break;
        case O_SCORE: {
            char *end;
            o->score_thresh = strtod(optarg, &end);
            if (!*optarg || *end || !(o->score_thresh >= 0 && o->score_thresh <= 1)) {
                fprintf(stderr, "detect: --score-thresh: expected a number from 0 to 1, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        }
        case O_AGNOSTIC: o->agnostic_nms = 1; break;
        case O_CLASSES: o->classes = optarg; break;
        case O_LIST:
            if (nlists == 64) {
                fprintf(stderr, "detect: --list: at most 64 lists\n");
                return 2;
            }
            lists[nlists++] = optarg;
            break;
        case O_SKIP: o->skip_existing = 1; break;
        case O_CANVAS: {
            char *x = strchr(optarg, 'x'), tail;
            if (!x || sscanf(optarg, "%d", &o->canvas_h) != 1 || sscanf(x + 1, "%d%c", &o->canvas_w, &tail) != 1 ||
                o->canvas_h < 0 || o->canvas_w < 0) {
                fprintf(stderr, "detect: --canvas: expected HxW (such as 1344x1344, or 0x0 for none), got \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        }
        case O_IN_FLIGHT: if (!parse_int("--in-flight", optarg, 1, 16, &o->in_flight)) return 2; break;
        case O_DECODE_THREADS:
            if (!parse_int("--decode-threads", optarg, 0, 64, &o->decode_threads)) return 2;
            break;
        case O_SHARD:
            if (shard_parse(optarg, &o->shard, &err) != 0) {
                fprintf(stderr, "detect: %s\n", err.msg);
                return 2;
            }
            break;
        case O_PROFILE: o->profile = 1; break;
        case O_PROFILE_JSON: o->profile_json = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'v': o->verbose = 1; break;
        case 'h': usage(stdout); return -1;
        case O_VERSION: printf("detect %s\n", detect_version(NULL)); return -1; /* the library's release: one number */
        default:
            options_report_bad("detect", "--help", argc, argv);
            return 2;
        }
    }
    o->config_path = resolve_config(o->config_path, o->config_buf, sizeof o->config_buf);
    if (o->skip_existing && !o->output_dir) {
        fprintf(stderr, "detect: --skip-existing needs --output DIR\n");
        return 2;
    }
    for (int i = optind; i < argc; i++)
        if (inputs_add_path(&o->inputs, argv[i], &err) != 0) {
            fprintf(stderr, "detect: %s\n", err.msg);
            return 2;
        }
    for (int i = 0; i < nlists; i++)
        if (inputs_add_list(&o->inputs, lists[i], &err) != 0) {
            fprintf(stderr, "detect: %s\n", err.msg);
            return 2;
        }
    inputs_report_skipped(&o->inputs, "detect", o->verbose);
    if (o->inputs.count == 0) {
        if (o->inputs.not_images)
            fprintf(stderr, "detect: no input images (%d file%s skipped: not images; see --help)\n",
                    o->inputs.not_images, o->inputs.not_images > 1 ? "s" : "");
        else
            fprintf(stderr, "detect: no input images (see --help)\n");
        return 2;
    }
    inputs_unique_names(&o->inputs);
    return 0;
}

void options_free(options *o) { inputs_free(&o->inputs); }
