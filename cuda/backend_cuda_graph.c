/* CUDA graphs for the stages whose shapes repeat (backend.h, replayable):
 * the backbone, the FPN and the RPN head are ~170 launches per image (cuDNN
 * calls, the residual passes, the RPN's GEMMs), most of them small at batch
 * 1, so issuing them one by one costs more than some of them run. Per
 * (stage, padded input size):
 *
 *   first time   fn runs op by op (cuDNN chooses and caches its algorithms,
 *                any refusal falls back, as without graphs);
 *   second time  fn runs under stream capture; the graph is instantiated and
 *                launched. If capture or instantiation fails (an op that
 *                cannot be captured), nothing of it ran: fn runs op by op
 *                again, and the next call tries again, up to
 *                CUDA_GRAPH_TRIES failures, then op by op for good;
 *   afterwards   fn runs with graph_mode = REPLAYING, in which conv,
 *                group_norm, max_pool and upsample_nearest only return (fn
 *                still sets the model's tensor shapes), then the graph is
 *                launched.
 *
 * A graph holds the device pointers it was captured with: the model's
 * arena, the weights, the cuDNN workspace. They are fixed after plan; plan
 * and buffer_free drop every graph (a second model on the context gets its
 * own). Off with MR_CUDA_GRAPHS=0 and under MR_CUDA_SYNC=1 (a sync after
 * each launch cannot be captured), and before plan (the op tests).
 *
 * With counts on the device (backend.h) the model hands the whole pass, from
 * the image's upload to the pasted masks, over as one unit, "forward", keyed
 * by the padded input size: one graph per padded size, in which the RPN's
 * ranking and NMS, both RoIAligns, the box head's GEMMs and NMS, the mask
 * head and the paste run with the counts they read on the device, and the
 * ops read what differs between images of that size (their own sizes: the
 * preprocessing's job, the clip windows, the final boxes' ratios) from the
 * per-image parameters (cuda_internal.h), copied over by copy nodes of the
 * graph from the pinned block the ops fill at each call. The feature-map
 * stages' units nest inside it: a call made while a unit is captured or
 * replayed just runs fn (captured with the outer unit, or only setting
 * shapes), so when "forward" runs op by op (its first image, a capture
 * given up) they still replay their own graphs. A capture that fails
 * (something in it synchronised, allocated or copied pageable memory) is
 * retried; tests/emu's whole-pass test fails on one. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "core/clock.h"

/* Per context: four slots per padded size (the pass and its three stages).
 * bench/make_photo_folder.py's 2,000 COCO-sized photos have 51 padded
 * sizes: 256 slots keep them all warm. A size met once holds no graph, and
 * such slots go first (slot_for). */
#define CUDA_GRAPH_SLOTS 256

/* A capture can fail for one image and not the next (an image larger than
 * preprocess's staging cannot be captured, but replays): a slot tries this
 * many captures before it stays op by op. */
#define CUDA_GRAPH_TRIES 3

typedef struct {
    char name[32];
    uint64_t key;
    int runs;   /* times fn ran for this slot before it had a graph */
    int failed; /* captures that failed; at CUDA_GRAPH_TRIES, op by op from now on */
    cudaGraphExec_t exec;
    unsigned long long used; /* for evicting the least recently used */
} graph_slot;

struct cuda_graphs {
    graph_slot slot[CUDA_GRAPH_SLOTS];
    unsigned long long clock;
    mr_replay_stats stats; /* cuda_replay_stats: of the outermost units only */
    int warming;           /* units inside a pass that is warming up (nested units run in it) */
};

static void slot_clear(graph_slot *s)
{
    if (s->exec) cudaGraphExecDestroy(s->exec);
    memset(s, 0, sizeof *s);
}

void cuda_graphs_drop(cuda_ctx *c)
{
    if (!c->graphs) return;
    if (c->stream) cudaStreamSynchronize(c->stream); /* a launched graph may still run */
    for (int i = 0; i < CUDA_GRAPH_SLOTS; i++) slot_clear(&c->graphs->slot[i]);
}

void cuda_graphs_free(cuda_ctx *c)
{
    cuda_graphs_drop(c);
    free(c->graphs);
    c->graphs = NULL;
}

/* The slot of (name, key), or another one emptied: the least recently
 * used of those without a graph (a size met once), else of all. */
static graph_slot *slot_for(struct cuda_graphs *g, const char *name, uint64_t key)
{
    graph_slot *lru = NULL, *lru_graphless = NULL;
    for (int i = 0; i < CUDA_GRAPH_SLOTS; i++) {
        graph_slot *s = &g->slot[i];
        if (s->used && s->key == key && strncmp(s->name, name, sizeof s->name) == 0) return s;
        if (!lru || s->used < lru->used) lru = s;
        if (!s->exec && (!lru_graphless || s->used < lru_graphless->used)) lru_graphless = s;
    }
    if (lru_graphless) lru = lru_graphless;
    slot_clear(lru);
    strncpy(lru->name, name, sizeof lru->name - 1);
    lru->key = key;
    return lru;
}

/* fn under stream capture into s->exec. Returns 0 when the graph is ready;
 * otherwise nothing fn issued has run and the failure is counted. */
static int capture(cuda_ctx *c, graph_slot *s, mr_status (*fn)(void *, mr_error *), void *arg)
{
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        s->failed = CUDA_GRAPH_TRIES; /* capture itself is refused: never again */
        return -1;
    }
    mr_error ignored = {0};
    c->graph_mode = CUDA_GRAPH_CAPTURING;
    mr_status st = fn(arg, &ignored);
    c->graph_mode = CUDA_GRAPH_EAGER;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    if (st == MR_OK && e == cudaSuccess && graph) e = cudaGraphInstantiateWithFlags(&s->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (st == MR_OK && e == cudaSuccess && s->exec) return 0;
    cudaGetLastError(); /* the capture's error is not the run's */
    if (s->exec) cudaGraphExecDestroy(s->exec);
    s->exec = NULL;
    s->failed++;
    return -1;
}

static mr_status launch(cuda_ctx *c, graph_slot *s, mr_error *err)
{
    cudaError_t e = cudaGraphLaunch(s->exec, c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, s->name, "graph launch", e);
}

mr_status cuda_replayable(void *vctx, const char *name, uint64_t key, mr_status (*fn)(void *arg, mr_error *err),
                          void *arg, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (c->graph_mode != CUDA_GRAPH_EAGER) return fn(arg, err); /* nested: the outer unit records it */
    MR_TRY(cuda_use_device(c, name, err));
    if (!c->use_graphs || c->sync_each || !c->planned) return fn(arg, err);
    if (!c->graphs) {
        c->graphs = calloc(1, sizeof *c->graphs);
        if (!c->graphs) return fn(arg, err); /* graphs are an optimisation: go without */
    }
    graph_slot *s = slot_for(c->graphs, name, key);
    s->used = ++c->graphs->clock;
    if (s->exec) {
        c->graph_mode = CUDA_GRAPH_REPLAYING;
        mr_status st = fn(arg, err);
        c->graph_mode = CUDA_GRAPH_EAGER;
        return st == MR_OK ? launch(c, s, err) : st;
    }
    /* Warming up: the host time of the op-by-op passes and the captures
     * before a graph replays (what a new input size costs, issue 36). */
    if (s->failed >= CUDA_GRAPH_TRIES) return fn(arg, err); /* op by op for good: not warming */
    struct cuda_graphs *g = c->graphs;
    const int outer = g->warming++ == 0;
    double t0 = mr_seconds();
    int met = s->runs == 0 && s->failed == 0, recorded = 0, failed = 0, given_up = 0;
    mr_status st;
    if (s->runs++ == 0) {
        st = fn(arg, err);
    } else if (capture(c, s, fn, arg) != 0) {
        failed = 1;
        given_up = s->failed >= CUDA_GRAPH_TRIES;
        st = fn(arg, err);
    } else {
        recorded = 1;
        st = launch(c, s, err);
    }
    g->warming--;
    if (outer) {
        g->stats.units_met += met;
        g->stats.recorded += recorded;
        g->stats.failed += failed;
        g->stats.given_up += given_up;
        g->stats.warm_seconds += mr_seconds() - t0;
    }
    return st;
}

mr_status cuda_replay_stats(void *vctx, mr_replay_stats *out)
{
    cuda_ctx *c = vctx;
    memset(out, 0, sizeof *out);
    if (c->graphs) *out = c->graphs->stats;
    return MR_OK;
}

mr_status cuda_graph_forbid(const cuda_ctx *c, const char *op, mr_error *err)
{
    if (c->graph_mode == CUDA_GRAPH_EAGER) return MR_OK;
    return mr_fail(err, MR_ERR_INTERNAL, "%s: called inside a replayable stage (backend.h: only conv, group_norm, "
                   "max_pool and upsample_nearest may be)", op);
}

mr_status cuda_graph_op(const cuda_ctx *c, const char *op, int *replaying, mr_error *err)
{
    *replaying = c->graph_mode == CUDA_GRAPH_REPLAYING;
    if (c->graph_mode == CUDA_GRAPH_EAGER || c->device_counts) return MR_OK;
    return mr_fail(err, MR_ERR_INTERNAL, "%s: called inside a replayable stage with counts on the host (backend.h: "
                   "only conv, group_norm, max_pool and upsample_nearest may be)", op);
}

mr_status cuda_image_params_writable(cuda_ctx *c, cuda_image_part part, const char *op, mr_error *err)
{
    if (c->graph_mode != CUDA_GRAPH_EAGER || !c->image_copy_pending[part]) return MR_OK;
    cudaError_t e = cudaEventSynchronize(c->image_copied[part]);
    if (e != cudaSuccess) return cuda_fail(err, op, "waiting for the last parameter copy", e);
    c->image_copy_pending[part] = 0;
    return MR_OK;
}

mr_status cuda_image_params_upload(cuda_ctx *c, cuda_image_part part, const void *field, size_t bytes,
                                   const void **dev, const char *op, mr_error *err)
{
    size_t off = (size_t)((const char *)field - (const char *)c->h_image);
    *dev = (const char *)c->d_image + off;
    if (c->graph_mode == CUDA_GRAPH_REPLAYING) return MR_OK;
    cudaError_t e = cudaMemcpyAsync((char *)c->d_image + off, field, bytes, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess && c->graph_mode == CUDA_GRAPH_EAGER) {
        e = cudaEventRecord(c->image_copied[part], c->stream);
        c->image_copy_pending[part] = e == cudaSuccess;
    }
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "copy the image's parameters", e);
}
