#include "inputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
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
    /* The formats image_load reads, and those it names as unsupported
     * (HEIC, AVIF, JPEG XL: their files fail with what to do, rather than
     * vanish into the count of files that are not images). */
    static const char *const exts[] = {"png", "jpg", "jpeg", "jpe", "jfif", "webp", "tif", "tiff",
                                       "bmp", "dib", "gif", "heic", "heif", "avif", "jxl"};
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || strchr(dot, '/')) return 0;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot + 1, exts[i]) == 0) return 1;
    return 0;
}

static int skip(input_list *l, const char *path, int special, cli_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Records a file or folder the walk passes over, with why. */
static int skip(input_list *l, const char *path, int special, cli_error *err, const char *fmt, ...)
{
    if (l->nskipped == l->skipped_cap) {
        int cap = l->skipped_cap ? 2 * l->skipped_cap : 16;
        input_skip *p = realloc(l->skipped, sizeof *p * (size_t)cap);
        if (!p) return cli_fail(err, "out of memory listing inputs");
        l->skipped = p;
        l->skipped_cap = cap;
    }
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    input_skip *k = &l->skipped[l->nskipped];
    k->path = strdup(path);
    k->reason = strdup(reason);
    k->special = special;
    if (!k->path || !k->reason) {
        free(k->path);
        free(k->reason);
        return cli_fail(err, "out of memory listing inputs");
    }
    l->nskipped++;
    if (special) l->special++;
    else l->not_images++;
    return 0;
}

/* Why stat() failed on a folder entry, in words. */
static const char *stat_failure(const char *path, int e)
{
    struct stat lb;
    if (e == ELOOP) return "a symbolic link loop";
    if (e == ENOENT && lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode)) return "a dangling symbolic link";
    return strerror(e);
}

static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : "not a plain file";
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The folders being walked or walked already, by (device, inode): a
 * symbolic link back to one of them would walk it again, or for ever. */
typedef struct {
    dev_t dev;
    ino_t ino;
    char *path; /* the path it was walked by */
} seen_dir;

typedef struct {
    seen_dir *dirs;
    int n, cap;
} walk_state;

/* `rel` is the path below the folder given on the command line. */
static int walk(input_list *l, walk_state *ws, const char *dir, const char *rel, int depth, cli_error *err);

/* One folder entry: a folder is walked, a regular file with an image
 * extension is an input, anything else is skipped with its reason. */
static int visit(input_list *l, walk_state *ws, const char *path, const char *sub, const char *name, int depth,
                 cli_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        return skip(l, path, 1, err, "%s", stat_failure(path, e));
    }
    if (S_ISDIR(sb.st_mode)) {
        for (int i = 0; i < ws->n; i++)
            if (ws->dirs[i].dev == sb.st_dev && ws->dirs[i].ino == sb.st_ino)
                return skip(l, path, 1, err, "the folder %s again (a symbolic link loop or a second link to it)",
                            ws->dirs[i].path);
        if (depth + 1 > MAX_DEPTH) return skip(l, path, 1, err, "folders nested deeper than %d", MAX_DEPTH);
        return walk(l, ws, path, sub, depth + 1, err);
    }
    if (!inputs_image_extension(name)) return skip(l, path, 0, err, "not an image (no image extension)");
    if (!S_ISREG(sb.st_mode)) return skip(l, path, 1, err, "not a regular file (%s)", kind_of(sb.st_mode));
    return push(l, path, sub, err); /* unreadable or odd files fail later, by name */
}

static int walk(input_list *l, walk_state *ws, const char *dir, const char *rel, int depth, cli_error *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (depth == 0) return cli_fail(err, "%s: cannot open folder: %s", dir, strerror(errno));
        return skip(l, dir, 1, err, "cannot open folder: %s", strerror(errno));
    }
    struct stat sb;
    char *seen_path = NULL;
    if (fstat(dirfd(d), &sb) == 0) {
        if (ws->n == ws->cap) {
            int cap = ws->cap ? 2 * ws->cap : 16;
            seen_dir *p = realloc(ws->dirs, sizeof *p * (size_t)cap);
            if (!p) {
                closedir(d);
                return cli_fail(err, "out of memory listing %s", dir);
            }
            ws->dirs = p;
            ws->cap = cap;
        }
        if (!(seen_path = strdup(dir))) {
            closedir(d);
            return cli_fail(err, "out of memory listing %s", dir);
        }
        ws->dirs[ws->n++] = (seen_dir){sb.st_dev, sb.st_ino, seen_path};
    }
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
            st = visit(l, ws, path, sub, names[i], depth, err);
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
        walk_state ws = {0};
        int st = walk(l, &ws, dir, "", 0, err);
        for (int i = 0; i < ws.n; i++) free(ws.dirs[i].path);
        free(ws.dirs);
        free(dir);
        return st;
    }
    /* Named on the command line or in a list: always tried, so a FIFO,
     * dangling link or missing file fails by name when it is opened. */
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

void inputs_report_skipped(const input_list *l, const char *prog, int verbose)
{
    for (int i = 0; i < l->nskipped; i++)
        if (l->skipped[i].special || verbose)
            fprintf(stderr, "%s: skipped %s: %s\n", prog, l->skipped[i].path, l->skipped[i].reason);
}

void inputs_free(input_list *l)
{
    for (int i = 0; i < l->nskipped; i++) {
        free(l->skipped[i].path);
        free(l->skipped[i].reason);
    }
    free(l->skipped);
    for (int i = 0; i < l->count; i++) {
        free(l->items[i].path);
        free(l->items[i].name);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}
