#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(progress *p, int total, int enabled)
{
    p->total = total;
    p->done = p->failed = p->skipped = p->not_images = p->special = 0;
    p->tty = isatty(STDERR_FILENO);
    p->enabled = enabled;
    p->start = now();
}

static void clear_bar(const progress *p)
{
    if (p->enabled && p->tty) fputs("\r\033[K", stderr);
}

static void draw_bar(const progress *p)
{
    double elapsed = now() - p->start, rate = elapsed > 0 ? p->done / elapsed : 0;
    double eta = rate > 0 ? (p->total - p->done) / rate : 0;
    int width = 30, filled = p->total ? width * p->done / p->total : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r\033[K[%s] %d/%d  %.2f img/s  ETA %d:%02d%s", bar, p->done, p->total, rate, (int)eta / 60,
            (int)eta % 60, p->failed ? "  (some failed)" : "");
    fflush(stderr);
}

void progress_step(progress *p, const char *file, int detections, double seconds, int ok)
{
    p->done++;
    if (!ok) p->failed++;
    if (detections < 0 && ok) p->skipped++;
    if (!p->enabled) return;
    if (p->tty) {
        draw_bar(p);
    } else if (ok) {
        if (detections < 0) fprintf(stderr, "detect: [%d/%d] %s: skipped (outputs exist)\n", p->done, p->total, file);
        else
            fprintf(stderr, "detect: [%d/%d] %s: %d detections in %.2f s\n", p->done, p->total, file, detections,
                    seconds);
    }
}

void progress_error(progress *p, const char *msg)
{
    clear_bar(p);
    fprintf(stderr, "detect: %s\n", msg);
    if (p->enabled && p->tty && p->done) draw_bar(p);
}

void progress_finish(progress *p)
{
    if (!p->enabled) return;
    clear_bar(p);
    double elapsed = now() - p->start;
    fprintf(stderr, "detect: %d images in %.1f s (%.2f img/s): %d done, %d skipped, %d failed", p->done, elapsed,
            elapsed > 0 ? p->done / elapsed : 0.0, p->done - p->failed - p->skipped, p->skipped, p->failed);
    if (p->not_images) fprintf(stderr, "; %d file%s skipped: not images", p->not_images, p->not_images > 1 ? "s" : "");
    if (p->special)
        fprintf(stderr, "; %d skipped: not regular files, broken links or folders met again (named above)", p->special);
    fputc('\n', stderr);
}
