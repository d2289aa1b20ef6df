#include "profile.h"

#include <stdlib.h>
#include <string.h>


static const char *const stage_names[PROF_STAGES] = {
    "decode", "preprocess", "backbone", "fpn", "rpn", "box_head", "mask_head", "mask_paste", "output",
};

void profile_set_model(profile_run *run, const detect_result *r)
{
    /* The model's stages are the library's, in its order, after decode. */
    for (int s = 0; s < DETECT_STAGE_COUNT; s++)
        run->stage[PROF_PREPROCESS + s] = detect_result_stage_seconds(r, (detect_stage)s);
}

int profile_add(profile_log *log, const char *file, const profile_run *run, cli_error *err)
{
    if (log->count == log->cap) {
        int cap = log->cap ? 2 * log->cap : 64;
        profile_run *r = realloc(log->runs, sizeof *r * (size_t)cap);
        if (r) log->runs = r;
        const char **f = r ? realloc(log->files, sizeof *f * (size_t)cap) : NULL;
        if (!f) return cli_fail(err, "out of memory recording the profile");
        log->files = f;
        log->cap = cap;
    }
    log->runs[log->count] = *run;
    log->files[log->count++] = file;
    return 0;
}

void profile_print_run(FILE *f, const char *file, const profile_run *run)
{
    fprintf(f, "profile %s:", file);
    for (int s = 0; s < PROF_STAGES; s++) fprintf(f, " %s %.4f", stage_names[s], run->stage[s]);
    fprintf(f, " total %.4f s\n", run->total);
}

double profile_steady_rate(const profile_log *log)
{
    int n = log->count;
    double span = n > 1 ? log->runs[n - 1].finished - log->runs[0].finished : 0;
    return span > 0 ? (n - 1) / span : 0.0;
}

typedef struct {
    double mean, median, p90, min, max;
} stats;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentiles by linear interpolation between order statistics (numpy's default). */
static double percentile(const double *sorted, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)pos;
    return lo + 1 < n ? sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]) : sorted[lo];
}

static stats compute(const profile_log *log, int stage, double *scratch)
{
    stats s = {0};
    int n = log->count;
    if (!n) return s;
    for (int i = 0; i < n; i++) {
        scratch[i] = stage < PROF_STAGES ? log->runs[i].stage[stage] : log->runs[i].total;
        s.mean += scratch[i] / n;
    }
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    s.median = percentile(scratch, n, 0.5);
    s.p90 = percentile(scratch, n, 0.9);
    s.min = scratch[0];
    s.max = scratch[n - 1];
    return s;
}

void profile_print_summary(FILE *f, const profile_log *log, double wall_seconds)
{
    double *scratch = malloc(sizeof(double) * (size_t)(log->count ? log->count : 1));
    if (!scratch || !log->count) {
        free(scratch);
        return;
    }
    fprintf(f, "\nprofile summary over %d runs (seconds)\n%-11s %9s %9s %9s %9s %9s\n", log->count, "stage", "mean",
            "median", "p90", "min", "max");
    double sum_of_means = 0;
    for (int s = 0; s <= PROF_STAGES; s++) {
        stats st = compute(log, s, scratch);
        if (s < PROF_STAGES) sum_of_means += st.mean;
        fprintf(f, "%-11s %9.4f %9.4f %9.4f %9.4f %9.4f\n", s < PROF_STAGES ? stage_names[s] : "total", st.mean,
                st.median, st.p90, st.min, st.max);
    }
    stats total = compute(log, PROF_STAGES, scratch);
    double steady = profile_steady_rate(log);
    if (steady > 0) fprintf(f, "%.2f images/s finished after the first (decoding overlapped)\n", steady);
    fprintf(f, "stages add up to %.1f%% of the measured total; %.2f images/s (%.2f including start-up, %.1f s wall)\n",
            100.0 * sum_of_means / (total.mean > 0 ? total.mean : 1), total.mean > 0 ? 1.0 / total.mean : 0.0,
            wall_seconds > 0 ? log->count / wall_seconds : 0.0, wall_seconds);
    free(scratch);
}

int profile_write_json(const profile_log *log, double wall_seconds, const char *path, cli_error *err)
{
    /* Built in memory, then written so that it appears whole or not at all. */
    char *text = NULL;
    size_t len = 0;
    FILE *af = open_memstream(&text, &len);
    double *scratch = malloc(sizeof(double) * (size_t)(log->count ? log->count : 1));
    if (!scratch || !af) {
        if (af) fclose(af);
        free(text);
        free(scratch);
        return cli_fail(err, "out of memory");
    }
    fprintf(af, "{\"runs\": [");
    for (int i = 0; i < log->count; i++) {
        fprintf(af, "%s\n  {\"file\": \"", i ? "," : "");
        for (const char *c = log->files[i]; *c; c++) {
            if (*c == '"' || *c == '\\') fprintf(af, "\\%c", *c);
            else if ((unsigned char)*c < 0x20) fprintf(af, "\\u%04x", (unsigned char)*c);
            else fputc(*c, af);
        }
        fprintf(af, "\"");
        for (int s = 0; s < PROF_STAGES; s++) fprintf(af, ", \"%s\": %.6f", stage_names[s], log->runs[i].stage[s]);
        fprintf(af, ", \"total\": %.6f, \"finished\": %.6f}", log->runs[i].total,
                           log->runs[i].finished);
    }
    fprintf(af, "\n], \"summary\": {");
    for (int s = 0; s <= PROF_STAGES; s++) {
        stats st = compute(log, s, scratch);
        fprintf(af, "%s\n  \"%s\": {\"mean\": %.6f, \"median\": %.6f, \"p90\": %.6f, \"min\": %.6f, "
                           "\"max\": %.6f}", s ? "," : "", s < PROF_STAGES ? stage_names[s] : "total", st.mean,
                           st.median, st.p90, st.min, st.max);
    }
    stats total = compute(log, PROF_STAGES, scratch);
    fprintf(af, "\n}, \"images_per_second\": %.4f, \"steady_images_per_second\": %.4f, "
                       "\"wall_seconds\": %.6f}\n", total.mean > 0 ? 1.0 / total.mean : 0.0,
                       profile_steady_rate(log), wall_seconds);
    free(scratch);
    int failed = fclose(af) != 0 || !text;
    int rc = failed ? cli_fail(err, "out of memory") : cli_api(err, detect_write_file(path, text, len));
    free(text);
    return rc;
}

void profile_free(profile_log *log)
{
    free(log->runs);
    free(log->files);
    memset(log, 0, sizeof *log);
}
