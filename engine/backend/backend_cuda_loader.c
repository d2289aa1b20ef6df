/* The CUDA backend's entry points in the engine (backend_cuda_loader.h,
 * and backend_cuda_open of backend_registry.h), which load
 * build/libdetect_cuda.so on first use. The library alone links cuDNN,
 * cuBLAS and the CUDA runtime, so a CPU-only run never maps them (about
 * 200 MB resident before any work, measured with `detect --help`).
 *
 * Where it is looked for: $MR_CUDA_LIBRARY alone when it is set; else
 * beside the object that holds this code (detect, libdetect.so, a test
 * binary), one directory up (build/tests/ -> build/), then the dynamic
 * linker's search path. Each call dlopens again (cheap once loaded: the
 * same copy comes back), so there is no global state here. */
#ifdef MR_HAVE_CUDA

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_cuda_entry.h"
#include "backend/backend_cuda_loader.h"

#define CUDA_LIBRARY "libdetect_cuda.so"

/* The table from the loaded library, or NULL with *why set. A library that
 * loads stays loaded for the process: closing it gave back no memory
 * (measured), and on a GPU machine the command's three calls (count, TF32,
 * create) would otherwise load cuDNN and cuBLAS three times. */
static const mr_cuda_entry *load_entry(char *why, size_t why_len)
{
    char dir[4096] = "", paths[2][4200], msg[4400];
    const char *env = getenv("MR_CUDA_LIBRARY");
    Dl_info info;
    if (dladdr((void *)load_entry, &info) && info.dli_fname) {
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
    }
    const char *tried[4];
    int n = 0;
    if (env && *env) tried[n++] = env;
    else if (dir[0]) {
        snprintf(paths[0], sizeof paths[0], "%s/%s", dir, CUDA_LIBRARY);
        snprintf(paths[1], sizeof paths[1], "%s/../%s", dir, CUDA_LIBRARY);
        tried[n++] = paths[0];
        tried[n++] = paths[1];
    }
    if (!(env && *env)) tried[n++] = CUDA_LIBRARY;
    const char *first_error = NULL;
    char first[512] = "";
    for (int i = 0; i < n; i++) {
        void *h = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            if (!first_error) {
                snprintf(first, sizeof first, "%s", dlerror());
                first_error = first;
            }
            continue;
        }
        const mr_cuda_entry *(*get)(void) = (const mr_cuda_entry *(*)(void))dlsym(h, "mr_cuda_backend_entry");
        const mr_cuda_entry *e = get ? get() : NULL;
        if (e && e->version == MR_CUDA_ENTRY_VERSION) return e;
        snprintf(msg, sizeof msg, "%s: %s", tried[i],
                 e ? "built for another version of detect" : "not a detect CUDA backend");
        if (why) snprintf(why, why_len, "%s", msg);
        dlclose(h);
        return NULL;
    }
    if (why) snprintf(why, why_len, "cannot load %s (%s)", CUDA_LIBRARY, first_error ? first_error : "not found");
    return NULL;
}

/* Whether the NVIDIA driver's library is installed: without it there is no
 * GPU to use, and loading the backend (and cuDNN, cuBLAS, the runtime) would
 * only cost memory: closing them again does not give it back (measured:
 * peak RSS 1.21 GB probed, 1.05 GB not, for the full-size image). */
static int driver_present(char *why, size_t why_len)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        if (why) snprintf(why, why_len, "no CUDA driver: %s", dlerror());
        return 0;
    }
    dlclose(h);
    return 1;
}

int backend_cuda_device_count(char *why, size_t why_len)
{
    if (!driver_present(why, why_len)) return 0;
    const mr_cuda_entry *e = load_entry(why, why_len);
    return e ? e->device_count(why, why_len) : 0;
}

int backend_cuda_has_tf32(int device)
{
    const mr_cuda_entry *e = driver_present(NULL, 0) ? load_entry(NULL, 0) : NULL;
    return e ? e->has_tf32(device) : 0;
}

mr_status backend_cuda_open(const mr_backend_params *p, mr_backend *out, mr_error *err)
{
    char why[512];
    if (!driver_present(why, sizeof why)) return mr_fail(err, MR_ERR_BACKEND, "no CUDA device: %s", why);
    const mr_cuda_entry *e = load_entry(why, sizeof why);
    if (!e) return mr_fail(err, MR_ERR_BACKEND, "no CUDA backend: %s", why);
    return e->create(p, out, err);
}

int backend_cuda_library_loads(char *why, size_t why_len)
{
    return load_entry(why, why_len) != NULL;
}

#else
/* A build without CUDA (CUDA=0) has no CUDA entry points. */
typedef int backend_cuda_loader_unused;
#endif
