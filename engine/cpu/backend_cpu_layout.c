/* Which CPU tensors hold the blocked layout instead of NHWC.
 *
 * oneDNN's convolutions run 1.2-3x faster on channel-blocked data
 * (nChw<B>c: [n][c/B][h][w][B], B = ctx->block: 8 for its AVX2 kernels,
 * 16 for its AVX-512 ones) than on NHWC, and a reorder into and out of
 * that layout around every convolution costs about as much as the gain. So
 * the CPU backend keeps a convolution's output blocked, in place (for
 * c % B == 0 both layouts have the same size), and the next convolution
 * reads it as it is: the backbone, the FPN's and the RPN's 3x3 convolutions
 * and the mask head's convolutions never leave the blocked layout. Every
 * other op (pooling, upsampling, RoIAlign, the detection ops, copies to the
 * host) reads NHWC: cpu_layout_nhwc turns any blocked bytes in the range it
 * reads back into NHWC first, in place, so the rest of the backend and the
 * model code only ever see NHWC.
 *
 * Under --precision int8 or bf16 a record may instead say that the memory
 * holds a conv's output in the reduced type of the convs that read it next
 * (u8/s8 quantized, one byte a value, or bf16; backend_cpu.h): those
 * readers take it as it is, and any other reader gets it back in fp32, in
 * place, like a blocked tensor.
 *
 * The records are (pointer, shape) pairs, kept in the context. They rely on
 * the model's memory contract (model.c's arena plan): an op's output is a
 * whole tensor, and whatever that memory held before is dead, so a write
 * simply forgets the records it overlaps. */
#include <string.h>

#include "cpu/backend_cpu.h"

static size_t rec_bytes(const cpu_blocked_rec *r)
{
    return sizeof(float) * (size_t)r->n * (size_t)r->h * (size_t)r->w * (size_t)r->c;
}

static int overlaps(const cpu_blocked_rec *r, const void *p, size_t bytes)
{
    const char *a = (const char *)r->data, *b = p;
    return bytes && a < b + bytes && b < a + rec_bytes(r);
}

static void rec_drop(cpu_ctx *c, int i)
{
    c->recs[i] = c->recs[--c->rec_count];
}

/* Rewrites the tensor at `data` (n,h,w,c), held as `from`, as `to` in place
 * (`to` no larger than the tensor's fp32 size): one oneDNN
 * reorder into the context's temporary buffer, times `scale` unless it is
 * NULL, then copied back. `what` names the step in errors. */
static mr_status reorder_in_place(cpu_ctx *c, void *data, int n, int h, int w, int ch, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to, const float *scale, const char *what, mr_error *err)
{
    size_t bytes = dnnl_memory_desc_get_size(to);
    if (!n || !h || !w || !ch) return MR_OK;
    MR_TRY(cpu_blocked_reserve(c, bytes, err));
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, dst = NULL;
    mr_status st = MR_OK;
    dnnl_exec_arg_t args[2];
    if (dnnl_primitive_attr_create(&attr) != dnnl_success ||
        (scale && dnnl_primitive_attr_set_output_scales(attr, 1, 0, scale) != dnnl_success) ||
        dnnl_reorder_primitive_desc_create(&pd, from, c->engine, to, c->engine, attr) != dnnl_success ||
        dnnl_primitive_create(&prim, pd) != dnnl_success ||
        dnnl_memory_create(&src, from, c->engine, data) != dnnl_success ||
        dnnl_memory_create(&dst, to, c->engine, c->blocked) != dnnl_success) {
        st = mr_fail(err, MR_ERR_BACKEND, "cpu backend: oneDNN %s of a [%d,%d,%d,%d] tensor failed", what, n, h, w,
                     ch);
        goto done;
    }
    args[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, src};
    args[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, dst};
    if (dnnl_primitive_execute(prim, c->stream, 2, args) != dnnl_success || dnnl_stream_wait(c->stream) != dnnl_success) {
        st = mr_fail(err, MR_ERR_BACKEND, "cpu backend: oneDNN %s failed", what);
        goto done;
    }
    /* Back into the tensor's own memory, in as many pieces as threads. */
    const size_t piece = 1 << 20;
    long pieces = (long)((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < pieces; i++) {
        size_t off = (size_t)i * piece, len = bytes - off < piece ? bytes - off : piece;
        memcpy((char *)data + off, (const char *)c->blocked + off, len);
    }
done:
    if (src) dnnl_memory_destroy(src);
    if (dst) dnnl_memory_destroy(dst);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* Reorders the tensor (data, n,h,w,c) between NHWC and blocked in place. */
static mr_status relayout(cpu_ctx *c, float *data, int n, int h, int w, int ch, int to_blocked, mr_error *err)
{
    dnnl_dims_t dims = {n, ch, h, w};
    dnnl_memory_desc_t nhwc, blk;
    if (dnnl_memory_desc_init_by_tag(&nhwc, 4, dims, dnnl_f32, dnnl_nhwc) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&blk, 4, dims, dnnl_f32, cpu_block_tag(c->block)) != dnnl_success)
        return mr_fail(err, MR_ERR_BACKEND, "cpu backend: oneDNN descriptors of a [%d,%d,%d,%d] tensor failed", n, h,
                       w, ch);
    return reorder_in_place(c, data, n, h, w, ch, to_blocked ? &nhwc : &blk, to_blocked ? &blk : &nhwc, NULL,
                            "layout reorder", err);
}

/* NHWC descriptors of an [n,h,w,c] tensor in fp32 and in `type`. */
static mr_status nhwc_pair(int n, int h, int w, int ch, dnnl_data_type_t type, dnnl_memory_desc_t *f,
                           dnnl_memory_desc_t *q, mr_error *err)
{
    dnnl_dims_t dims = {n, ch, h, w};
    if (dnnl_memory_desc_init_by_tag(f, 4, dims, dnnl_f32, dnnl_nhwc) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(q, 4, dims, type, dnnl_nhwc) != dnnl_success)
        return mr_fail(err, MR_ERR_BACKEND, "cpu backend: oneDNN descriptors of a [%d,%d,%d,%d] tensor failed", n, h,
                       w, ch);
    return MR_OK;
}

/* A reduced record's values (u8, s8 or bf16) back to fp32 NHWC in place. */
static mr_status widen(cpu_ctx *c, const cpu_blocked_rec *r, mr_error *err)
{
    dnnl_memory_desc_t f, q;
    MR_TRY(nhwc_pair(r->n, r->h, r->w, r->c, r->held, &f, &q, err));
    return reorder_in_place(c, r->data, r->n, r->h, r->w, r->c, &q, &f, r->held == dnnl_bf16 ? NULL : &r->step,
                            "conversion to fp32", err);
}

/* A record's memory back to fp32 NHWC. */
static mr_status expand(cpu_ctx *c, const cpu_blocked_rec *r, mr_error *err)
{
    return r->held != dnnl_data_type_undef ? widen(c, r, err) : relayout(c, r->data, r->n, r->h, r->w, r->c, 0, err);
}

mr_status cpu_layout_nhwc(cpu_ctx *c, const void *p, size_t bytes, mr_error *err)
{
    for (int i = 0; i < c->rec_count;) {
        cpu_blocked_rec *r = &c->recs[i];
        if (!overlaps(r, p, bytes)) {
            i++;
            continue;
        }
        MR_TRY(expand(c, r, err));
        rec_drop(c, i);
    }
    return MR_OK;
}

void cpu_layout_written(cpu_ctx *c, const void *p, size_t bytes)
{
    for (int i = 0; i < c->rec_count;) {
        if (overlaps(&c->recs[i], p, bytes)) rec_drop(c, i);
        else i++;
    }
}

void cpu_layout_freed(cpu_ctx *c, void *p)
{
    if (p) cpu_layout_written(c, p, cpu_zeroed_bytes(p));
}

/* Whether record r is of tensor t (its data and shape). */
static int rec_of(const cpu_blocked_rec *r, const mr_tensor *t)
{
    return r->data == t->data && r->n == t->n && r->h == t->h && r->w == t->w && r->c == t->c;
}

/* t's record held as `held` (dnnl_data_type_undef: blocked), or -1. */
static int find_kind(const cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t held)
{
    for (int i = 0; i < c->rec_count; i++)
        if (rec_of(&c->recs[i], t) && c->recs[i].held == held) return i;
    return -1;
}

static int find(const cpu_ctx *c, const mr_tensor *t)
{
    return find_kind(c, t, dnnl_data_type_undef);
}

int cpu_layout_held(const cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t *type, float *step)
{
    for (int i = 0; i < c->rec_count; i++) {
        const cpu_blocked_rec *r = &c->recs[i];
        if (rec_of(r, t) && r->held != dnnl_data_type_undef) {
            *type = r->held;
            *step = r->step;
            return 1;
        }
    }
    return 0;
}

int cpu_layout_is_reduced(const cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t type, float step)
{
    dnnl_data_type_t held;
    float held_step;
    return cpu_layout_held(c, t, &held, &held_step) && held == type && (type == dnnl_bf16 || held_step == step);
}

int cpu_layout_is_blocked(const cpu_ctx *c, const mr_tensor *t)
{
    return find(c, t) >= 0;
}

/* Adds a record; when the table is full, one (not `keep`'s) goes back to NHWC. */
static mr_status add(cpu_ctx *c, const mr_tensor *t, const mr_tensor *keep, mr_error *err)
{
    if (c->rec_count == CPU_BLOCKED_RECS) {
        int i = keep && c->recs[0].data == keep->data ? 1 : 0;
        MR_TRY(expand(c, &c->recs[i], err));
        rec_drop(c, i);
    }
    cpu_blocked_rec r = {t->data, t->n, t->h, t->w, t->c, dnnl_data_type_undef, 0.0f};
    c->recs[c->rec_count++] = r;
    return MR_OK;
}

mr_status cpu_layout_will_be_reduced(cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t type, float step,
                                     mr_error *err)
{
    cpu_layout_written(c, t->data, sizeof(float) * mr_tensor_numel(t));
    MR_TRY(add(c, t, NULL, err));
    cpu_blocked_rec *r = &c->recs[c->rec_count - 1];
    r->held = type;
    r->step = type == dnnl_bf16 ? 0.0f : step;
    return MR_OK;
}

mr_status cpu_layout_reduce(cpu_ctx *c, const mr_tensor *t, dnnl_data_type_t type, float step, mr_error *err)
{
    MR_TRY(cpu_read(c, t, err));
    dnnl_memory_desc_t f, q;
    MR_TRY(nhwc_pair(t->n, t->h, t->w, t->c, type, &f, &q, err));
    const float to_steps = type == dnnl_bf16 ? 1.0f : 1.0f / step;
    MR_TRY(reorder_in_place(c, t->data, t->n, t->h, t->w, t->c, &f, &q, type == dnnl_bf16 ? NULL : &to_steps,
                            "conversion", err));
    return cpu_layout_will_be_reduced(c, t, type, step, err);
}

mr_status cpu_layout_blocked(cpu_ctx *c, const mr_tensor *t, const mr_tensor *keep, mr_error *err)
{
    if (find(c, t) >= 0) return MR_OK;
    size_t bytes = sizeof(float) * mr_tensor_numel(t);
    MR_TRY(cpu_layout_nhwc(c, t->data, bytes, err)); /* e.g. the same memory seen with another shape */
    MR_TRY(relayout(c, t->data, t->n, t->h, t->w, t->c, 1, err));
    return add(c, t, keep, err);
}

mr_status cpu_layout_will_be_blocked(cpu_ctx *c, const mr_tensor *t, const mr_tensor *keep, mr_error *err)
{
    if (find(c, t) >= 0) return MR_OK;
    cpu_layout_written(c, t->data, sizeof(float) * mr_tensor_numel(t));
    return add(c, t, keep, err);
}

mr_status cpu_layout_channelwise(cpu_ctx *c, const mr_tensor *x, const mr_tensor *y, mr_tensor *xv, mr_tensor *yv,
                                 mr_error *err)
{
    *xv = *x;
    *yv = *y;
    if (x->c % c->block || x->c != y->c || find(c, x) < 0) {
        MR_TRY(cpu_read(c, x, err));
        cpu_wrote(c, y);
        return MR_OK;
    }
    /* [n][c/B][h][w][B] is NHWC of n*c/B images of B channels. */
    MR_TRY(cpu_layout_will_be_blocked(c, y, x, err));
    xv->n = x->n * (x->c / c->block);
    yv->n = y->n * (y->c / c->block);
    xv->c = yv->c = c->block;
    return MR_OK;
}
