/* The public API (include/detect.h): errors, versions, options, opening a
 * model on the device asked for, and what a model says about itself. */
#include "api/api_internal.h"

#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_registry.h"
#include "io/int8_ranges_file.h"

/* The message of each thread's last failing call. Thread-local, like errno
 * and OpenVINO's last-error message: the only state outside the objects,
 * and no thread ever sees another's. */
static _Thread_local char last_error[MR_ERROR_MSG_LEN];

detect_status api_status(mr_status st)
{
    switch (st) {
    case MR_OK: return DETECT_OK;
    case MR_ERR_IO: return DETECT_ERR_IO;
    case MR_ERR_FORMAT: return DETECT_ERR_FORMAT;
    case MR_ERR_CONFIG: return DETECT_ERR_CONFIG;
    case MR_ERR_SHAPE: return DETECT_ERR_SHAPE;
    case MR_ERR_RANGE: return DETECT_ERR_RANGE;
    case MR_ERR_OOM: return DETECT_ERR_OOM;
    case MR_ERR_UNSUPPORTED: return DETECT_ERR_UNSUPPORTED;
    case MR_ERR_BACKEND: return DETECT_ERR_BACKEND;
    case MR_ERR_INTERNAL: return DETECT_ERR_INTERNAL;
    }
    return DETECT_ERR_INTERNAL;
}

detect_status api_fail(const mr_error *err)
{
    snprintf(last_error, sizeof last_error, "%s", err->msg);
    return api_status(err->status);
}

detect_status api_failf(detect_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

void api_async_signals(sigset_t *set)
{
    static const int never_held[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
    sigfillset(set);
    for (size_t i = 0; i < sizeof never_held / sizeof never_held[0]; i++) sigdelset(set, never_held[i]);
}

void api_hold_signals(sigset_t *saved)
{
    sigset_t set;
    api_async_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, saved);
}

void api_release_signals(const sigset_t *saved)
{
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

void api_hold_signals_in_workers(void)
{
    sigset_t set;
    api_async_signals(&set);
    /* every thread of the pool but this one, which restores its own mask */
#pragma omp parallel
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &set, NULL);
}

const char *detect_last_error(void)
{
    return last_error;
}

const char *detect_status_name(detect_status s)
{
    static const char *const names[] = {"DETECT_OK",          "DETECT_ERR_IO",        "DETECT_ERR_FORMAT",
                                        "DETECT_ERR_CONFIG",  "DETECT_ERR_SHAPE",     "DETECT_ERR_RANGE",
                                        "DETECT_ERR_OOM",     "DETECT_ERR_UNSUPPORTED", "DETECT_ERR_BACKEND",
                                        "DETECT_ERR_INTERNAL", "DETECT_ERR_ARGUMENT"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

const char *detect_version(int *abi)
{
    if (abi) *abi = DETECT_ABI_VERSION;
    return DETECT_VERSION_STRING;
}

void detect_free(void *p)
{
    free(p);
}

/* ---- Options ------------------------------------------------------------ */

static void options_defaults(detect_options *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->device, sizeof o->device, "auto");
    o->score_thresh = -1;
    o->fold = 1;
    o->agnostic_nms = -1;
    o->canvas_h = o->canvas_w = -1;
}

detect_status detect_options_create(detect_options **out)
{
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_options_create: out is NULL");
    detect_options *o = malloc(sizeof *o);
    if (!(*out = o)) return api_failf(DETECT_ERR_OOM, "out of memory");
    options_defaults(o);
    return DETECT_OK;
}

void detect_options_free(detect_options *o)
{
    if (!o) return;
    free(o->classes);
    free(o);
}

#define NEED_OPTIONS(o)                                                                                              \
    do {                                                                                                             \
        if (!(o)) return api_failf(DETECT_ERR_ARGUMENT, "%s: options is NULL", __func__);                           \
    } while (0)

/* "cuda" or "cuda:N" (N in 0..1023) -> *index; 0 for anything else. */
static int parse_cuda_device(const char *dev, int *index)
{
    if (strncmp(dev, "cuda", 4) != 0 || (dev[4] != '\0' && dev[4] != ':')) return 0;
    *index = 0;
    if (dev[4] == '\0') return 1;
    char *end = NULL;
    long v = strtol(dev + 5, &end, 10);
    if (dev[5] < '0' || dev[5] > '9' || *end != '\0' || v < 0 || v >= 1024) return 0;
    *index = (int)v;
    return 1;
}

detect_status detect_options_set_device(detect_options *o, const char *device)
{
    NEED_OPTIONS(o);
    int index;
    if (!device || (strcmp(device, "auto") && strcmp(device, "cpu") && !parse_cuda_device(device, &index)) ||
        strlen(device) >= sizeof o->device)
        return api_failf(DETECT_ERR_CONFIG, "device %s: expected auto, cpu, cuda or cuda:N", device ? device : "NULL");
    snprintf(o->device, sizeof o->device, "%s", device);
    return DETECT_OK;
}

detect_status detect_options_set_precision(detect_options *o, const char *precision)
{
    NEED_OPTIONS(o);
    if (!precision || !*precision || !strcmp(precision, "auto")) {
        o->precision[0] = '\0';
        return DETECT_OK;
    }
    if (strcmp(precision, "fp32") && strcmp(precision, "tf32") && strcmp(precision, "fp16") &&
        strcmp(precision, "bf16") && strcmp(precision, "int8"))
        return api_failf(DETECT_ERR_CONFIG, "precision %s: expected fp32, tf32, fp16, bf16 or int8", precision);
    snprintf(o->precision, sizeof o->precision, "%s", precision);
    return DETECT_OK;
}

detect_status detect_options_set_threads(detect_options *o, int threads)
{
    NEED_OPTIONS(o);
    if (threads < 0 || threads > 1024) return api_failf(DETECT_ERR_CONFIG, "threads %d: expected 0..1024", threads);
    o->threads = threads;
    return DETECT_OK;
}

detect_status detect_options_set_score_threshold(detect_options *o, double threshold)
{
    NEED_OPTIONS(o);
    if (!(threshold >= 0 && threshold <= 1))
        return api_failf(DETECT_ERR_CONFIG, "score threshold %g: expected a number in [0,1]", threshold);
    o->score_thresh = threshold;
    return DETECT_OK;
}

detect_status detect_options_set_max_detections(detect_options *o, int max_detections)
{
    NEED_OPTIONS(o);
    if (max_detections < 1)
        return api_failf(DETECT_ERR_CONFIG, "max detections %d: expected at least 1", max_detections);
    o->max_dets = max_detections;
    return DETECT_OK;
}

detect_status detect_options_set_classes(detect_options *o, const char *names)
{
    NEED_OPTIONS(o);
    char *copy = names && *names ? strdup(names) : NULL;
    if (names && *names && !copy) return api_failf(DETECT_ERR_OOM, "out of memory");
    free(o->classes);
    o->classes = copy;
    return DETECT_OK;
}

detect_status detect_options_set_fold_batchnorm(detect_options *o, int fold)
{
    NEED_OPTIONS(o);
    o->fold = fold != 0;
    return DETECT_OK;
}

detect_status detect_options_set_agnostic_nms(detect_options *o, int on)
{
    NEED_OPTIONS(o);
    o->agnostic_nms = on != 0;
    return DETECT_OK;
}

detect_status detect_options_set_canvas(detect_options *o, int height, int width)
{
    NEED_OPTIONS(o);
    if (height < 0 || width < 0 || height > 65536 || width > 65536 || (height > 0) != (width > 0))
        return api_failf(DETECT_ERR_CONFIG, "canvas %dx%d: expected both sides from 1 to 65536, or 0x0 for none",
                         height, width);
    o->canvas_h = height;
    o->canvas_w = width;
    return DETECT_OK;
}

detect_status detect_options_set_in_flight(detect_options *o, int images)
{
    NEED_OPTIONS(o);
    if (images < 0 || images > API_MAX_IN_FLIGHT)
        return api_failf(DETECT_ERR_CONFIG, "in-flight %d: expected 0 (the device's default) to %d", images,
                         API_MAX_IN_FLIGHT);
    o->in_flight = images;
    return DETECT_OK;
}

/* ---- Opening a model ----------------------------------------------------- */

/* Appends one line to the model's notice. */
static void add_notice(detect_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_notice(detect_model *m, const char *fmt, ...)
{
    size_t used = strlen(m->notice);
    if (used && used + 1 < sizeof m->notice) m->notice[used++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->notice + used, sizeof m->notice - used, fmt, ap);
    va_end(ap);
}

/* bf16 and int8: precisions only the CPU computes in. */
static int cpu_precision(const char *precision)
{
    return strcmp(precision, "bf16") == 0 || strcmp(precision, "int8") == 0;
}

/* The OpenMP threads of each CPU context: the threads asked for (0: every
 * core) shared out among the contexts, at least one each. Results do not
 * depend on the count (docs/usage.md). */
static int cpu_context_threads(const detect_options *o)
{
    int contexts = o->in_flight > 0 ? o->in_flight : 1;
    if (contexts == 1) return o->threads;
    int threads = o->threads > 0 ? o->threads : omp_get_num_procs();
    return threads / contexts > 1 ? threads / contexts : 1;
}

static mr_status create_cpu(detect_model *m, const detect_options *o, mr_backend *be, mr_error *err)
{
    int bf16 = strcmp(o->precision, "bf16") == 0, int8 = strcmp(o->precision, "int8") == 0;
    if (o->precision[0] && strcmp(o->precision, "fp32") != 0 && !cpu_precision(o->precision))
        add_notice(m, "precision %s applies to the GPU; the CPU computes in fp32", o->precision);
    snprintf(m->device, sizeof m->device, "cpu");
    mr_backend_params p = {.threads = cpu_context_threads(o),
                           .precision = bf16 ? MR_PRECISION_BF16 : int8 ? MR_PRECISION_INT8 : MR_PRECISION_FP32};
    return backend_open("cpu", &p, be, err);
}

/* The GPU's precision from the option ("" is the device's best). */
static mr_precision gpu_precision(const char *precision)
{
    if (!strcmp(precision, "fp32")) return MR_PRECISION_FP32;
    if (!strcmp(precision, "tf32")) return MR_PRECISION_TF32;
    if (!strcmp(precision, "fp16")) return MR_PRECISION_FP16;
    return MR_PRECISION_DEFAULT;
}

/* The CUDA backend on device `index`; MR_ERR_UNSUPPORTED with *why set
 * when this build or machine has no usable GPU, *present saying whether a
 * GPU was there at all (one that fails to open is worth a notice). */
static mr_status create_cuda(detect_model *m, const detect_options *o, int index, mr_backend *be, char *why,
                             size_t why_len, int *present, mr_error *err)
{
    *present = backend_available("cuda", why, why_len);
    if (!*present) return MR_ERR_UNSUPPORTED;
    mr_backend_params p = {.precision = gpu_precision(o->precision), .device = index, .no_fold = !o->fold};
    mr_error e = {0};
    mr_status st = backend_open("cuda", &p, be, &e);
    if (st == MR_ERR_BACKEND) {
        snprintf(why, why_len, "%s", e.msg);
        return MR_ERR_UNSUPPORTED;
    }
    if (st != MR_OK) return mr_fail(err, st, "device cuda:%d: %s", index, e.msg);
    snprintf(m->device, sizeof m->device, "cuda:%d", index);
    return MR_OK;
}

/* "cpu": the CPU. "cuda[:N]", asked for by name: that GPU or an error
 * (MR_ERR_UNSUPPORTED, naming the cause: no driver, no device, too old a
 * GPU, a library missing), never a silent change of device: a user who
 * names the GPU and gets the CPU would read its times as the GPU's.
 * "auto", the default: the GPU when there is one; on a machine with no
 * CUDA driver or device, the CPU quietly (the model's device says so); a
 * GPU that is there but fails to open, the CPU with a notice saying why. */
static mr_status create_backend(detect_model *m, const detect_options *o, mr_backend *be, mr_error *err)
{
    int index = 0;
    if (strcmp(o->device, "cpu") == 0) return create_cpu(m, o, be, err);
    int asked = parse_cuda_device(o->device, &index);
    if (cpu_precision(o->precision)) { /* auto means the CPU */
        if (asked)
            return mr_fail(err, MR_ERR_UNSUPPORTED, "device %s: precision %s is the CPU's; the GPU computes in "
                           "fp32, tf32 or fp16", o->device, o->precision);
        return create_cpu(m, o, be, err);
    }
    char why[MR_ERROR_MSG_LEN] = "";
    int present = 0;
    mr_status st = create_cuda(m, o, index, be, why, sizeof why, &present, err);
    if (st != MR_ERR_UNSUPPORTED) return st;
    if (asked)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "device %s: %s (--device auto runs on the CPU instead)", o->device,
                       why);
    if (present) add_notice(m, "device %s: %s; running on the CPU", o->device, why);
    return create_cpu(m, o, be, err);
}

/* Another context on the device the first one chose. */
static mr_status create_same_backend(detect_model *m, const detect_options *o, mr_backend *be, mr_error *err)
{
    if (strcmp(m->device, "cpu") == 0) return create_cpu(m, o, be, err);
    mr_backend_params p = {.precision = gpu_precision(o->precision), .device = atoi(m->device + 5),
                           .no_fold = !o->fold};
    return backend_open("cuda", &p, be, err);
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* The device memory context k took since it opened (0 on the CPU); *free_bytes
 * and *total the device's now. */
static mr_status measure_context(api_context *c, size_t *free_bytes, size_t *total, mr_error *err)
{
    *free_bytes = *total = 0;
    if (!c->be.i->device_memory) return MR_OK;
    return c->be.i->device_memory(c->be.ctx, &c->device_bytes, free_bytes, total, err);
}

/* How many contexts a GPU runs by default: as many as its free memory
 * holds beside the first, keeping a tenth of the device spare (for the
 * graphs of sizes not seen yet, and for other programs), at most 4: each
 * context's host thread feeds the GPU while the others' work runs, and
 * bench/NOTES.md section 26 predicts that 4 saturate it. */
static int default_gpu_contexts(size_t first, size_t free_bytes, size_t total)
{
    size_t spare = total / 10;
    if (first == 0 || free_bytes <= spare) return 1;
    size_t more = (free_bytes - spare) / first;
    return more >= 3 ? 4 : 1 + (int)more;
}

/* Opens contexts 1.. after the first: the count asked for, or the device's
 * default. A context the GPU has no memory for lowers the count, with a
 * notice naming what was asked; any other failure fails the open. */
static mr_status open_more_contexts(detect_model *m, const detect_options *o, const mr_int8_ranges *ranges,
                                    mr_error *err)
{
    size_t free_bytes, total;
    MR_TRY(measure_context(&m->ctx[0], &free_bytes, &total, err));
    int cpu = strcmp(m->device, "cpu") == 0;
    int want = o->in_flight > 0 ? o->in_flight : cpu ? 1 : default_gpu_contexts(m->ctx[0].device_bytes, free_bytes, total);
    while (m->contexts < want) {
        api_context *c = &m->ctx[m->contexts];
        c->threads = cpu ? cpu_context_threads(o) : 0;
        mr_error e = {0};
        mr_status st = create_same_backend(m, o, &c->be, &e);
        if (st == MR_OK) st = model_load(&c->model, &m->cfg, m->weights_path, c->be, ranges, &e);
        if (st == MR_OK) st = measure_context(c, &free_bytes, &total, &e);
        if (st != MR_OK) {
            model_free(c->model);
            if (c->be.i) c->be.i->destroy(c->be.ctx);
            memset(c, 0, sizeof *c);
        }
        if (st == MR_ERR_OOM && m->contexts > 0) {
            add_notice(m, "in-flight %d: %s; running %d at once (%.1f MiB free of %.1f MiB)", want, e.msg,
                       m->contexts, mib(free_bytes), mib(total));
            return MR_OK;
        }
        if (st != MR_OK) return mr_fail(err, st, "in-flight %d: context %d: %s", want, m->contexts + 1, e.msg);
        m->contexts++;
    }
    return MR_OK;
}

uint64_t api_size_key(const detect_model *m, int in_h, int in_w)
{
    if (in_h <= 0 || in_w <= 0) return 0;
    int h, w;
    model_input_size(m->ctx[0].model, in_h, in_w, &h, &w);
    return (uint64_t)(uint32_t)h << 32 | (uint32_t)w;
}

static int ran_size(const api_context *c, uint64_t key)
{
    for (int i = 0; i < API_WARM_SIZES && key; i++)
        if (c->warm[i] == key) return 1;
    return 0;
}

/* Which free context: one that ran this size already (on a GPU its graph
 * is warm there), else the first free one. Never waits for a busy warm
 * one: a folder of one size then warms every context once, and runs on
 * all of them. */
api_context *api_context_take(detect_model *m, uint64_t key)
{
    pthread_mutex_lock(&m->lock);
    api_context *c = NULL;
    for (;;) {
        for (int k = 0; k < m->contexts; k++) {
            api_context *x = &m->ctx[k];
            if (x->busy) continue;
            if (!c) c = x;
            if (ran_size(x, key)) {
                c = x;
                break;
            }
        }
        if (c) break;
        pthread_cond_wait(&m->ctx_freed, &m->lock);
    }
    c->busy = 1;
    pthread_mutex_unlock(&m->lock);
    /* OpenMP's thread count is kept per calling thread: a run on another
     * thread than the one that opened the model would use every core. */
    if (c->threads > 0) omp_set_num_threads(c->threads);
    return c;
}

/* Notes the padded input size c's model just ran, among the model's sizes
 * seen and c's warm ones (the model's lock held). */
static void note_size(detect_model *m, api_context *c, uint64_t key)
{
    if (!key) return;
    if (!ran_size(c, key)) c->warm[c->warm_next++ % API_WARM_SIZES] = key;
    int stored = m->sizes_count < API_MAX_SIZES_SEEN ? m->sizes_count : API_MAX_SIZES_SEEN;
    for (int i = 0; i < stored; i++)
        if (m->sizes_seen[i] == key) return;
    /* new; past the table's end only counted (a size met again there counts again, the rare case) */
    if (m->sizes_count < API_MAX_SIZES_SEEN) m->sizes_seen[m->sizes_count] = key;
    m->sizes_count++;
}

void api_context_give_back(detect_model *m, api_context *c, uint64_t ran_key)
{
    pthread_mutex_lock(&m->lock);
    note_size(m, c, ran_key);
    c->busy = 0;
    pthread_cond_signal(&m->ctx_freed);
    pthread_mutex_unlock(&m->lock);
}

/* The options' overrides of the config, and the class filter. */
static mr_status apply_options(detect_model *m, const detect_options *o, const char *origin, mr_error *err)
{
    if (o->score_thresh >= 0) m->cfg.box_head.score_thresh = (float)o->score_thresh;
    if (o->max_dets > 0) m->cfg.box_head.detections_per_image = o->max_dets;
    if (o->agnostic_nms >= 0) m->cfg.box_head.agnostic_nms = o->agnostic_nms;
    if (o->canvas_h >= 0) {
        m->cfg.input.canvas_h = o->canvas_h;
        m->cfg.input.canvas_w = o->canvas_w;
    }
    MR_TRY(config_validate(&m->cfg, "options", err));
    if (!o->classes) return MR_OK;
    m->keep_class = calloc((size_t)m->cfg.classes.num_classes, 1);
    if (!m->keep_class) return mr_fail(err, MR_ERR_OOM, "out of memory");
    for (const char *s = o->classes; *s;) {
        size_t len = strcspn(s, ",");
        int found = 0;
        for (int k = 1; k < m->cfg.classes.num_classes; k++)
            if (strlen(m->cfg.classes.class_names[k]) == len && strncmp(m->cfg.classes.class_names[k], s, len) == 0)
                m->keep_class[k] = found = 1;
        if (!found) return mr_fail(err, MR_ERR_CONFIG, "classes: no class named \"%.*s\" in %s", (int)len, s, origin);
        s += len + (s[len] == ',');
    }
    return MR_OK;
}

static mr_status load_config(mr_config *cfg, const char *config, mr_error *err)
{
    config_defaults(cfg);
    const char *p = config;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p == '{') return config_parse(cfg, config, "config text", err);
    return config_load(cfg, config, err);
}

/* The int8 ranges beside the weights, or an error that says how to make them. */
static mr_status load_int8_ranges(mr_int8_ranges *r, const char *config, const char *weights_path, mr_error *err)
{
    char path[1100];
    int8_ranges_path_for(weights_path, path, sizeof path);
    if (access(path, F_OK) != 0)
        return mr_fail(err, MR_ERR_CONFIG, "precision int8 needs activation ranges, and %s does not exist: make "
                       "them with `detect calibrate --config %s --weights %s IMAGES...`", path,
                       config[0] == '{' ? "CONFIG" : config, weights_path);
    return int8_ranges_load(r, path, err);
}

static detect_status model_open(detect_model **out, const char *config, const char *weights_path,
                                const detect_options *opts)
{
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_model_open: out is NULL");
    *out = NULL;
    if (!config || !weights_path)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_model_open: %s is NULL", config ? "weights_path" : "config");
    detect_options defaults;
    if (!opts) {
        options_defaults(&defaults);
        opts = &defaults;
    }
    detect_model *m = calloc(1, sizeof *m);
    if (!m) return api_failf(DETECT_ERR_OOM, "out of memory opening a model");
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->ctx_freed, NULL);
    mr_error err = {0};
    mr_status st = load_config(&m->cfg, config, &err);
    if (st == MR_OK) st = apply_options(m, opts, config[0] == '{' ? "the config text" : config, &err);
    if (st == MR_OK) st = create_backend(m, opts, &m->ctx[0].be, &err);
    m->ctx[0].threads = cpu_context_threads(opts);
    snprintf(m->precision, sizeof m->precision, "%s", opts->precision);
    snprintf(m->weights_path, sizeof m->weights_path, "%s", weights_path);
    mr_int8_ranges ranges = {0};
    int int8 = strcmp(opts->precision, "int8") == 0;
    if (st == MR_OK && int8) st = load_int8_ranges(&ranges, config, weights_path, &err);
    if (st == MR_OK) st = model_load(&m->ctx[0].model, &m->cfg, weights_path, m->ctx[0].be, int8 ? &ranges : NULL, &err);
    if (st == MR_OK) m->contexts = 1;
    if (st == MR_OK) st = open_more_contexts(m, opts, int8 ? &ranges : NULL, &err);
    int8_ranges_free(&ranges);
    if (st == MR_OK) api_hold_signals_in_workers(); /* after the backend set the thread count */
    if (st != MR_OK) {
        detect_model_free(m);
        return api_fail(&err);
    }
    *out = m;
    return DETECT_OK;
}

detect_status detect_model_open(detect_model **out, const char *config, const char *weights_path,
                                const detect_options *opts)
{
    sigset_t signals; /* held from the first instruction to the return (api_internal.h) */
    api_hold_signals(&signals);
    detect_status st = model_open(out, config, weights_path, opts);
    api_release_signals(&signals);
    return st;
}

void detect_model_free(detect_model *m)
{
    if (!m) return;
    for (int k = 0; k < API_MAX_IN_FLIGHT; k++) {
        model_free(m->ctx[k].model);
        if (m->ctx[k].be.i) m->ctx[k].be.i->destroy(m->ctx[k].be.ctx);
    }
    free(m->keep_class);
    pthread_cond_destroy(&m->ctx_freed);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

const char *detect_model_device(const detect_model *m)
{
    return m ? m->device : "";
}

const char *detect_model_notice(const detect_model *m)
{
    return m ? m->notice : "";
}

const char *detect_model_name(const detect_model *m)
{
    return m ? m->cfg.name : "";
}

int detect_model_num_classes(const detect_model *m)
{
    return m ? m->cfg.classes.num_classes : 0;
}

const char *detect_model_class_name(const detect_model *m, int class_id)
{
    if (!m || class_id < 0 || class_id >= m->cfg.classes.num_classes) return NULL;
    return m->cfg.classes.class_names[class_id];
}

int detect_model_max_image_side(const detect_model *m)
{
    return m ? m->cfg.input.max_image_side : 0;
}

int detect_model_in_flight(const detect_model *m)
{
    return m ? m->contexts : 0;
}

detect_status detect_model_sizes_seen(detect_model *m, int *sizes, double *warm_seconds, int *graphs_failed)
{
    if (!m || !sizes || !warm_seconds)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_model_sizes_seen: %s is NULL", m ? "an output" : "model");
    pthread_mutex_lock(&m->lock);
    *sizes = m->sizes_count;
    *warm_seconds = 0;
    if (graphs_failed) *graphs_failed = 0;
    /* each context's counters are its own thread's while it runs: read them
     * idle (take every context, as a run would) */
    pthread_mutex_unlock(&m->lock);
    api_context *held[API_MAX_IN_FLIGHT];
    int n = m->contexts;
    for (int k = 0; k < n; k++) held[k] = api_context_take(m, 0);
    for (int k = 0; k < n; k++) {
        mr_replay_stats s;
        const mr_backend *be = &held[k]->be;
        if (!be->i->replay_stats || be->i->replay_stats(be->ctx, &s) != MR_OK) continue;
        *warm_seconds += s.warm_seconds;
        if (graphs_failed) *graphs_failed += s.failed;
    }
    for (int k = 0; k < n; k++) api_context_give_back(m, held[k], 0);
    return DETECT_OK;
}

size_t detect_model_device_memory(const detect_model *m, int context)
{
    return m && context >= 0 && context < m->contexts ? m->ctx[context].device_bytes : 0;
}
