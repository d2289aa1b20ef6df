/* See calibrate.h. */
#include "calibrate.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_error.h"
#include "inputs.h"
#include "options.h"

/* Chosen on the demo model's validation scenes (bench/NOTES.md section 22). */
#define DEFAULT_PERCENTILE 99.99
#define DEFAULT_COUNT 100

static void usage(FILE *f)
{
    fprintf(f,
            "usage: detect calibrate --config C --weights W [options] IMAGE|FOLDER...\n"
            "Measures, for each convolution, the range of its input over the images (the model runs in fp32\n"
            "on the CPU) and writes the ranges --precision int8 quantizes with, beside the weights:\n"
            "<weights without .safetensors>.int8.json. The images are taken in order (folders sorted); use\n"
            "images like the ones the model will see, and not the ones you evaluate it on.\n"
            "  --count N         the first N images (default %d)\n"
            "  --percentile P    per image, the P-th percentile of |input| (0 < P <= 100; default %g)\n"
            "  --threads N       CPU threads (the ranges do not depend on it)\n"
            "  -o, --output FILE write here instead of beside the weights\n"
            "  -q, --quiet       no summary line\n"
            "Exit status: 0 written, 1 written but some images failed, 2 nothing written.\n",
            DEFAULT_COUNT, DEFAULT_PERCENTILE);
}

static int parse_count(const char *name, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "detect calibrate: %s: expected a whole number from %ld to %ld, got \"%s\"\n", name, lo, hi,
                s);
        return 0;
    }
    *out = v;
    return 1;
}

static int run(const char *config, const char *weights, const char *output, input_list *in, long count,
               double percentile, long threads, int quiet)
{
    cli_error err = {0};
    detect_options *o = NULL;
    detect_model *m = NULL;
    detect_calibration *cal = NULL;
    int used = 0, failed = 0, rc = 2;
    if (cli_api(&err, detect_options_create(&o)) || cli_api(&err, detect_options_set_device(o, "cpu")) ||
        cli_api(&err, detect_options_set_precision(o, "fp32")) ||
        cli_api(&err, detect_options_set_threads(o, (int)threads)) ||
        cli_api(&err, detect_model_open(&m, config, weights, o)) ||
        cli_api(&err, detect_calibration_create(m, percentile, &cal))) {
        fprintf(stderr, "detect calibrate: %s\n", err.msg);
        goto done;
    }
    for (int i = 0; i < in->count && used < count; i++) {
        detect_image *img = NULL;
        if (cli_api(&err, detect_image_load(in->items[i].path, detect_model_max_image_side(m), &img)) ||
            cli_api(&err, detect_calibration_add(cal, img))) {
            fprintf(stderr, "detect calibrate: %s\n", err.msg);
            failed++;
        } else {
            used++;
        }
        detect_image_free(img);
    }
    if (used == 0) {
        fprintf(stderr, "detect calibrate: no image could be used; nothing written\n");
        goto done;
    }
    if (cli_api(&err, detect_calibration_save(cal, output))) {
        fprintf(stderr, "detect calibrate: %s\n", err.msg);
        goto done;
    }
    if (!quiet) {
        /* The library's default name (detect.h): <weights without .safetensors>.int8.json */
        size_t n = strlen(weights), e = strlen(".safetensors");
        if (n >= e && strcmp(weights + n - e, ".safetensors") == 0) n -= e;
        fprintf(stderr, "detect calibrate: ranges from %d image%s (%d failed) written to ", used, used > 1 ? "s" : "",
                failed);
        if (output)
            fprintf(stderr, "%s\n", output);
        else
            fprintf(stderr, "%.*s.int8.json\n", (int)n, weights);
    }
    rc = failed ? 1 : 0;
done:
    detect_calibration_free(cal);
    detect_model_free(m);
    detect_options_free(o);
    return rc;
}

int calibrate_main(int argc, char **argv)
{
    enum { O_CONFIG = 256, O_WEIGHTS, O_COUNT, O_PERCENTILE, O_THREADS };
    static const struct option longs[] = {
        {"config", required_argument, 0, O_CONFIG},   {"weights", required_argument, 0, O_WEIGHTS},
        {"count", required_argument, 0, O_COUNT},     {"percentile", required_argument, 0, O_PERCENTILE},
        {"threads", required_argument, 0, O_THREADS}, {"output", required_argument, 0, 'o'},
        {"quiet", no_argument, 0, 'q'},               {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *config = NULL, *weights = NULL, *output = NULL;
    long count = DEFAULT_COUNT, threads = 0;
    double percentile = DEFAULT_PERCENTILE;
    int quiet = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qh", longs, NULL)) != -1) {
        switch (c) {
        case O_CONFIG: config = optarg; break;
        case O_WEIGHTS: weights = optarg; break;
        case O_COUNT: if (!parse_count("--count", optarg, 1, 1000000, &count)) return 2; break;
        case O_THREADS: if (!parse_count("--threads", optarg, 1, 1024, &threads)) return 2; break;
        case O_PERCENTILE: {
            char *end;
            percentile = strtod(optarg, &end);
            if (!*optarg || *end || !(percentile > 0 && percentile <= 100)) {
                fprintf(stderr, "detect calibrate: --percentile: expected a number above 0 and at most 100, got "
                        "\"%s\"\n", optarg);
                return 2;
            }
            break;
        }
        case 'o': output = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default:
            options_report_bad("detect calibrate", "detect calibrate --help", argc, argv);
            return 2;
        }
    }
    if (!config || !weights) {
        fprintf(stderr, "detect calibrate: --config and --weights are required (see detect calibrate --help)\n");
        return 2;
    }
    input_list in = {0};
    cli_error err = {0};
    for (int i = optind; i < argc; i++)
        if (inputs_add_path(&in, argv[i], &err) != 0) {
            fprintf(stderr, "detect calibrate: %s\n", err.msg);
            inputs_free(&in);
            return 2;
        }
    inputs_report_skipped(&in, "detect calibrate", 0);
    if (in.count == 0) {
        fprintf(stderr, "detect calibrate: no images given (see detect calibrate --help)\n");
        inputs_free(&in);
        return 2;
    }
    int rc = run(config, weights, output, &in, count, percentile, threads, quiet);
    inputs_free(&in);
    return rc;
}
