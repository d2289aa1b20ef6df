/* The chip's pace through oneDNN (issue 49: every stage's rate is read as a
 * fraction of these): large GEMMs and one R-101 convolution in fp32, bf16
 * and int8, as the engine's CPU backend calls them, with the kernel oneDNN
 * picks and the instruction set it runs at. Multiply-adds per second (one
 * multiply-add = 2 FLOPs or 2 int8 "ops").
 *   gcc -O2 -fopenmp bench/onednn_peak.c -ldnnl -o build/onednn_peak
 *   OMP_NUM_THREADS=2 build/onednn_peak
 *   ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI build/onednn_peak   # without AMX
 *   ONEDNN_MAX_CPU_ISA=AVX2 build/onednn_peak                # an AVX2-only CPU
 * A precision the capped ISA cannot run (bf16 below AVX512_CORE_BF16 falls to
 * a reference kernel) is reported with its kernel's name, so a slow line says
 * why. Best of 7 timed runs after 2 warm-ups. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                            \
    do {                                                                                       \
        dnnl_status_t s_ = (call);                                                             \
        if (s_ != dnnl_success) {                                                              \
            fprintf(stderr, "onednn_peak: %s failed (%d) at line %d\n", #call, (int)s_, __LINE__); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx512_core: return "AVX512_CORE";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX512_CORE_VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX512_CORE_BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AVX512_CORE_AMX";
    default: return "other";
    }
}

/* Memory for a primitive's argument `what`, as the primitive wants it. */
static dnnl_memory_t arg_memory(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, 0);
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE));
    void *p = NULL;
    CHECK(dnnl_memory_get_data_handle(m, &p));
    memset(p, 1, dnnl_memory_desc_get_size(md)); /* small finite values in every type */
    return m;
}

/* Best seconds of 7 runs of the primitive described by op_desc. */
static void run(const char *label, const void *op_desc, int is_conv, double macs)
{
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, op_desc, NULL, engine, NULL) != dnnl_success) {
        printf("%-34s  not available at this ISA\n", label);
        return;
    }
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    dnnl_primitive_t prim;
    CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_memory_t src = arg_memory(pd, dnnl_query_src_md), wei = arg_memory(pd, dnnl_query_weights_md),
                  dst = arg_memory(pd, dnnl_query_dst_md), pad = arg_memory(pd, dnnl_query_scratchpad_md);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst},
                               {DNNL_ARG_SCRATCHPAD, pad}};
    double best = 1e30;
    for (int i = 0; i < 9; i++) {
        double t0 = omp_get_wtime();
        CHECK(dnnl_primitive_execute(prim, stream, 4, args));
        CHECK(dnnl_stream_wait(stream));
        double t = omp_get_wtime() - t0;
        if (i >= 2 && t < best) best = t;
    }
    printf("%-34s  %8.3f ms  %7.3f T multiply-adds/s  (%s)\n", label, best * 1e3, macs / best / 1e12,
           impl ? impl : "?");
    (void)is_conv;
    dnnl_memory_destroy(src);
    dnnl_memory_destroy(wei);
    dnnl_memory_destroy(dst);
    dnnl_memory_destroy(pad);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
}

static void gemm(const char *label, dnnl_data_type_t a, dnnl_data_type_t b, dnnl_data_type_t c, int n)
{
    dnnl_dims_t sd = {n, n}, wd = {n, n}, dd = {n, n};
    dnnl_memory_desc_t s, w, d;
    CHECK(dnnl_memory_desc_init_by_tag(&s, 2, sd, a, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&w, 2, wd, b, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&d, 2, dd, c, dnnl_ab));
    dnnl_matmul_desc_t md;
    CHECK(dnnl_matmul_desc_init(&md, &s, &w, NULL, &d));
    run(label, &md, 0, (double)n * n * n);
}

/* A 3x3 stride-1 conv of cin -> cout channels on an h x w map, batch nb (the
 * RPN conv on P2: 256 -> 256 on 200x304; the box head's: 1000 RoIs of 7x7). */
static void conv(const char *label, dnnl_data_type_t a, dnnl_data_type_t b, dnnl_data_type_t c, int nb, int cin,
                 int cout, int h, int w)
{
    dnnl_dims_t sd = {nb, cin, h, w}, wd = {cout, cin, 3, 3}, dd = {nb, cout, h, w};
    dnnl_dims_t strides = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t s, wt, d;
    CHECK(dnnl_memory_desc_init_by_tag(&s, 4, sd, a, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wt, 4, wd, b, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&d, 4, dd, c, dnnl_format_tag_any));
    dnnl_convolution_desc_t cd;
    CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s, &wt, NULL, &d,
                                             strides, pad, pad));
    run(label, &cd, 1, (double)nb * cout * h * w * cin * 9);
}

int main(void)
{
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    printf("oneDNN %d.%d, ISA %s, %d threads\n", dnnl_version()->major, dnnl_version()->minor,
           isa_name(dnnl_get_effective_cpu_isa()), omp_get_max_threads());
    gemm("GEMM 4096^3 fp32", dnnl_f32, dnnl_f32, dnnl_f32, 4096);
    gemm("GEMM 4096^3 bf16 (f32 out)", dnnl_bf16, dnnl_bf16, dnnl_f32, 4096);
    gemm("GEMM 4096^3 int8 u8*s8 (s32 out)", dnnl_u8, dnnl_s8, dnnl_s32, 4096);
    conv("conv3x3 256 P2 200x304 fp32", dnnl_f32, dnnl_f32, dnnl_f32, 1, 256, 256, 200, 304);
    conv("conv3x3 256 P2 200x304 bf16", dnnl_bf16, dnnl_bf16, dnnl_bf16, 1, 256, 256, 200, 304);
    conv("conv3x3 256 P2 200x304 int8", dnnl_u8, dnnl_s8, dnnl_u8, 1, 256, 256, 200, 304);
    conv("conv3x3 256 1000 RoIs 7x7 fp32", dnnl_f32, dnnl_f32, dnnl_f32, 1000, 256, 256, 7, 7);
    conv("conv3x3 256 1000 RoIs 7x7 bf16", dnnl_bf16, dnnl_bf16, dnnl_bf16, 1000, 256, 256, 7, 7);
    conv("conv3x3 256 1000 RoIs 7x7 int8", dnnl_u8, dnnl_s8, dnnl_u8, 1000, 256, 256, 7, 7);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
