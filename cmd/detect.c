/* detect: Mask R-CNN instance segmentation from the command line.
 *
 * Loads the config and weights once, then works through every input image:
 * decode, detect, filter, write the outputs the options ask for. A bad image
 * is named on stderr and the run goes on; outputs are written through
 * temporary files and renamed, so nothing finished is lost or half-written,
 * also when the run is interrupted (Ctrl-C stops after the current image). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "backend.h"
#ifdef MR_HAVE_CUDA
#include "backend_cuda.h"
#endif
#include "coco_results.h"
#include "config.h"
#include "image.h"
#include "image_prefetch.h"
#include "model.h"
#include "options.h"
#include "output.h"
#include "profile.h"
#include "progress.h"
#include "visualize.h"

/* Set by SIGINT/SIGTERM: a signal handler can only talk through a global. */
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Everything a run holds. */
typedef struct {
    options opt;
    mr_config cfg;
    mr_backend be;
    mr_model *model;
    unsigned char *keep_class; /* --classes filter, per class id; NULL = all */
    output_json json;
    int json_open;
    coco_results *coco;
    profile_log prof;
    progress prog;
    const char **decode_list; /* per input: its path, or NULL when --skip-existing skips it */
    image_prefetch *prefetch; /* decodes ahead; NULL: each image decoded in turn */
    double start;             /* now() when the command started */
} run_state;

#ifdef MR_HAVE_CUDA
/* The CUDA backend when device `index` exists; otherwise (or when the GPU
 * cannot be set up) *why says why and the caller uses the CPU. */
static mr_status create_cuda(run_state *r, int index, char *why, size_t why_len, mr_error *err)
{
    char reason[256];
    if (backend_cuda_device_count(reason, sizeof reason) == 0) {
        snprintf(why, why_len, "no CUDA device (%s)", reason);
        return MR_ERR_UNSUPPORTED;
    }
    mr_cuda_params p = {index, 0, !r->opt.no_fold, 0};
    p.fp16 = r->opt.precision && strcmp(r->opt.precision, "fp16") == 0;
    p.tf32 = r->opt.precision ? strcmp(r->opt.precision, "tf32") == 0 : backend_cuda_has_tf32(index);
    mr_error e = {0};
    mr_status st = backend_cuda_create_ex(&r->be, &p, &e);
    if (st == MR_ERR_BACKEND) {
        snprintf(why, why_len, "%s", e.msg);
        return MR_ERR_UNSUPPORTED;
    }
    if (st != MR_OK) return mr_fail(err, st, "--device cuda:%d: %s", index, e.msg);
    return MR_OK;
}
#endif

static mr_status create_cpu(run_state *r, mr_error *err)
{
    /* the CPU computes in fp32 whatever --precision asks of a GPU */
    if (r->opt.precision && strcmp(r->opt.precision, "fp32") != 0)
        fprintf(stderr, "detect: notice: --precision %s applies to the GPU; the CPU computes in fp32\n",
                r->opt.precision);
    return backend_cpu_create(&r->be, r->opt.threads, err);
}

/* --device: cpu; cuda[:N] (a notice and the CPU when there is no usable
 * GPU); by default the GPU when there is one, silently the CPU otherwise. */
static mr_status create_backend(run_state *r, mr_error *err)
{
    const char *dev = r->opt.device;
    int index = 0;
    if (dev && strcmp(dev, "cpu") == 0) return create_cpu(r, err);
    if (dev) {
        char *end = NULL;
        int ok = strncmp(dev, "cuda", 4) == 0 && (dev[4] == '\0' || dev[4] == ':');
        if (ok && dev[4] == ':') {
            long v = strtol(dev + 5, &end, 10);
            ok = dev[5] != '\0' && *end == '\0' && v >= 0 && v < 1024;
            index = (int)v;
        }
        if (!ok) return mr_fail(err, MR_ERR_CONFIG, "--device %s: expected cpu, cuda or cuda:N", dev);
    }
#ifdef MR_HAVE_CUDA
    char why[MR_ERROR_MSG_LEN] = "";
    mr_status st = create_cuda(r, index, why, sizeof why, err);
    if (st != MR_ERR_UNSUPPORTED) return st;
    if (dev) fprintf(stderr, "detect: notice: --device %s: %s; running on the CPU\n", dev, why);
#else
    (void)index;
    if (dev) fprintf(stderr, "detect: notice: --device %s: this build has no CUDA backend; running on the CPU\n", dev);
#endif
    return create_cpu(r, err);
}

/* Applies --score-thresh, --max-dets and --classes to the config. */
static mr_status apply_overrides(run_state *r, mr_error *err)
{
    if (r->opt.score_thresh >= 0) r->cfg.box_head.score_thresh = (float)r->opt.score_thresh;
    if (r->opt.max_dets > 0) r->cfg.box_head.detections_per_image = r->opt.max_dets;
    if (r->opt.agnostic_nms) r->cfg.box_head.agnostic_nms = 1;
    MR_TRY(config_validate(&r->cfg, "command line", err));
    if (!r->opt.classes) return MR_OK;
    r->keep_class = calloc((size_t)r->cfg.classes.num_classes, 1);
    if (!r->keep_class) return mr_fail(err, MR_ERR_OOM, "out of memory");
    const char *s = r->opt.classes;
    while (*s) {
        size_t len = strcspn(s, ",");
        int found = 0;
        for (int k = 1; k < r->cfg.classes.num_classes; k++)
            if (strlen(r->cfg.classes.class_names[k]) == len && strncmp(r->cfg.classes.class_names[k], s, len) == 0)
                r->keep_class[k] = found = 1;
        if (!found)
            return mr_fail(err, MR_ERR_CONFIG, "--classes: no class named \"%.*s\" in %s", (int)len, s,
                           r->opt.config_path);
        s += len + (s[len] == ',');
    }
    return MR_OK;
}

static void filter_classes(const run_state *r, mr_result *res)
{
    if (!r->keep_class) return;
    int kept = 0;
    for (int i = 0; i < res->count; i++)
        if (r->keep_class[res->dets[i].class_id]) res->dets[kept++] = res->dets[i];
    res->count = kept; /* the dropped masks stay in res->mask_storage until result_free */
}

static char *output_path(const run_state *r, const char *name, const char *ext)
{
    size_t n = strlen(r->opt.output_dir) + strlen(name) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", r->opt.output_dir, name, ext);
    return p;
}

static int file_exists(const char *p)
{
    struct stat sb;
    return p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The per-image files of --output: NAME.png and NAME.json. */
static mr_status write_image_outputs(run_state *r, const input_item *in, const mr_image *img, const mr_result *res,
                                     mr_error *err)
{
    char *png = output_path(r, in->name, ".png"), *json = output_path(r, in->name, ".json");
    mr_status st = png && json ? MR_OK : mr_fail(err, MR_ERR_OOM, "out of memory");
    mr_image vis = {0};
    if (st == MR_OK) st = visualize_render(img, res, &r->cfg, &vis, err);
    if (st == MR_OK) st = visualize_write_png(png, &vis, err);
    output_json one;
    if (st == MR_OK && (st = output_json_open(&one, json, err)) == MR_OK) {
        st = output_json_add(&one, in->path, res, &r->cfg, err);
        if (st == MR_OK) st = output_json_close(&one, err);
        else output_json_abort(&one);
    }
    image_free(&vis);
    free(png);
    free(json);
    return st;
}

/* One image, start to finish. Returns the number of detections, or -1 when
 * skipped; a failure is reported in err. */
static mr_status process(run_state *r, int index, int *detections, mr_error *err)
{
    const input_item *in = &r->opt.inputs.items[index];
    *detections = -1;
    if (!r->decode_list[index]) return MR_OK; /* --skip-existing */
    profile_run run = {0};
    double t0 = now();
    mr_image img = {0};
    mr_result res = {0};
    mr_stage_times times;
    mr_status st;
    if (r->prefetch) {
        /* Decoded ahead: the decode's own time counts in this image's
         * total, not the (usually zero) wait for it. */
        st = image_prefetch_take(r->prefetch, index, &img, &run.stage[PROF_DECODE], err);
        t0 = now() - run.stage[PROF_DECODE];
    } else {
        st = image_load(in->path, r->cfg.input.max_image_side, &img, err);
        run.stage[PROF_DECODE] = now() - t0;
    }
    /* --profile-runs N: one warm-up run, then N measured runs of the model;
     * outputs come from the last. Each measured run's total is its decode +
     * model + output time, measured by its own clock. */
    int profiling = r->opt.profile || r->opt.profile_json, runs = r->opt.profile_runs > 1 ? r->opt.profile_runs + 1 : 1;
    double model_total = 0;
    for (int k = 0; st == MR_OK && k < runs; k++) {
        result_free(&res);
        double m0 = now();
        st = model_detect(r->model, &img, &res, &times, err);
        model_total = now() - m0;
        if (st != MR_OK) mr_error_prefix(err, "%s", in->path); /* the engine does not know the file */
        if (st != MR_OK || k == 0 || k + 1 == runs) continue; /* warm-up, or the last (recorded below) */
        profile_set_model(&run, &times);
        run.total = run.stage[PROF_DECODE] + model_total;
        run.finished = now() - r->start;
        if (profiling) st = profile_add(&r->prof, in->path, &run, err);
    }
    double o0 = now();
    if (st == MR_OK) {
        filter_classes(r, &res);
        if (!r->opt.quiet) output_print_text(stdout, in->path, &res, &r->cfg);
        if (r->opt.output_dir) st = write_image_outputs(r, in, &img, &res, err);
        if (st == MR_OK && r->json_open) st = output_json_add(&r->json, in->path, &res, &r->cfg, err);
        if (st == MR_OK && r->coco)
            st = coco_results_add(r->coco, coco_image_id(in->path, index), &res, &r->cfg, err);
    }
    if (st == MR_OK) {
        double t1 = now();
        *detections = res.count;
        profile_set_model(&run, &times);
        run.stage[PROF_OUTPUT] = t1 - o0;
        run.total = runs == 1 ? t1 - t0 : run.stage[PROF_DECODE] + model_total + run.stage[PROF_OUTPUT];
        run.finished = t1 - r->start;
        if (profiling) st = profile_add(&r->prof, in->path, &run, err);
        if (st == MR_OK && r->opt.profile) profile_print_run(stderr, in->path, &run);
    }
    result_free(&res);
    image_free(&img);
    return st;
}

/* --decode-threads' default: the cores the model leaves free, at most 4
 * (a 640x480 JPEG decodes in about 2 ms here, so 4 decoders keep ahead
 * of 200 COCO-size JPEGs a second with room to spare; a 1200x1600 PNG
 * takes about 30 ms). With the model on the GPU that is all cores but
 * the main thread's. On the CPU the model's OpenMP threads take the cores
 * they were given, and a decoder among them costs more than it saves: 9
 * full-size images with 2 threads on 2 cores ran 1-3% slower with one
 * decoder than with none (it preempts one OpenMP thread and the other
 * waits at the barrier). */
static int default_decode_threads(const run_state *r)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN), spare = cores - 1;
    if (strcmp(r->be.i->name, "cpu") == 0) spare = r->opt.threads > 0 ? cores - r->opt.threads : 0;
    return spare < 0 ? 0 : spare > 4 ? 4 : (int)spare;
}

/* Which inputs --skip-existing skips (decided once, up front: only this
 * run writes outputs, and only for inputs it does not skip), and the
 * prefetcher that decodes the others ahead of the model. */
static mr_status plan_inputs(run_state *r, mr_error *err)
{
    int n = r->opt.inputs.count;
    r->decode_list = calloc((size_t)n, sizeof *r->decode_list);
    if (!r->decode_list) return mr_fail(err, MR_ERR_OOM, "out of memory");
    for (int i = 0; i < n; i++) {
        const input_item *in = &r->opt.inputs.items[i];
        int skip = 0;
        if (r->opt.skip_existing) {
            char *png = output_path(r, in->name, ".png"), *json = output_path(r, in->name, ".json");
            skip = file_exists(png) && file_exists(json);
            free(png);
            free(json);
        }
        r->decode_list[i] = skip ? NULL : in->path;
    }
    int threads = r->opt.decode_threads < 0 ? default_decode_threads(r) : r->opt.decode_threads;
    if (threads == 0 || n < 2) return MR_OK; /* one image: nothing to overlap */
    /* One more image than decoders: each decoder can start the next while
     * the model runs on the one taken. */
    image_prefetch_params p = {threads, threads + 1, r->cfg.input.max_image_side};
    return image_prefetch_start(&r->prefetch, r->decode_list, n, &p, err);
}

/* Loads everything; on failure the message is in err and the exit code is 2. */
static mr_status setup(run_state *r, mr_error *err)
{
    MR_TRY(config_load(&r->cfg, r->opt.config_path, err));
    MR_TRY(apply_overrides(r, err));
    if (r->opt.output_dir) {
        struct stat sb;
        if (stat(r->opt.output_dir, &sb) != 0 && mkdir(r->opt.output_dir, 0777) != 0)
            return mr_fail(err, MR_ERR_IO, "%s: cannot create output folder: %s", r->opt.output_dir, strerror(errno));
        if (stat(r->opt.output_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(r->opt.output_dir, W_OK) != 0)
            return mr_fail(err, MR_ERR_IO, "%s: not a writable folder", r->opt.output_dir);
    }
    MR_TRY(create_backend(r, err));
    MR_TRY(model_load(&r->model, &r->cfg, r->opt.weights_path, r->be, err));
    if (r->opt.json_path) {
        MR_TRY(output_json_open(&r->json, r->opt.json_path, err));
        r->json_open = 1;
    }
    if (r->opt.coco_path) MR_TRY(coco_results_create(&r->coco, err));
    MR_TRY(plan_inputs(r, err));
    /* Documents written at the end are tried now, so a bad path fails before
     * hours of work rather than after. */
    const char *late[2] = {r->opt.coco_path, r->opt.profile_json};
    for (int i = 0; i < 2; i++) {
        atomic_file probe;
        if (!late[i]) continue;
        MR_TRY(atomic_file_open(&probe, late[i], err));
        atomic_file_abort(&probe);
    }
    if (r->opt.verbose)
        fprintf(stderr, "detect: %s (%d classes), weights %s, device %s, %d inputs\n", r->cfg.name,
                r->cfg.classes.num_classes, r->opt.weights_path, r->be.i->name, r->opt.inputs.count);
    return MR_OK;
}

/* Closes the documents that span the run; failures count as failed outputs. */
static int finish(run_state *r, double wall)
{
    mr_error err = {0};
    int failed = 0;
    if (r->json_open && output_json_close(&r->json, &err) != MR_OK) {
        progress_error(&r->prog, err.msg);
        failed++;
    }
    r->json_open = 0;
    if (r->coco && coco_results_write(r->coco, r->opt.coco_path, &err) != MR_OK) {
        progress_error(&r->prog, err.msg);
        failed++;
    }
    if (r->opt.profile) profile_print_summary(stderr, &r->prof, wall);
    if (r->opt.profile_json && profile_write_json(&r->prof, wall, r->opt.profile_json, &err) != MR_OK) {
        progress_error(&r->prog, err.msg);
        failed++;
    }
    return failed;
}

static void teardown(run_state *r)
{
    image_prefetch_stop(r->prefetch); /* first: its threads read the input paths */
    free(r->decode_list);
    if (r->json_open) output_json_abort(&r->json);
    coco_results_free(r->coco);
    profile_free(&r->prof);
    free(r->keep_class);
    model_free(r->model);
    if (r->be.i) r->be.i->destroy(r->be.ctx);
    options_free(&r->opt);
}

int main(int argc, char **argv)
{
    static run_state r; /* large (class names): keep it off the stack */
    int rc = options_parse(argc, argv, &r.opt);
    if (rc) {
        options_free(&r.opt);
        return rc < 0 ? 0 : rc;
    }
    mr_error err = {0};
    double start = now();
    r.start = start;
    if (setup(&r, &err) != MR_OK) {
        fprintf(stderr, "detect: %s\n", err.msg);
        teardown(&r);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int total = r.opt.inputs.count, failed = 0;
    progress_init(&r.prog, total, !r.opt.quiet && total > 1);
    r.prog.not_images = r.opt.inputs.not_images;
    int i = 0;
    for (; i < total && !stop_requested; i++) {
        double t0 = now();
        int dets;
        if (process(&r, i, &dets, &err) != MR_OK) {
            progress_error(&r.prog, err.msg);
            failed++;
            progress_step(&r.prog, r.opt.inputs.items[i].path, 0, now() - t0, 0);
        } else {
            progress_step(&r.prog, r.opt.inputs.items[i].path, dets, now() - t0, 1);
        }
    }
    failed += finish(&r, now() - start);
    progress_finish(&r.prog);
    int n_skip = r.opt.inputs.not_images;
    if (!r.prog.enabled && !r.opt.quiet && n_skip) /* no summary line to count them in */
        fprintf(stderr, "detect: %d file%s skipped: not images\n", n_skip, n_skip > 1 ? "s" : "");
    if (stop_requested)
        fprintf(stderr, "detect: interrupted: %d of %d images done (%d failed); finished outputs are complete\n", i,
                total, failed);
    teardown(&r);
    return stop_requested ? 130 : failed ? 1 : 0;
}
