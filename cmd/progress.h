/* Progress on stderr: on a terminal, one bar redrawn in place (done/total,
 * images/s, ETA); elsewhere, one plain line per image. Error lines are
 * printed through progress_error so they never mix with the bar. */
#ifndef DETECT_PROGRESS_H
#define DETECT_PROGRESS_H

typedef struct {
    int total, done, failed, skipped;
    int not_images; /* files in folders skipped by their extension (inputs.h), for the summary */
    int special;    /* folder entries skipped as not regular files, broken links or folders again (inputs.h) */
    int tty, enabled;
    double start;
} progress;

void progress_init(progress *p, int total, int enabled);
void progress_step(progress *p, const char *file, int detections, double seconds, int ok);
void progress_error(progress *p, const char *msg);
void progress_finish(progress *p);

#endif
