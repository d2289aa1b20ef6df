/* detect: Mask R-CNN instance segmentation from the command line.
 *
 * Loads the config and weights once, then works through every input image:
 * decode, detect, filter, write the outputs the options ask for. A bad image
 * is named on stderr and the run goes on; outputs are written through
 * temporary files and renamed, so nothing finished is lost or half-written,
 * also when the run is interrupted (Ctrl-C stops after the current image). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "calibrate.h"
#include "detect.h"
#include "merge.h"
#include "options.h"
#include "output_pool.h"
#include "profile.h"
#include "progress.h"

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
    detect_model *model;
    detect_document *json;    /* --json */
    detect_document *coco;    /* --coco-results */
    profile_log prof;
    progress prog;
    const char **decode_list; /* per input: its path, or NULL when --skip-existing skips it */
    detect_image_queue *queue; /* decodes ahead; NULL: each image decoded in turn */
    double start;             /* now() when the command started */
    shard_plan shard;         /* --shard: this part's inputs among all; position NULL without */
    unsigned char *state;     /* per input: SHARD_NOT_REACHED, _DONE (in --json), _FAILED */
} run_state;

/* The command line's model settings as library options. The library names
 * the option at fault ("device x: ..."); its flag is the same word. */
static int open_model(run_state *r, cli_error *err)
{
    const options *o = &r->opt;
    detect_options *opts;
    CLI_TRY(cli_api(err, detect_options_create(&opts)));
    detect_status st = DETECT_OK;
    if (o->device) st = detect_options_set_device(opts, o->device);
    if (st == DETECT_OK && o->precision) st = detect_options_set_precision(opts, o->precision);
    if (st == DETECT_OK) st = detect_options_set_threads(opts, o->threads);
    if (st == DETECT_OK && o->score_thresh >= 0) st = detect_options_set_score_threshold(opts, o->score_thresh);
    if (st == DETECT_OK && o->max_dets > 0) st = detect_options_set_max_detections(opts, o->max_dets);
    if (st == DETECT_OK) st = detect_options_set_classes(opts, o->classes);
    if (st == DETECT_OK) st = detect_options_set_fold_batchnorm(opts, !o->no_fold);
    if (st == DETECT_OK && o->agnostic_nms) st = detect_options_set_agnostic_nms(opts, 1);
    /* One image, or --profile-runs (one image at a time by design): one
     * context, unless asked; more would only cost their loading. */
    int in_flight = o->in_flight ? o->in_flight : (o->inputs.count < 2 || o->profile_runs > 1) ? 1 : 0;
    if (st == DETECT_OK) st = detect_options_set_in_flight(opts, in_flight);
    if (st == DETECT_OK && o->canvas_h >= 0) st = detect_options_set_canvas(opts, o->canvas_h, o->canvas_w);
    if (st != DETECT_OK) {
        detect_options_free(opts);
        return cli_fail(err, "--%s", detect_last_error());
    }
    st = detect_model_open(&r->model, o->config_path, o->weights_path, opts);
    detect_options_free(opts);
    CLI_TRY(cli_api(err, st));
    /* One line per notice: the library's text starts with the option's name. */
    for (const char *n = detect_model_notice(r->model); *n;) {
        size_t len = strcspn(n, "\n");
        fprintf(stderr, "detect: notice: --%.*s\n", (int)len, n);
        n += len + (n[len] == '\n');
    }
    if (o->verbose) {
        int contexts = detect_model_in_flight(r->model);
        double all = 0;
        fprintf(stderr, "detect: in flight: %d on %s", contexts, detect_model_device(r->model));
        for (int k = 0; k < contexts && strcmp(detect_model_device(r->model), "cpu") != 0; k++) {
            double mib = (double)detect_model_device_memory(r->model, k) / (1024.0 * 1024.0);
            all += mib;
            fprintf(stderr, "%s%.1f", k ? ", " : "; device memory per context: ", mib);
        }
        if (all > 0) fprintf(stderr, " MiB; in all %.1f MiB", all);
        fputc('\n', stderr);
    }
    return 0;
}

/* One line per detection: "file: class score box x1,y1,x2,y2 mask N px". */
static void print_text(const run_state *r, const char *file, const detect_result *res)
{
    for (int i = 0; i < detect_result_count(res); i++) {
        detect_instance d;
        if (detect_result_instance(res, i, &d) != DETECT_OK) continue;
        size_t px = 0, n = d.mask ? (size_t)d.mask_w * (size_t)d.mask_h : 0;
        for (size_t p = 0; p < n; p++) px += d.mask[p];
        printf("%s: %-14s %.3f  box %.1f,%.1f,%.1f,%.1f  mask %zu px\n", file,
               detect_model_class_name(r->model, d.class_id), d.score, d.box[0], d.box[1], d.box[2], d.box[3], px);
    }
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
static int write_image_outputs(run_state *r, const input_item *in, const detect_image *img, const detect_result *res,
                               cli_error *err)
{
    char *png = output_path(r, in->name, ".png"), *json = output_path(r, in->name, ".json");
    int rc = png && json ? 0 : cli_fail(err, "out of memory");
    detect_image *drawn = NULL;
    if (rc == 0) rc = cli_api(err, detect_render(r->model, img, res, &drawn));
    if (rc == 0) rc = cli_api(err, detect_image_write_png(drawn, png));
    detect_document *one = NULL;
    if (rc == 0 && (rc = cli_api(err, detect_document_open(&one, DETECT_DOCUMENT_JSON, json))) == 0) {
        rc = cli_api(err, detect_document_add(one, r->model, in->path, 0, res));
        if (rc == 0) rc = cli_api(err, detect_document_close(one));
        else detect_document_abort(one);
    }
    detect_image_free(drawn);
    free(png);
    free(json);
    return rc;
}

/* The input's index among all inputs: its COCO image id when its name has
 * no digits, the same in every --shard part as in one run over all. */
static int input_position(const run_state *r, int index)
{
    return r->shard.position ? r->shard.position[index] : index;
}

/* Reads a whole small file, NUL-terminated; NULL (and err) when it cannot. */
static char *read_text(const char *path, cli_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_fail(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, got = 1;
    int bad = 0;
    while (!bad && got > 0) {
        if (cap - len < 2) {
            size_t grown = 2 * cap + 65536;
            char *p = realloc(buf, grown);
            if (!p) bad = 1;
            else buf = p, cap = grown;
        }
        if (!bad) len += got = fread(buf + len, 1, cap - len - 1, f);
    }
    bad = bad || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        cli_fail(err, "%s: cannot read", path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* --skip-existing with --json or --coco-results: the skipped image's entry,
 * read back from the NAME.json an earlier run wrote (a document of one
 * image), goes into this run's documents as if the image had been run
 * again, so a resumed run's documents are complete. */
static int take_over(run_state *r, int index, cli_error *err)
{
    const input_item *in = &r->opt.inputs.items[index];
    char *path = output_path(r, in->name, ".json");
    char *text = path ? read_text(path, err) : NULL;
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    cJSON *images = doc ? cJSON_GetObjectItemCaseSensitive(doc, "images") : NULL;
    char *entry = cJSON_GetArraySize(images) == 1 ? cJSON_PrintUnformatted(cJSON_GetArrayItem(images, 0)) : NULL;
    detect_result *res = NULL;
    int rc = -1;
    if (!path) cli_fail(err, "out of memory");
    else if (text && !entry) cli_fail(err, "%s: not a document of one image", path);
    else if (entry && detect_result_from_json(r->model, entry, &res) != DETECT_OK)
        cli_fail(err, "%s: %s", path, detect_last_error());
    else if (res) rc = 0;
    if (rc == 0 && r->json) rc = cli_api(err, detect_document_add(r->json, r->model, in->path, input_position(r, index), res));
    if (rc == 0 && r->json) r->state[index] = SHARD_DONE;
    if (rc == 0 && r->coco) rc = cli_api(err, detect_document_add(r->coco, r->model, in->path, input_position(r, index), res));
    detect_result_free(res);
    cJSON_free(entry);
    cJSON_Delete(doc);
    free(text);
    free(path);
    return rc;
}

/* A multi-page TIFF or an animated WebP: the run sees its first page only. */
static void page_notice(const char *path, const detect_image *img)
{
    int pages = detect_image_pages(img);
    if (pages > 1) fprintf(stderr, "detect: notice: %s holds %d pages or frames; only the first is read\n", path, pages);
}

/* One image, start to finish. *detections is the number of detections, or
 * -1 when skipped; a failure is reported in err. */
static int process(run_state *r, int index, int *detections, cli_error *err)
{
    const input_item *in = &r->opt.inputs.items[index];
    *detections = -1;
    int queued = r->queue != NULL;
    if (!r->decode_list[index]) { /* --skip-existing */
        if (!r->json && !r->coco) return 0;
        if (take_over(r, index, err) == 0) return 0;
        /* Its outputs cannot be read back: run the image again (it is not in the decode queue). */
        fprintf(stderr, "detect: notice: %s; running %s again\n", err->msg, in->path);
        queued = 0;
    }
    profile_run run = {0};
    double t0 = now();
    detect_image *img = NULL;
    detect_result *res = NULL;
    int rc;
    if (queued) {
        /* Decoded ahead: the decode's own time counts in this image's
         * total, not the (usually zero) wait for it. */
        rc = cli_api(err, detect_image_queue_take(r->queue, index, &img, &run.stage[PROF_DECODE]));
        t0 = now() - run.stage[PROF_DECODE];
    } else {
        rc = cli_api(err, detect_image_load(in->path, detect_model_max_image_side(r->model), &img));
        run.stage[PROF_DECODE] = now() - t0;
    }
    if (rc == 0) page_notice(in->path, img);
    /* --profile-runs N: one warm-up run, then N measured runs of the model;
     * outputs come from the last. Each measured run's total is its decode +
     * model + output time, measured by its own clock. */
    int profiling = r->opt.profile || r->opt.profile_json, runs = r->opt.profile_runs > 1 ? r->opt.profile_runs + 1 : 1;
    double model_total = 0;
    for (int k = 0; rc == 0 && k < runs; k++) {
        detect_result_free(res);
        res = NULL;
        double m0 = now();
        detect_status st = detect_run_image(r->model, img, &res);
        model_total = now() - m0;
        /* the library does not know the file */
        if (st != DETECT_OK) rc = cli_fail(err, "%s: %s", in->path, detect_last_error());
        if (rc != 0 || k == 0 || k + 1 == runs) continue; /* warm-up, or the last (recorded below) */
        profile_set_model(&run, res);
        run.total = run.stage[PROF_DECODE] + model_total;
        run.finished = now() - r->start;
        if (profiling) rc = profile_add(&r->prof, in->path, &run, err);
    }
    double o0 = now();
    if (rc == 0) {
        if (!r->opt.quiet) print_text(r, in->path, res);
        if (r->opt.output_dir) rc = write_image_outputs(r, in, img, res, err);
        int pos = input_position(r, index);
        if (rc == 0 && r->json) rc = cli_api(err, detect_document_add(r->json, r->model, in->path, pos, res));
        if (rc == 0 && r->json) r->state[index] = SHARD_DONE;
        if (rc == 0 && r->coco) rc = cli_api(err, detect_document_add(r->coco, r->model, in->path, pos, res));
    }
    if (rc == 0) {
        double t1 = now();
        *detections = detect_result_count(res);
        profile_set_model(&run, res);
        run.stage[PROF_OUTPUT] = t1 - o0;
        run.total = runs == 1 ? t1 - t0 : run.stage[PROF_DECODE] + model_total + run.stage[PROF_OUTPUT];
        run.finished = t1 - r->start;
        if (profiling) rc = profile_add(&r->prof, in->path, &run, err);
        if (rc == 0 && r->opt.profile) profile_print_run(stderr, in->path, &run);
    }
    detect_result_free(res);
    detect_image_free(img);
    return rc;
}

/* ---- Several images in flight (the model's contexts > 1) -------------------
 * Each input goes through three steps, each taken in input order by the main
 * thread: submitted (decoded, then handed to the run queue), collected (its
 * result handed to the output pool, whose workers draw and write its
 * --output files), finished (stdout, --json and --coco-results entries,
 * profile, progress). Inputs that --skip-existing passes over, or that fail
 * to decode, go through the same steps without running, so every document
 * keeps the inputs' order. Results equal a one-at-a-time run's byte for
 * byte (detect.h). Ctrl-C stops the submitting; what is in flight finishes
 * and is written. */

typedef enum { FLIGHT_SKIPPED, FLIGHT_FAILED, FLIGHT_RUNNING, FLIGHT_DONE } flight_state;

typedef struct {
    run_state *r;
    int index;
    flight_state state;
    detect_image *img;
    detect_result *res;
    cli_error err;   /* FLIGHT_FAILED's message */
    profile_run run; /* decode, the model's stages, output */
} flight;

/* The output pool's work: the --output files of a run image. */
static int write_flight(void *job, cli_error *err)
{
    flight *f = job;
    if (f->state != FLIGHT_DONE || !f->r->opt.output_dir) return 0;
    double t0 = now();
    int rc = write_image_outputs(f->r, &f->r->opt.inputs.items[f->index], f->img, f->res, err);
    f->run.stage[PROF_OUTPUT] = now() - t0;
    return rc;
}

static void submit_flight(run_state *r, detect_run_queue *q, flight *f)
{
    const input_item *in = &r->opt.inputs.items[f->index];
    if (!r->decode_list[f->index]) {
        f->state = FLIGHT_SKIPPED;
        return;
    }
    double t0 = now();
    int rc = r->queue ? cli_api(&f->err, detect_image_queue_take(r->queue, f->index, &f->img, &f->run.stage[PROF_DECODE]))
                      : cli_api(&f->err, detect_image_load(in->path, detect_model_max_image_side(r->model), &f->img));
    if (!r->queue) f->run.stage[PROF_DECODE] = now() - t0;
    if (rc == 0) page_notice(in->path, f->img);
    if (rc == 0) rc = cli_api(&f->err, detect_run_queue_submit(q, f->img, f));
    f->state = rc == 0 ? FLIGHT_RUNNING : FLIGHT_FAILED;
}

static void collect_flight(run_state *r, detect_run_queue *q, flight *f)
{
    if (f->state != FLIGHT_RUNNING) return;
    void *user = NULL;
    detect_status st = detect_run_queue_collect(q, &f->res, &user);
    if (st != DETECT_OK) { /* the library does not know the file */
        cli_fail(&f->err, "%s: %s", r->opt.inputs.items[f->index].path, detect_last_error());
        f->state = FLIGHT_FAILED;
        return;
    }
    f->state = FLIGHT_DONE;
    profile_set_model(&f->run, f->res);
}

/* The ordered end of one input; returns 0, or -1 with err for a failure. */
static int finish_flight(run_state *r, flight *f, int write_rc, int *detections, cli_error *err)
{
    const input_item *in = &r->opt.inputs.items[f->index];
    *detections = -1;
    if (f->state == FLIGHT_SKIPPED) return process(r, f->index, detections, err); /* reads its outputs back */
    if (f->state == FLIGHT_FAILED) {
        *err = f->err;
        return -1;
    }
    if (write_rc != 0) return -1; /* err set by the pool */
    int rc = 0;
    if (!r->opt.quiet) print_text(r, in->path, f->res);
    int pos = input_position(r, f->index);
    if (r->json) rc = cli_api(err, detect_document_add(r->json, r->model, in->path, pos, f->res));
    if (rc == 0 && r->json) r->state[f->index] = SHARD_DONE;
    if (rc == 0 && r->coco) rc = cli_api(err, detect_document_add(r->coco, r->model, in->path, pos, f->res));
    if (rc != 0) return rc;
    *detections = detect_result_count(f->res);
    /* the image's own work (in flight, its wall time overlaps the others') */
    f->run.total = 0;
    for (int s = 0; s < PROF_STAGES; s++) f->run.total += f->run.stage[s];
    f->run.finished = now() - r->start;
    if (r->opt.profile || r->opt.profile_json) rc = profile_add(&r->prof, in->path, &f->run, err);
    if (rc == 0 && r->opt.profile) profile_print_run(stderr, in->path, &f->run);
    return rc;
}

/* Output writers: the cores beside the main thread and the decoders, 1 to 4. */
static int output_threads(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores / 2 < 1 ? 1 : cores / 2 > 4 ? 4 : (int)(cores / 2);
}

/* Runs every input in flight; *done: inputs finished; returns the failures,
 * or -1 with err when the pipeline cannot start. */
static int run_in_flight(run_state *r, int *done, cli_error *err)
{
    int total = r->opt.inputs.count, failed = 0, threads = output_threads();
    detect_run_queue *q = NULL;
    output_pool *pool = NULL;
    CLI_TRY(cli_api(err, detect_run_queue_start(&q, r->model, 0)));
    int window = detect_run_queue_depth(q) + 2 * threads + 2; /* inputs between submitted and finished */
    flight *flights = calloc((size_t)window, sizeof *flights);
    if (!flights || output_pool_start(&pool, write_flight, threads, 2 * threads + 1, err) != 0) {
        if (!flights) cli_fail(err, "out of memory");
        free(flights);
        detect_run_queue_stop(q);
        return -1;
    }
    int submitted = 0, collected = 0, finished = 0;
    for (;;) {
        int end = stop_requested ? submitted : total;
        if (finished >= end) break;
        if (submitted < end && submitted - finished < window && detect_run_queue_pending(q) < detect_run_queue_depth(q)) {
            flight *f = &flights[submitted % window];
            memset(f, 0, sizeof *f);
            f->r = r;
            f->index = submitted++;
            submit_flight(r, q, f);
        } else if (collected < submitted && output_pool_pending(pool) < output_pool_depth(pool)) {
            flight *f = &flights[collected++ % window];
            collect_flight(r, q, f);
            output_pool_add(pool, f);
        } else {
            int write_rc = 0, dets;
            cli_error werr = {0};
            flight *f = output_pool_take(pool, &write_rc, &werr);
            const char *path = r->opt.inputs.items[f->index].path;
            if (finish_flight(r, f, write_rc, &dets, &werr) != 0) {
                progress_error(&r->prog, werr.msg);
                failed++;
                if (r->state[f->index] != SHARD_DONE) r->state[f->index] = SHARD_FAILED;
                progress_step(&r->prog, path, 0, f->run.total, 0);
            } else {
                progress_step(&r->prog, path, dets, f->run.total, 1);
            }
            detect_result_free(f->res);
            detect_image_free(f->img);
            f->res = NULL;
            f->img = NULL;
            finished++;
        }
    }
    output_pool_stop(pool);
    detect_run_queue_stop(q);
    free(flights);
    *done = finished;
    return failed;
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
    if (strcmp(detect_model_device(r->model), "cpu") == 0) spare = r->opt.threads > 0 ? cores - r->opt.threads : 0;
    return spare < 0 ? 0 : spare > 4 ? 4 : (int)spare;
}

/* Which inputs --skip-existing skips (decided once, up front: only this
 * run writes outputs, and only for inputs it does not skip), and the
 * queue that decodes the others ahead of the model. */
static int plan_inputs(run_state *r, cli_error *err)
{
    int n = r->opt.inputs.count;
    r->decode_list = calloc((size_t)n + 1, sizeof *r->decode_list);
    if (!r->decode_list) return cli_fail(err, "out of memory");
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
    if (threads == 0 || n < 2) return 0; /* one image: nothing to overlap */
    /* One more image than decoders: each decoder can start the next while
     * the model runs on the one taken. */
    return cli_api(err, detect_image_queue_start(&r->queue, r->decode_list, n, threads, threads + 1,
                                                 detect_model_max_image_side(r->model)));
}

/* A document written only at the end (--profile-json) is tried now, so a
 * bad path fails before hours of work rather than after: the temporary
 * file it will be written through is created and removed (an existing
 * device or FIFO, written in place, needs no try). */
static int check_late_output(const char *path, cli_error *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) return 0;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return cli_fail(err, "%s: is a folder", path);
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp) return cli_fail(err, "out of memory");
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    int rc = fd >= 0 ? 0 : cli_fail(err, "%s: cannot write: %s", path, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

/* Creates folder `dir` and any missing folders above it (mkdir -p), so
 * --output out/vis and --json out/all.json need no mkdir first. Returns 0,
 * or an errno value. */
static int make_folders(const char *dir)
{
    char *p = strdup(dir);
    if (!p) return ENOMEM;
    int e = 0;
    for (char *c = p + 1; e == 0; c++) {
        if (*c != '/' && *c != '\0') continue;
        const char keep = *c;
        *c = '\0';
        struct stat sb;
        if (stat(p, &sb) != 0 && mkdir(p, 0777) != 0 && errno != EEXIST) e = errno;
        *c = keep;
        if (keep == '\0') break;
    }
    free(p);
    return e;
}

/* The folder a document is written in, created when missing. */
static int make_parent(const char *path, cli_error *err)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return 0;
    char *dir = strndup(path, (size_t)(slash - path));
    if (!dir) return cli_fail(err, "out of memory");
    int e = make_folders(dir);
    int rc = e ? cli_fail(err, "%s: cannot write: cannot create its folder %s: %s", path, dir, strerror(e)) : 0;
    free(dir);
    return rc;
}

/* Loads everything; on failure the message is in err and the exit code is 2. */
static int setup(run_state *r, cli_error *err)
{
    /* --shard: after the output names were made unique over all inputs. */
    if (r->opt.shard.count) CLI_TRY(shard_select(&r->opt.inputs, r->opt.shard, &r->shard, err));
    r->state = calloc((size_t)r->opt.inputs.count + 1, 1);
    if (!r->state) return cli_fail(err, "out of memory");
    if (r->opt.shard.count && (r->opt.verbose || !r->opt.quiet))
        fprintf(stderr, "detect: shard %d of %d (--shard %d/%d): %d of %d inputs, fingerprint %016llx\n",
                r->shard.spec.index, r->shard.spec.count, r->shard.spec.index, r->shard.spec.count,
                r->opt.inputs.count, r->shard.inputs, (unsigned long long)r->shard.fingerprint);
    if (r->opt.output_dir) {
        struct stat sb;
        int e = stat(r->opt.output_dir, &sb) != 0 ? make_folders(r->opt.output_dir) : 0;
        if (e) return cli_fail(err, "%s: cannot create output folder: %s", r->opt.output_dir, strerror(e));
        if (stat(r->opt.output_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(r->opt.output_dir, W_OK) != 0)
            return cli_fail(err, "%s: not a writable folder", r->opt.output_dir);
    }
    const char *documents[] = {r->opt.json_path, r->opt.coco_path, r->opt.profile_json};
    for (size_t k = 0; k < sizeof documents / sizeof *documents; k++)
        if (documents[k]) CLI_TRY(make_parent(documents[k], err));
    CLI_TRY(open_model(r, err));
    if (r->opt.json_path) CLI_TRY(cli_api(err, detect_document_open(&r->json, DETECT_DOCUMENT_JSON, r->opt.json_path)));
    if (r->opt.coco_path) CLI_TRY(cli_api(err, detect_document_open(&r->coco, DETECT_DOCUMENT_COCO, r->opt.coco_path)));
    if (r->opt.profile_json) CLI_TRY(check_late_output(r->opt.profile_json, err));
    CLI_TRY(plan_inputs(r, err));
    if (r->opt.verbose)
        fprintf(stderr, "detect: %s (%d classes), weights %s, device %s, %d inputs\n", detect_model_name(r->model),
                detect_model_num_classes(r->model), r->opt.weights_path, detect_model_device(r->model),
                r->opt.inputs.count);
    return 0;
}

/* Closes the documents that span the run; failures count as failed outputs. */
static int finish(run_state *r, double wall)
{
    cli_error err = {0};
    int failed = 0;
    /* The shard's record, for detect merge: the document is complete only with it. */
    if (r->json && r->shard.position) {
        char *member = shard_member_json(&r->shard, &r->opt.inputs, r->state, r->opt.json_path, r->opt.coco_path);
        if (!member || cli_api(&err, detect_document_add_member(r->json, "shard", member)) != 0) {
            progress_error(&r->prog, member ? err.msg : "out of memory");
            detect_document_abort(r->json);
            r->json = NULL;
            failed++;
        }
        free(member);
    }
    detect_document *docs[2] = {r->json, r->coco};
    r->json = r->coco = NULL;
    for (int i = 0; i < 2; i++)
        if (docs[i] && cli_api(&err, detect_document_close(docs[i])) != 0) {
            progress_error(&r->prog, err.msg);
            failed++;
        }
    if (r->opt.profile) profile_print_summary(stderr, &r->prof, wall);
    if (r->opt.profile_json && profile_write_json(&r->prof, wall, r->opt.profile_json, &err) != 0) {
        progress_error(&r->prog, err.msg);
        failed++;
    }
    return failed;
}

static void teardown(run_state *r)
{
    detect_image_queue_stop(r->queue); /* first: its threads read the input paths */
    free(r->decode_list);
    free(r->state);
    shard_plan_free(&r->shard);
    detect_document_abort(r->json);
    detect_document_abort(r->coco);
    profile_free(&r->prof);
    detect_model_free(r->model);
    options_free(&r->opt);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "merge") == 0) return merge_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "calibrate") == 0) return calibrate_main(argc - 1, argv + 1);
    static run_state r;
    int rc = options_parse(argc, argv, &r.opt);
    if (rc) {
        options_free(&r.opt);
        return rc < 0 ? 0 : rc;
    }
    /* Before loading: Ctrl-C while the model loads stops before the first
     * image. The library holds signals while it computes (detect.h), so
     * this handler runs outside its kernels. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    cli_error err = {0};
    double start = now();
    r.start = start;
    if (setup(&r, &err) != 0) {
        fprintf(stderr, "detect: %s\n", err.msg);
        teardown(&r);
        return 2;
    }
    int total = r.opt.inputs.count, failed = 0;
    progress_init(&r.prog, total, !r.opt.quiet && total > 1);
    r.prog.not_images = r.opt.inputs.not_images;
    r.prog.special = r.opt.inputs.special;
    int i = 0;
    if (detect_model_in_flight(r.model) > 1 && r.opt.profile_runs <= 1) {
        int got = run_in_flight(&r, &i, &err);
        if (got < 0) {
            fprintf(stderr, "detect: %s\n", err.msg);
            teardown(&r);
            return 2;
        }
        failed = got;
    }
    for (; i < total && !stop_requested; i++) {
        double t0 = now();
        int dets;
        if (process(&r, i, &dets, &err) != 0) {
            progress_error(&r.prog, err.msg);
            failed++;
            if (r.state[i] != SHARD_DONE) r.state[i] = SHARD_FAILED;
            progress_step(&r.prog, r.opt.inputs.items[i].path, 0, now() - t0, 0);
        } else {
            progress_step(&r.prog, r.opt.inputs.items[i].path, dets, now() - t0, 1);
        }
    }
    int sizes, graphs_failed;
    double warm;
    if (detect_model_sizes_seen(r.model, &sizes, &warm, &graphs_failed) == DETECT_OK) {
        if (r.opt.verbose)
            fprintf(stderr, "detect: input sizes seen: %d (padded); warming up to them: %.3f s of host time\n", sizes,
                    warm);
        if (graphs_failed) /* the images are right, but slower: say why */
            fprintf(stderr, "detect: notice: %d CUDA graph%s could not be made (captured or instantiated; most "
                    "likely for want of GPU memory): those passes ran op by op, slower, with the same results\n",
                    graphs_failed, graphs_failed > 1 ? "s" : "");
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
