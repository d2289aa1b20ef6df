#include "merge.h"
#include "options.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "detect.h"
#include "shard.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: detect merge [--json FILE] [--coco-results FILE] [--check] SHARD.json...\n"
            "Joins the --json documents of the N parts of one `detect --shard K/N` run (one per K = 0..N-1,\n"
            "in any order) into the document a single run over all the inputs gives: the same entries, in\n"
            "the same order. Each part's document records its part (\"shard\": index, count, the whole\n"
            "input set's size and fingerprint, what it did), so merge first checks that no part is missing,\n"
            "given twice, incomplete (an interrupted run) or of another input set, and that no image is in\n"
            "two documents; each problem is one line naming the file, and then nothing is written.\n\n"
            "  --json FILE          the merged document ({\"images\": [...]}, as detect --json)\n"
            "  --coco-results FILE  the merged COCO results, joined from each part's own --coco-results file\n"
            "                       (where its document says: shard.coco_results, from the document's folder);\n"
            "                       COCO image ids are the single run's\n"
            "  --check              only check the parts (needs neither output)\n"
            "  -q, --quiet          no summary line\n"
            "  -h, --help           this text\n\n"
            "Outputs are written under a temporary name and renamed: complete or absent.\n"
            "Example: detect merge --json all.json --coco-results all_coco.json out/part-*.json\n\n"
            "Exit status: 0 merged, 1 merged but some images failed in their parts (each named on stderr;\n"
            "not in the outputs, as in a single run), 2 a usage error or a check failed (nothing written).\n");
}

typedef struct {
    const char *p;
    size_t n;
} span;

typedef struct {
    const char *path;             /* as given */
    char *data;                   /* the file, mapped */
    size_t size;
    int ok;                       /* read and parsed */
    int index, count, inputs, assigned;
    char fingerprint[32];
    span *entries;                /* "images" elements, raw text */
    int nentries;
    int *positions, *dets;        /* per entry: index among all inputs, detections */
    cJSON *failed;                /* shard.failed */
    char *coco_rel;               /* shard.coco_results, or NULL */
    char *coco_path, *coco_data;  /* its COCO results, resolved and mapped */
    size_t coco_size;
    span *coco;                   /* its elements */
    int ncoco, *coco_first;       /* per entry: its first element */
} part;

static int errors;

__attribute__((format(printf, 1, 2))) static void problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "detect merge: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    errors++;
}

/* ---- A skimmer for the documents' raw text --------------------------------
 * Entries are copied byte for byte (cJSON would print the numbers anew), so
 * the merged document is the single run's; cJSON reads what merge checks. */

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static const char *skip_string(const char *p, const char *e)
{
    for (p++; p < e; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return NULL;
}

/* The end of the value at p (a string, an object or array with everything
 * inside, or a scalar), or NULL when the text ends first. */
static const char *skip_value(const char *p, const char *e)
{
    if (p >= e) return NULL;
    if (*p == '"') return skip_string(p, e);
    if (*p != '{' && *p != '[') {
        while (p < e && !strchr(",]} \n\r\t", *p)) p++;
        return p;
    }
    int depth = 0;
    while (p < e) {
        if (*p == '"') {
            if (!(p = skip_string(p, e))) return NULL;
            continue;
        }
        if (*p == '{' || *p == '[') depth++;
        else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
        p++;
    }
    return NULL;
}

/* The elements of the array at [p, e): spans into the text. -1: malformed. */
static int array_elements(const char *p, const char *e, span **out, int *n)
{
    int cap = 0;
    *out = NULL;
    *n = 0;
    if (p >= e || *p != '[') return -1;
    p = skip_ws(p + 1, e);
    if (p < e && *p == ']') return 0;
    for (;;) {
        const char *end = skip_value(p, e);
        if (!end) return -1;
        if (*n == cap) {
            cap = cap ? 2 * cap : 1024;
            span *s = realloc(*out, sizeof *s * (size_t)cap);
            if (!s) return -1;
            *out = s;
        }
        (*out)[(*n)++] = (span){p, (size_t)(end - p)};
        p = skip_ws(end, e);
        if (p < e && *p == ']') return 0;
        if (p >= e || *p != ',') return -1;
        p = skip_ws(p + 1, e);
    }
}

static int map_file(const char *path, char **data, size_t *size)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return -1;
    *data = m;
    *size = (size_t)sb.st_size;
    return 0;
}

static int get_int(const cJSON *o, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble) return 0;
    *out = (int)v->valuedouble;
    return 1;
}

static int read_shard_record(part *pt, const span *s)
{
    cJSON *o = cJSON_ParseWithLength(s->p, s->n);
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
    const cJSON *pos = cJSON_GetObjectItemCaseSensitive(o, "positions");
    const cJSON *coco = cJSON_GetObjectItemCaseSensitive(o, "coco_results");
    pt->failed = cJSON_DetachItemFromObjectCaseSensitive(o, "failed");
    int ok = cJSON_IsObject(o) && get_int(o, "index", &pt->index) && get_int(o, "count", &pt->count) &&
             get_int(o, "inputs", &pt->inputs) && get_int(o, "assigned", &pt->assigned) && cJSON_IsString(fp) &&
             strlen(fp->valuestring) < sizeof pt->fingerprint && cJSON_IsArray(pos) && cJSON_IsArray(pt->failed) &&
             (cJSON_IsNull(coco) || cJSON_IsString(coco) || !coco) && pt->count >= 1 && pt->index >= 0 &&
             pt->index < pt->count;
    if (ok) {
        strcpy(pt->fingerprint, fp->valuestring);
        int n = cJSON_GetArraySize(pos), i = 0;
        pt->positions = malloc(sizeof(int) * (size_t)(n + 1));
        ok = pt->positions && n == pt->nentries;
        for (const cJSON *v = pos->child; ok && v; v = v->next, i++) {
            ok = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < pt->inputs;
            if (ok) pt->positions[i] = (int)v->valuedouble;
        }
        if (ok && cJSON_IsString(coco) && !(pt->coco_rel = strdup(coco->valuestring))) ok = 0;
    }
    cJSON_Delete(o);
    if (!ok)
        problem("%s: its \"shard\" record is damaged (index, count, inputs, fingerprint, assigned, "
                "a position per image, failed)", pt->path);
    return ok;
}

/* Maps and skims one part's document; a problem is reported and ok left 0. */
static void read_part(part *pt)
{
    if (map_file(pt->path, &pt->data, &pt->size) != 0) {
        problem("%s: cannot read it (missing, empty or not a file)", pt->path);
        return;
    }
    const char *p = skip_ws(pt->data, pt->data + pt->size), *e = pt->data + pt->size;
    span images = {0}, shard = {0};
    if (p < e && *p == '[') {
        problem("%s: a COCO results array, not a detect --json document (give merge the parts' --json files)",
                pt->path);
        return;
    }
    int bad = p >= e || *p != '{';
    for (p = bad ? e : skip_ws(p + 1, e); !bad && p < e && *p != '}';) {
        const char *k = p, *ke = *p == '"' ? skip_string(p, e) : NULL;
        const char *v = ke ? skip_ws(ke, e) : NULL;
        if (!v || v >= e || *v != ':') {
            bad = 1;
            break;
        }
        v = skip_ws(v + 1, e);
        const char *ve = skip_value(v, e);
        if (!ve) {
            bad = 1;
            break;
        }
        if (ke - k == 8 && memcmp(k, "\"images\"", 8) == 0) images = (span){v, (size_t)(ve - v)};
        if (ke - k == 7 && memcmp(k, "\"shard\"", 7) == 0) shard = (span){v, (size_t)(ve - v)};
        p = skip_ws(ve, e);
        if (p < e && *p == ',') p = skip_ws(p + 1, e);
        else if (p >= e || *p != '}') bad = 1;
    }
    if (bad || !images.p || array_elements(images.p, images.p + images.n, &pt->entries, &pt->nentries) != 0) {
        problem("%s: not a detect --json document (no \"images\" array, or not JSON)", pt->path);
        return;
    }
    if (!shard.p) {
        problem("%s: no \"shard\" record: not written by detect --shard K/N --json", pt->path);
        return;
    }
    pt->dets = malloc(sizeof(int) * (size_t)(pt->nentries + 1));
    if (!pt->dets || !read_shard_record(pt, &shard)) return;
    pt->ok = 1;
}

/* Each entry's "file" and detections; every file once over all parts. */
typedef struct {
    const char *file; /* into a cJSON string kept in `owned` */
    int part;
} seen;

static uint64_t hash_str(const char *s) { return shard_hash(s); }

static void check_images(part *parts, int nparts, int total)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)total + 16) cap *= 2;
    seen *table = calloc(cap, sizeof *table);
    cJSON **owned = calloc((size_t)total + 1, sizeof *owned);
    int nowned = 0;
    if (!table || !owned) {
        problem("out of memory");
        goto done;
    }
    for (int k = 0; k < nparts; k++) {
        part *pt = &parts[k];
        if (!pt->ok) continue; /* unreadable, or left out by check_parts */
        int nfiles = pt->nentries + cJSON_GetArraySize(pt->failed);
        for (int i = 0; i < nfiles && nowned <= total; i++) {
            cJSON *o;
            const cJSON *f;
            if (i < pt->nentries) {
                o = cJSON_ParseWithLength(pt->entries[i].p, pt->entries[i].n);
                f = cJSON_GetObjectItemCaseSensitive(o, "file");
                const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "detections");
                if (!cJSON_IsString(f) || !cJSON_IsArray(d)) {
                    problem("%s: images[%d] is not an entry of detect --json", pt->path, i);
                    cJSON_Delete(o);
                    continue;
                }
                pt->dets[i] = cJSON_GetArraySize(d);
            } else {
                o = cJSON_Duplicate(cJSON_GetArrayItem(pt->failed, i - pt->nentries), 1);
                f = cJSON_GetObjectItemCaseSensitive(o, "file");
                if (!cJSON_IsString(f)) {
                    problem("%s: its \"shard\" record is damaged (a failed image without \"file\")", pt->path);
                    cJSON_Delete(o);
                    continue;
                }
            }
            owned[nowned++] = o;
            size_t h = (size_t)hash_str(f->valuestring) & (cap - 1);
            while (table[h].file && strcmp(table[h].file, f->valuestring) != 0) h = (h + 1) & (cap - 1);
            if (table[h].file)
                problem("%s: %s is also in %s: an image in two parts", pt->path, f->valuestring,
                        parts[table[h].part].path);
            else table[h] = (seen){f->valuestring, k};
        }
    }
done:
    for (int i = 0; i < nowned; i++) cJSON_Delete(owned[i]);
    free(owned);
    free(table);
}

/* The part's COCO results file: shard.coco_results, from the document's folder. */
static void read_coco(part *pt)
{
    if (!pt->coco_rel) {
        problem("%s: written without --coco-results: no COCO results of this part to merge", pt->path);
        return;
    }
    const char *slash = strrchr(pt->path, '/');
    int dirlen = pt->coco_rel[0] == '/' || !slash ? 0 : (int)(slash - pt->path) + 1;
    size_t n = (size_t)dirlen + strlen(pt->coco_rel) + 1;
    if (!(pt->coco_path = malloc(n))) {
        problem("out of memory");
        return;
    }
    snprintf(pt->coco_path, n, "%.*s%s", dirlen, pt->path, pt->coco_rel);
    if (map_file(pt->coco_path, &pt->coco_data, &pt->coco_size) != 0) {
        problem("%s: its COCO results %s cannot be read (missing, empty or not a file)", pt->path, pt->coco_path);
        return;
    }
    const char *p = skip_ws(pt->coco_data, pt->coco_data + pt->coco_size);
    if (array_elements(p, pt->coco_data + pt->coco_size, &pt->coco, &pt->ncoco) != 0) {
        problem("%s: not a COCO results array (of %s)", pt->coco_path, pt->path);
        return;
    }
    long want = 0;
    pt->coco_first = malloc(sizeof(int) * (size_t)(pt->nentries + 1));
    if (!pt->coco_first) {
        problem("out of memory");
        return;
    }
    for (int i = 0; i < pt->nentries; i++) {
        pt->coco_first[i] = (int)want;
        want += pt->dets[i];
    }
    if (want != pt->ncoco)
        problem("%s: %d detections, but its part's document %s has %ld: not the same run's", pt->coco_path,
                pt->ncoco, pt->path, want);
}

typedef struct {
    int position, part, entry;
} order_item;

static int cmp_order(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    return (x->position > y->position) - (x->position < y->position);
}

/* Builds the text in memory and writes it with detect_write_file. */
static int write_output(const char *path, const order_item *order, int n, const part *parts, int coco)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        problem("%s: out of memory", path);
        return -1;
    }
    if (!coco) {
        fputs("{\"images\": [", f);
        for (int i = 0; i < n; i++) {
            const span *s = &parts[order[i].part].entries[order[i].entry];
            fputs(i ? ",\n  " : "\n  ", f);
            fwrite(s->p, 1, s->n, f);
        }
        fputs("\n]}\n", f);
    } else {
        int written = 0;
        for (int i = 0; i < n; i++) {
            const part *pt = &parts[order[i].part];
            for (int d = 0; d < pt->dets[order[i].entry]; d++) {
                const span *s = &pt->coco[pt->coco_first[order[i].entry] + d];
                fputs(written++ ? ",\n" : "[\n", f);
                fwrite(s->p, 1, s->n, f);
            }
        }
        fputs(written ? "\n]\n" : "[]\n", f);
    }
    int rc = fclose(f) == 0 ? 0 : -1;
    if (rc == 0 && detect_write_file(path, buf, len) != DETECT_OK) {
        problem("%s", detect_last_error());
        rc = -1;
    } else if (rc != 0) {
        problem("%s: out of memory", path);
    }
    free(buf);
    return rc;
}

static void free_part(part *pt)
{
    if (pt->data) munmap(pt->data, pt->size);
    if (pt->coco_data) munmap(pt->coco_data, pt->coco_size);
    free(pt->entries);
    free(pt->positions);
    free(pt->dets);
    cJSON_Delete(pt->failed);
    free(pt->coco_rel);
    free(pt->coco_path);
    free(pt->coco);
    free(pt->coco_first);
}

/* Same run: the first readable part decides; missing, twice, incomplete. */
static void check_parts(part *parts, int nparts, const part **by_index)
{
    const part *ref = NULL;
    for (int k = 0; k < nparts; k++) {
        part *pt = &parts[k];
        if (!pt->ok) continue;
        if (!ref) {
            ref = pt;
        } else if (pt->count != ref->count || pt->inputs != ref->inputs || strcmp(pt->fingerprint, ref->fingerprint)) {
            problem("%s: a part of another run: %d parts of %d inputs (fingerprint %s), but %s is one of %d parts of "
                    "%d inputs (fingerprint %s)", pt->path, pt->count, pt->inputs, pt->fingerprint, ref->path,
                    ref->count, ref->inputs, ref->fingerprint);
            pt->ok = 0;
            continue;
        }
        if (by_index[pt->index]) {
            problem("%s: shard %d of %d given twice (also %s)", pt->path, pt->index, pt->count,
                    by_index[pt->index]->path);
            pt->ok = 0;
            continue;
        }
        by_index[pt->index] = pt;
        int nfailed = cJSON_GetArraySize(pt->failed);
        if (pt->nentries + nfailed != pt->assigned)
            problem("%s: shard %d of %d is incomplete: %d of its %d images done, %d failed (an interrupted run? "
                    "run it again with --skip-existing)", pt->path, pt->index, pt->count, pt->nentries, pt->assigned,
                    nfailed);
    }
    if (!ref) return;
    int missing = 0;
    for (int i = 0; i < ref->count; i++)
        if (!by_index[i]) {
            problem("shard %d of %d is missing: none of the %d documents given is --shard %d/%d", i, ref->count,
                    nparts, i, ref->count);
            missing++;
        }
    long assigned = 0;
    for (int i = 0; i < ref->count; i++) assigned += by_index[i] ? by_index[i]->assigned : 0;
    if (!missing && assigned != ref->inputs)
        problem("the %d parts hold %ld images but their input set has %d: were they run on different inputs?",
                ref->count, assigned, ref->inputs);
}

int merge_main(int argc, char **argv)
{
    enum { O_JSON = 256, O_COCO, O_CHECK };
    static const struct option longs[] = {
        {"json", required_argument, 0, O_JSON}, {"coco-results", required_argument, 0, O_COCO},
        {"check", no_argument, 0, O_CHECK}, {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *json_out = NULL, *coco_out = NULL;
    int check = 0, quiet = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longs, NULL)) != -1) {
        switch (c) {
        case O_JSON: json_out = optarg; break;
        case O_COCO: coco_out = optarg; break;
        case O_CHECK: check = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default:
            options_report_bad("detect merge", "detect merge --help", argc, argv);
            return 2;
        }
    }
    if (optind == argc) {
        fprintf(stderr, "detect merge: no shard documents given (see detect merge --help)\n");
        return 2;
    }
    if (!json_out && !coco_out && !check) {
        fprintf(stderr, "detect merge: nothing to write: give --json FILE, --coco-results FILE or --check\n");
        return 2;
    }
    int nparts = argc - optind;
    part *parts = calloc((size_t)nparts, sizeof *parts);
    if (!parts) return 2;
    for (int k = 0; k < nparts; k++) {
        parts[k].path = argv[optind + k];
        read_part(&parts[k]);
    }
    int count = 0, total = 0;
    for (int k = 0; k < nparts; k++)
        if (parts[k].ok) {
            count = parts[k].count;
            break;
        }
    const part **by_index = calloc((size_t)count + 1, sizeof *by_index);
    order_item *order = NULL;
    int nfailed = 0;
    if (!by_index) problem("out of memory");
    else check_parts(parts, nparts, by_index);
    for (int k = 0; k < nparts; k++)
        if (parts[k].ok) total += parts[k].nentries + cJSON_GetArraySize(parts[k].failed);
    check_images(parts, nparts, total);
    if (errors == 0 && coco_out)
        for (int k = 0; k < nparts; k++) read_coco(&parts[k]);
    int n = 0;
    if (errors == 0 && !(order = malloc(sizeof *order * (size_t)(total + 1)))) problem("out of memory");
    if (errors == 0) {
        for (int k = 0; k < nparts; k++)
            for (int i = 0; i < parts[k].nentries; i++) order[n++] = (order_item){parts[k].positions[i], k, i};
        /* Positions are distinct when every part listed the inputs in the same order. */
        qsort(order, (size_t)n, sizeof *order, cmp_order);
        for (int k = 0; k < nparts; k++)
            for (const cJSON *f = parts[k].failed->child; f; f = f->next, nfailed++)
                fprintf(stderr, "detect merge: %s: %s failed in shard %d (not in the merged results)\n",
                        parts[k].path, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file")),
                        parts[k].index);
    }
    if (errors == 0 && json_out) write_output(json_out, order, n, parts, 0);
    if (errors == 0 && coco_out) write_output(coco_out, order, n, parts, 1);
    if (errors == 0 && !quiet)
        fprintf(stderr, "detect merge: %d shards, %d images%s%s%s%s%s\n", count, n + nfailed,
                nfailed ? " (some failed)" : "", json_out ? " -> " : check ? ": checked" : "",
                json_out ? json_out : "", coco_out ? (json_out ? ", " : " -> ") : "", coco_out ? coco_out : "");
    for (int k = 0; k < nparts; k++) free_part(&parts[k]);
    free(parts);
    free(by_index);
    free(order);
    return errors ? 2 : nfailed ? 1 : 0;
}
