/* --profile: seconds per stage for every image run, and their summary
 * (mean, median, p90, min, max per stage; images per second). The stages
 * cover the whole time from opening the file to the outputs being written,
 * so they add up to each run's total. */
#ifndef DETECT_PROFILE_H
#define DETECT_PROFILE_H

#include <stdio.h>

#include "detect.h"
#include "cli_error.h"

enum {
    PROF_DECODE, PROF_PREPROCESS, PROF_BACKBONE, PROF_FPN, PROF_RPN, PROF_BOX, PROF_MASK, PROF_PASTE,
    PROF_OUTPUT, PROF_STAGES
};

typedef struct {
    double stage[PROF_STAGES];
    double total;    /* measured separately, end to end */
    double finished; /* when its outputs were done, seconds from the start of the command */
} profile_run;

typedef struct {
    profile_run *runs;
    const char **files; /* not owned */
    int count, cap;
} profile_log;

/* Fills the model's stages from a result's stage times. */
void profile_set_model(profile_run *run, const detect_result *r);
int profile_add(profile_log *log, const char *file, const profile_run *run, cli_error *err);
/* Runs finished per second between the first run's end and the last's:
 * the batch rate, in which decoding ahead overlaps the model (1/mean of
 * the totals does not see that). 0 for fewer than 2 runs. */
double profile_steady_rate(const profile_log *log);
void profile_print_run(FILE *f, const char *file, const profile_run *run);
void profile_print_summary(FILE *f, const profile_log *log, double wall_seconds);
int profile_write_json(const profile_log *log, double wall_seconds, const char *path, cli_error *err);
void profile_free(profile_log *log);

#endif
