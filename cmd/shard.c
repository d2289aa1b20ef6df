#include "shard.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int shard_parse(const char *text, shard_spec *out, cli_error *err)
{
    char *end;
    errno = 0;
    long k = strtol(text, &end, 10);
    long n = *end == '/' && end > text ? strtol(end + 1, &end, 10) : -1;
    if (errno || *end || text[strspn(text, "0123456789/")] || n < 1 || n > 1000000 || k < 0 || k >= n)
        return cli_fail(err, "--shard: expected K/N with 0 <= K < N (N up to 1000000), got \"%s\"", text);
    out->index = (int)k;
    out->count = (int)n;
    return 0;
}

uint64_t shard_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int shard_select(input_list *l, shard_spec spec, shard_plan *plan, cli_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan->spec = spec;
    plan->inputs = l->count;
    const char **sorted = malloc(sizeof *sorted * (size_t)(l->count ? l->count : 1));
    plan->position = malloc(sizeof *plan->position * (size_t)(l->count ? l->count : 1));
    if (!sorted || !plan->position) {
        free(sorted);
        return cli_fail(err, "out of memory");
    }
    for (int i = 0; i < l->count; i++) sorted[i] = l->items[i].path;
    qsort(sorted, (size_t)l->count, sizeof *sorted, cmp_str);
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; i < l->count; i++)
        for (const char *s = sorted[i];; s++) {
            h ^= (unsigned char)(*s ? *s : '\n');
            h *= 1099511628211ull;
            if (!*s) break;
        }
    free(sorted);
    plan->fingerprint = h;
    int kept = 0;
    for (int i = 0; i < l->count; i++) {
        input_item *in = &l->items[i];
        if (shard_hash(in->path) % (uint64_t)spec.count == (uint64_t)spec.index) {
            plan->position[kept] = i;
            l->items[kept++] = *in;
        } else {
            free(in->path);
            free(in->name);
        }
    }
    l->count = kept;
    return 0;
}

void shard_plan_free(shard_plan *plan)
{
    free(plan->position);
    plan->position = NULL;
}

/* The folder of a file path, resolved ("." when it has none); malloc'ed. */
static char *real_folder(const char *file)
{
    char *dir = strdup(file);
    if (!dir) return NULL;
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    char *real = realpath(d, NULL);
    free(dir);
    return real;
}

/* `to` as seen from the folder of `from` ("part-3_coco.json",
 * "../coco/part-3.json"); the absolute path when a folder cannot be
 * resolved. Both folders exist: their documents were opened there. */
static char *relative_path(const char *from, const char *to)
{
    char *a = real_folder(from), *b = real_folder(to);
    const char *base = strrchr(to, '/') ? strrchr(to, '/') + 1 : to;
    char *out = NULL;
    if (a && b) {
        size_t common = 0; /* length of the shared leading folders, at a '/' boundary */
        for (size_t i = 0;; i++) {
            int end_a = a[i] == '\0' || a[i] == '/', end_b = b[i] == '\0' || b[i] == '/';
            if (end_a && end_b) common = i;
            if (a[i] != b[i] || !a[i]) break;
        }
        int ups = 0;
        for (const char *p = a + common; *p; p++) ups += *p == '/';
        const char *down = b + common + (b[common] == '/');
        size_t n = 3 * (size_t)ups + strlen(down) + strlen(base) + 2;
        if ((out = malloc(n))) {
            out[0] = '\0';
            for (int i = 0; i < ups; i++) strcat(out, "../");
            if (*down) strcat(strcat(out, down), "/");
            strcat(out, base);
        }
    }
    free(a);
    free(b);
    return out;
}

char *shard_member_json(const shard_plan *plan, const input_list *l, const unsigned char *state,
                        const char *json_path, const char *coco_path)
{
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, plan->fingerprint);
    cJSON *o = cJSON_CreateObject(), *pos = cJSON_CreateArray(), *failed = cJSON_CreateArray();
    char *coco = coco_path ? relative_path(json_path, coco_path) : NULL;
    char *text = NULL;
    int ok = o && pos && failed && (!coco_path || coco);
    if (ok) {
        cJSON_AddNumberToObject(o, "index", plan->spec.index);
        cJSON_AddNumberToObject(o, "count", plan->spec.count);
        cJSON_AddNumberToObject(o, "inputs", plan->inputs);
        cJSON_AddStringToObject(o, "fingerprint", fp);
        cJSON_AddNumberToObject(o, "assigned", l->count);
        for (int i = 0; ok && i < l->count; i++) {
            if (state[i] == SHARD_DONE) {
                ok = cJSON_AddItemToArray(pos, cJSON_CreateNumber(plan->position[i]));
            } else if (state[i] == SHARD_FAILED) {
                cJSON *f = cJSON_CreateObject();
                ok = f && cJSON_AddNumberToObject(f, "position", plan->position[i]) &&
                     cJSON_AddStringToObject(f, "file", l->items[i].path) && cJSON_AddItemToArray(failed, f);
            }
        }
        ok = ok && cJSON_AddItemToObject(o, "positions", pos);
        pos = NULL;
        ok = ok && cJSON_AddItemToObject(o, "failed", failed);
        failed = NULL;
        ok = ok && (coco ? cJSON_AddStringToObject(o, "coco_results", coco) != NULL
                         : cJSON_AddNullToObject(o, "coco_results") != NULL);
    }
    if (ok) text = cJSON_PrintUnformatted(o);
    cJSON_Delete(pos);
    cJSON_Delete(failed);
    cJSON_Delete(o);
    free(coco);
    return text;
}
