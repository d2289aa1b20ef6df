/* Command-line options of detect, their defaults and their parsing. */
#ifndef DETECT_OPTIONS_H
#define DETECT_OPTIONS_H

#include "inputs.h"
#include "shard.h"

typedef struct {
    const char *config_path, *weights_path;
    const char *device;      /* NULL: the GPU when there is one (and the CUDA backend is built), else cpu */
    const char *precision;   /* fp32 | tf32 | fp16 (GPU only); NULL: tf32 where the GPU has it */
    int no_fold;             /* GPU only: batchnorm as a separate AffineChannel pass */
    const char *json_path, *coco_path, *output_dir, *profile_json;
    const char *classes;     /* comma-separated class names, or NULL for all */
    double score_thresh;     /* < 0: the config's */
    int max_dets;            /* < 0: the config's */
    int agnostic_nms;        /* 1: --agnostic-nms (box_head.agnostic_nms on); 0: the config's */
    int threads;             /* 0: all cores */
    int decode_threads;      /* images decoded ahead on this many threads; 0: in turn; -1: the default */
    int in_flight;           /* images run at once (execution contexts); 0: the device's default */
    int canvas_h, canvas_w;  /* --canvas HxW; -1: the config's */
    int quiet, verbose, profile, profile_runs, skip_existing;
    shard_spec shard;        /* --shard K/N; count 0: all inputs */
    input_list inputs;
    char config_buf[4200];   /* config_path when found under the install prefix */
} options;

/* Returns 0 to run, 2 for a usage error (already reported), or -1 when
 * --help/--version has been answered and the program should exit 0. */
int options_parse(int argc, char **argv, options *o);
/* After getopt_long returned '?' or ':': prints "<prog>: ..." naming the
 * word at fault (not the one before it, which argv[optind - 1] is while
 * getopt is inside a cluster such as "-leading-dash.png"), with a hint for
 * a file whose name starts with '-'. `help` is the command's help option. */
void options_report_bad(const char *prog, const char *help, int argc, char **argv);
void options_free(options *o);

#endif
