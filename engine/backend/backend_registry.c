#include "backend/backend_registry.h"

#include <stdio.h>
#include <string.h>

#ifdef MR_HAVE_CUDA
#include "backend/backend_cuda_loader.h"
#endif

static int cpu_available(char *why, size_t why_len)
{
    (void)why;
    (void)why_len;
    return 1;
}

#ifdef MR_HAVE_CUDA
static int cuda_available(char *why, size_t why_len)
{
    char reason[384] = "";
    if (backend_cuda_device_count(reason, sizeof reason) > 0) return 1;
    if (why) snprintf(why, why_len, "no CUDA device (%s)", reason);
    return 0;
}
#endif

typedef struct {
    const char *name;
    int (*available)(char *why, size_t why_len);
    mr_status (*open)(const mr_backend_params *p, mr_backend *out, mr_error *err);
} backend_entry;

static const backend_entry backends[] = {
    {"cpu", cpu_available, backend_cpu_open},
#ifdef MR_HAVE_CUDA
    {"cuda", cuda_available, backend_cuda_open},
#endif
};

static const backend_entry *find(const char *name)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (name && strcmp(backends[i].name, name) == 0) return &backends[i];
    return NULL;
}

/* Why `name` is not in the table: a backend this build left out, or a name
 * no build has. */
static void not_built(const char *name, char *why, size_t why_len)
{
    if (!why) return;
    if (name && strcmp(name, "cuda") == 0) snprintf(why, why_len, "this build has no CUDA backend");
    else snprintf(why, why_len, "no backend named \"%s\" (cpu, cuda)", name ? name : "(null)");
}

int backend_available(const char *name, char *why, size_t why_len)
{
    const backend_entry *b = find(name);
    if (!b) {
        not_built(name, why, why_len);
        return 0;
    }
    return b->available(why, why_len);
}

mr_status backend_open(const char *name, const mr_backend_params *p, mr_backend *out, mr_error *err)
{
    static const mr_backend_params defaults = {0};
    const backend_entry *b = find(name);
    if (!b) {
        char why[128];
        not_built(name, why, sizeof why);
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s", why);
    }
    return b->open(p ? p : &defaults, out, err);
}
