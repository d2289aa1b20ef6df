/* embed: detect as a library inside another program. Opens a model once,
 * then runs it on encoded image bytes, as a service receiving uploads would,
 * from several request threads sharing the one model, and prints the
 * detections as `detect --json` does. With --queue N it is a batch job
 * instead: one thread keeps N images in flight through a run queue, which
 * decodes the files on its workers and gives the results back in order.
 *
 *   cc embed.c $(pkg-config --cflags --libs detect) -lpthread -o embed
 *   ./embed CONFIG WEIGHTS [--threads N | --queue N] [--device D] IMAGE...
 *
 * Output: {"images": [one entry per image, in the order given]}. */
#include <detect.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    detect_model *model;
    char **paths;
    char **json; /* per image: its entry, or NULL after an error */
    int count, next;
    pthread_mutex_t lock;
} work;

static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    size_t cap = 0;
    *size = 0;
    for (;;) {
        if (*size == cap && !(data = realloc(data, cap = cap ? 2 * cap : 1 << 16))) break;
        size_t got = fread(data + *size, 1, cap - *size, f);
        *size += got;
        if (got == 0) break;
    }
    fclose(f);
    return data;
}

/* --queue: every image through a run queue from this thread, each result
 * collected in the order submitted; a file that fails is named and the
 * others go on. */
static void run_queued(work *w)
{
    detect_run_queue *q;
    if (detect_run_queue_start(&q, w->model, 0) != DETECT_OK) {
        fprintf(stderr, "embed: %s\n", detect_last_error());
        return;
    }
    int submitted = 0, collected = 0;
    while (collected < w->count) {
        if (submitted < w->count && detect_run_queue_pending(q) < detect_run_queue_depth(q)) {
            /* user: the image's index, given back by its collect */
            if (detect_run_queue_submit_file(q, w->paths[submitted], (void *)(intptr_t)submitted) == DETECT_OK)
                submitted++;
            else
                break;
            continue;
        }
        detect_result *r = NULL;
        void *user;
        detect_status st = detect_run_queue_collect(q, &r, &user);
        int i = (int)(intptr_t)user;
        collected++;
        if (st != DETECT_OK || detect_result_json(w->model, r, w->paths[i], &w->json[i]) != DETECT_OK)
            fprintf(stderr, "embed: %s\n", detect_last_error()); /* a submitted file's error names it */
        detect_result_free(r);
    }
    detect_run_queue_stop(q);
}

/* One request thread: takes the next image until none is left. */
static void *serve(void *arg)
{
    work *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->count) return NULL;
        size_t size;
        char *bytes = read_file(w->paths[i], &size);
        detect_result *r = NULL;
        if (!bytes) fprintf(stderr, "embed: %s: cannot read\n", w->paths[i]);
        else if (detect_run_encoded(w->model, bytes, size, &r) != DETECT_OK)
            fprintf(stderr, "embed: %s: %s\n", w->paths[i], detect_last_error());
        else if (detect_result_json(w->model, r, w->paths[i], &w->json[i]) != DETECT_OK)
            fprintf(stderr, "embed: %s: %s\n", w->paths[i], detect_last_error());
        detect_result_free(r);
        free(bytes);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: embed CONFIG WEIGHTS [--threads N | --queue N] [--device D] IMAGE...\n");
        return 2;
    }
    int threads = 1, queue = 0, first = 3;
    detect_options *opts;
    if (detect_options_create(&opts) != DETECT_OK) return 2;
    for (; first + 1 < argc && strncmp(argv[first], "--", 2) == 0; first += 2) {
        if (strcmp(argv[first], "--threads") == 0) threads = atoi(argv[first + 1]);
        else if (strcmp(argv[first], "--queue") == 0 &&
                 detect_options_set_in_flight(opts, queue = atoi(argv[first + 1])) != DETECT_OK) {
            fprintf(stderr, "embed: %s\n", detect_last_error());
            return 2;
        }
        else if (strcmp(argv[first], "--device") == 0 && detect_options_set_device(opts, argv[first + 1]) != DETECT_OK) {
            fprintf(stderr, "embed: %s\n", detect_last_error());
            return 2;
        }
    }
    work w = {.paths = argv + first, .count = argc - first};
    pthread_mutex_init(&w.lock, NULL);
    if (detect_model_open(&w.model, argv[1], argv[2], opts) != DETECT_OK) {
        fprintf(stderr, "embed: %s\n", detect_last_error());
        return 2;
    }
    detect_options_free(opts);
    w.json = calloc((size_t)w.count, sizeof *w.json);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!w.json || !tid || threads < 1) return 2;
    if (queue > 0) {
        run_queued(&w);
    } else {
        for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, serve, &w);
        for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    }

    int failed = 0, printed = 0;
    printf("{\"images\": [");
    for (int i = 0; i < w.count; i++) {
        failed += !w.json[i];
        if (w.json[i]) printf("%s\n  %s", printed++ ? "," : "", w.json[i]);
        detect_free(w.json[i]);
    }
    printf("\n]}\n");
    free(w.json);
    free(tid);
    detect_model_free(w.model);
    return failed ? 1 : 0;
}
