/* Per-layer time of the 3x3 stride-1 convolutions of R-101-FPN at the
 * 800x1216 input: oneDNN direct (MR_CPU_WINOGRAD=0) against our Winograd
 * F(4x4,3x3) (MR_CPU_WINOGRAD=1), through the CPU backend on blocked
 * activations, alternating A and B, median of reps.
 *
 *   make && gcc -O2 -fopenmp -Iengine bench/bench_wino.c build/libdetect.a \
 *       -ldnnl -lcjson -lpng -ljpeg -lm -o build/bench_wino
 *   build/bench_wino [reps] [threads] [row] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"

typedef struct {
    const char *what;
    int n, h, w, c;
} shape;

static const shape g_shapes[] = {
    {"res2 3x3", 1, 200, 304, 64},   {"res3 3x3", 1, 100, 152, 128}, {"res4 3x3 (x23)", 1, 50, 76, 256},
    {"res5 3x3", 1, 25, 38, 512},    {"FPN/RPN P2", 1, 200, 304, 256}, {"FPN/RPN P3", 1, 100, 152, 256},
    {"FPN/RPN P4", 1, 50, 76, 256},  {"FPN/RPN P5", 1, 25, 38, 256},   {"RPN P6", 1, 13, 19, 256},
    {"mask head", 100, 14, 14, 256},
};

/* Process CPU time by default: the machine is shared, and CPU time counts
 * only what our threads ran (MR_BENCH_WALL=1: wall-clock time). */
static clockid_t g_clock = CLOCK_PROCESS_CPUTIME_ID;

static double now(void)
{
    struct timespec t;
    clock_gettime(g_clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5, threads = argc > 2 ? atoi(argv[2]) : 2;
    int only = argc > 3 ? atoi(argv[3]) : -1; /* one row of the table, by index */
    if (getenv("MR_BENCH_WALL")) g_clock = CLOCK_MONOTONIC;
    mr_backend be;
    mr_error err;
    if (backend_open("cpu", &(mr_backend_params){.threads = threads}, &be, &err) != MR_OK) return 1;
    printf("%-16s %-22s %10s %10s %8s %9s\n", "layer", "shape", "direct ms", "wino ms", "speedup", "dir GF/s");
    printf("(%s time; with 2 threads, CPU time is the sum over both)\n", g_clock == CLOCK_MONOTONIC ? "wall" : "CPU");
    for (size_t s = 0; s < sizeof g_shapes / sizeof g_shapes[0]; s++) {
        if (only >= 0 && (size_t)only != s) continue;
        const shape *sh = &g_shapes[s];
        int c = sh->c;
        size_t wc = (size_t)c * c * 9, xs = (size_t)sh->n * sh->h * sh->w * c;
        float *w = malloc(sizeof(float) * wc), *b = calloc(c, sizeof(float));
        for (size_t i = 0; i < wc; i++) w[i] = (float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
        mr_conv_params p = {c, c, 3, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0};
        mr_layer *l[2];
        setenv("MR_CPU_WINOGRAD", "0", 1);
        be.i->conv_init(be.ctx, "direct", &p, w, b, &l[0], &err);
        setenv("MR_CPU_WINOGRAD", "1", 1);
        be.i->conv_init(be.ctx, "wino", &p, w, b, &l[1], &err);
        void *dx, *dy;
        be.i->buffer_alloc(be.ctx, sizeof(float) * xs, &dx, &err);
        be.i->buffer_alloc(be.ctx, sizeof(float) * xs, &dy, &err);
        float *hx = malloc(sizeof(float) * xs);
        for (size_t i = 0; i < xs; i++) hx[i] = (float)((i * 40503u) % 997) * 1e-3f - 0.5f;
        be.i->copy_to_device(be.ctx, dx, hx, sizeof(float) * xs, &err);
        mr_tensor tx = mr_tensor_make(dx, sh->n, sh->h, sh->w, c), ty = mr_tensor_make(dy, sh->n, sh->h, sh->w, c);
        double t[2][64];
        for (int r = -1; r < reps && r < 64; r++)
            for (int k = 0; k < 2; k++) {
                double t0 = now();
                if (be.i->conv(be.ctx, l[k], &tx, &ty, 0, &err) != MR_OK) {
                    fprintf(stderr, "%s\n", err.msg);
                    return 1;
                }
                if (r >= 0) t[k][r] = now() - t0;
            }
        qsort(t[0], reps, sizeof(double), cmp);
        qsort(t[1], reps, sizeof(double), cmp);
        double md = t[0][reps / 2], mw = t[1][reps / 2];
        double gmac = (double)sh->n * sh->h * sh->w * c * c * 9 * 1e-9;
        char sd[32];
        snprintf(sd, sizeof sd, "%dx%dx%d %d->%d", sh->n, sh->h, sh->w, c, c);
        printf("%-16s %-22s %10.2f %10.2f %8.2f %9.0f\n", sh->what, sd, md * 1e3, mw * 1e3, md / mw, 2 * gmac / md);
        fflush(stdout);
        be.i->layer_free(be.ctx, l[0]);
        be.i->layer_free(be.ctx, l[1]);
        be.i->buffer_free(be.ctx, dx);
        be.i->buffer_free(be.ctx, dy);
        free(w), free(b), free(hx);
    }
    be.i->destroy(be.ctx);
    return 0;
}
