#include "inputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_DEPTH 64

static int push(input_list *l, const char *path, const char *rel, cli_error *err)
{
    if (l->count == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        input_item *p = realloc(l->items, sizeof *p * (size_t)cap);
        if (!p) return cli_fail(err, "out of memory listing inputs");
        l->items = p;
        l->cap = cap;
    }
    char *name = strdup(rel), *dot = strrchr(name ? name : "", '.'), *slash = strrchr(name ? name : "", '/');
    char *copy = strdup(path);
    if (!name || !copy) {
        free(name);
        free(copy);
        return cli_fail(err, "out of memory listing inputs");
    }
    if (dot && dot != name && (!slash || dot > slash + 1)) *dot = '\0';
    for (char *c = name; *c; c++)
        if (*c == '/') *c = '_';
    l->items[l->count].path = copy;
    l->items[l->count].name = name;
    l->count++;
    return 0;
}

int inputs_image_extension(const char *name)
{
    static const char *const exts[] = {"png", "jpg", "jpeg", "jpe", "jfif"};
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || strchr(dot, '/')) return 0;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot + 1, exts[i]) == 0) return 1;
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* `rel` is the path below the folder given on the command line. */
static int walk(input_list *l, const char *dir, const char *rel, int depth, cli_error *err)
{
    if (depth > MAX_DEPTH) return cli_fail(err, "%s: folders nested deeper than %d", dir, MAX_DEPTH);
    DIR *d = opendir(dir);
    if (!d) return cli_fail(err, "%s: cannot open folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    int st = 0;
    struct dirent *e;
    while (st == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue; /* ., .., and hidden files */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, sizeof *p * (size_t)cap);
            if (!p) st = cli_fail(err, "out of memory listing %s", dir);
            else names = p;
        }
        if (st == 0 && !(names[n++] = strdup(e->d_name))) st = cli_fail(err, "out of memory");
    }
    closedir(d);
    if (st == 0 && n > 1) qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n && st == 0; i++) {
        size_t plen = strlen(dir) + strlen(names[i]) + 2, rlen = strlen(rel) + strlen(names[i]) + 2;
        char *path = malloc(plen), *sub = malloc(rlen);
        if (!path || !sub) {
            st = cli_fail(err, "out of memory");
        } else {
            snprintf(path, plen, "%s/%s", dir, names[i]);
            snprintf(sub, rlen, "%s%s%s", rel, *rel ? "/" : "", names[i]);
            struct stat sb;
            if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) st = walk(l, path, sub, depth + 1, err);
            else if (!inputs_image_extension(names[i])) l->not_images++;
            else st = push(l, path, sub, err); /* unreadable or odd files fail later, by name */
        }
        free(path);
        free(sub);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

int inputs_add_path(input_list *l, const char *arg, cli_error *err)
{
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t len = strlen(arg);
        char *dir = strdup(arg);
        if (!dir) return cli_fail(err, "out of memory");
        while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
        int st = walk(l, dir, "", 0, err);
        free(dir);
        return st;
    }
    const char *base = strrchr(arg, '/');
    return push(l, arg, base ? base + 1 : arg, err);
}

int inputs_add_list(input_list *l, const char *list_path, cli_error *err)
{
    FILE *f = fopen(list_path, "r");
    if (!f) return cli_fail(err, "%s: cannot open list: %s", list_path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int st = 0;
    while (st == 0 && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0 || line[0] == '#') continue;
        st = inputs_add_path(l, line, err);
    }
    if (st == 0 && ferror(f)) st = cli_fail(err, "%s: read error", list_path);
    free(line);
    fclose(f);
    return st;
}

static int cmp_by_name(const void *a, const void *b, void *list)
{
    const input_list *l = list;
    int i = *(const int *)a, j = *(const int *)b;
    int c = strcmp(l->items[i].name, l->items[j].name);
    return c ? c : (i > j) - (i < j);
}

void inputs_unique_names(input_list *l)
{
    int *order = malloc(sizeof(int) * (size_t)(l->count ? l->count : 1));
    if (!order) return;
    /* Sort by (name, input index); within a run of equal names every one
     * but the first gets "-2", "-3", ...; repeat in case a new name clashes. */
    for (int changed = 1, round = 0; changed && round < 8; round++) {
        changed = 0;
        for (int i = 0; i < l->count; i++) order[i] = i;
        qsort_r(order, (size_t)l->count, sizeof *order, cmp_by_name, l);
        for (int a = 0, b; a < l->count; a = b) {
            const char *run = l->items[order[a]].name;
            for (b = a + 1; b < l->count && strcmp(l->items[order[b]].name, run) == 0; b++) continue;
            for (int r = a + 1; r < b; r++) {
                input_item *cur = &l->items[order[r]];
                size_t n = strlen(cur->name) + 16;
                char *renamed = malloc(n);
                if (!renamed) continue;
                snprintf(renamed, n, "%s-%d", cur->name, r - a + 1);
                free(cur->name);
                cur->name = renamed;
                changed = 1;
            }
        }
    }
    free(order);
}

void inputs_free(input_list *l)
{
    for (int i = 0; i < l->count; i++) {
        free(l->items[i].path);
        free(l->items[i].name);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}
