/* The CUDA backend is a separate library, build/libdetect_cuda.so, loaded
 * on first use (engine/backend/backend_cuda_loader.c). A machine without a GPU
 * never loads it on its own (no driver, nothing to load it for), so this
 * test loads it on purpose: every symbol must resolve against cuDNN, cuBLAS
 * and the runtime, and its entry table must be this build's. Then the ways
 * loading can fail must come back as reasons, not crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#ifdef MR_HAVE_CUDA
#include "backend/backend_cuda_loader.h"
#include "backend/backend_registry.h"
#endif

static void test_library_loads(void **state)
{
    (void)state;
#ifdef MR_HAVE_CUDA
    char why[512] = "";
    int ok = backend_cuda_library_loads(why, sizeof why);
    printf("  libdetect_cuda.so: %s\n", ok ? "loads, entry table of this build" : why);
    assert_true(ok);
#else
    printf("SKIP cuda: this build has no CUDA backend (CUDA=0)\n");
    skip();
#endif
}

static void test_missing_library(void **state)
{
    (void)state;
#ifdef MR_HAVE_CUDA
    char why[512] = "";
    setenv("MR_CUDA_LIBRARY", "/nonexistent/libdetect_cuda.so", 1);
    int ok = backend_cuda_library_loads(why, sizeof why);
    unsetenv("MR_CUDA_LIBRARY");
    printf("  MR_CUDA_LIBRARY=/nonexistent/...: %s\n", why);
    assert_false(ok);
    assert_non_null(strstr(why, "/nonexistent/libdetect_cuda.so"));
#else
    skip();
#endif
}

/* The command's library as MR_CUDA_LIBRARY: it loads, but it is not a CUDA
 * backend (no entry table). */
static void test_wrong_library(void **state)
{
    (void)state;
#ifdef MR_HAVE_CUDA
    char why[512] = "";
    setenv("MR_CUDA_LIBRARY", "libm.so.6", 1);
    int ok = backend_cuda_library_loads(why, sizeof why);
    unsetenv("MR_CUDA_LIBRARY");
    printf("  MR_CUDA_LIBRARY=libm.so.6: %s\n", why);
    assert_false(ok);
    assert_non_null(strstr(why, "not a detect CUDA backend"));
#else
    skip();
#endif
}

/* No GPU here: a count of 0 with the reason; with one, a working backend. */
static void test_device_or_reason(void **state)
{
    (void)state;
#ifdef MR_HAVE_CUDA
    char why[512] = "";
    int n = backend_cuda_device_count(why, sizeof why);
    mr_backend be;
    mr_error err = {0};
    mr_backend_params p = {.precision = MR_PRECISION_FP32};
    mr_status st = backend_open("cuda", &p, &be, &err);
    printf("  devices: %d%s%s; create: %s\n", n, n ? "" : ", ", n ? "" : why, st == MR_OK ? "ok" : err.msg);
    if (n == 0) {
        assert_true(why[0] != '\0');
        assert_int_equal(st, MR_ERR_BACKEND);
        assert_non_null(strstr(err.msg, "no CUDA"));
    } else {
        assert_int_equal(st, MR_OK);
        be.i->destroy(be.ctx);
    }
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_loads),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_wrong_library),
        cmocka_unit_test(test_device_or_reason),
    };
    return cmocka_run_group_tests_name("cuda_library", tests, NULL, NULL);
}
