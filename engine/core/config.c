/* JSON config -> mr_config: parse with cJSON, overlay on the defaults, walk
 * the key table (config_table.c) for types and ranges, then check the rules
 * that tie keys together. Every error is one line naming the origin (file)
 * and the key's full path, e.g.
 *   configs/x.json: unknown key "rpn.nms_tresh" (did you mean "rpn.nms_thresh"?)
 *   configs/x.json: rpn.nms_thresh: expected a number in [0,1], got 1.5 */
#include "core/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_table.h"

#define PATH_LEN 256
#define MAX_CONFIG_BYTES (1 << 20) /* 81 class names take ~1 KiB; anything near this is not a config */

typedef struct {
    mr_config *cfg;      /* the defaults, being overlaid */
    mr_error *err;
    int num_class_names; /* length of "classes.class_names", -1 if absent */
} parse_state;

/* ---- messages ---------------------------------------------------------- */

/* A path is truncated, never overflowed, if a JSON key is absurdly long;
 * the index is kept by cutting the prefix short first. */
static void join_path(char out[PATH_LEN], const char *prefix, const char *key)
{
    if (prefix[0]) snprintf(out, PATH_LEN, "%s.%s", prefix, key);
    else snprintf(out, PATH_LEN, "%s", key);
}

static void index_path(char out[PATH_LEN], const char *prefix, int i)
{
    snprintf(out, PATH_LEN, "%.*s[%d]", PATH_LEN - 16, prefix, i);
}

static const char *json_type_name(const cJSON *j)
{
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "an invalid value";
}

static mr_status type_error(mr_error *err, const char *path, const char *want, const cJSON *got)
{
    return mr_fail(err, MR_ERR_CONFIG, "%s: expected %s, got %s", path, want, json_type_name(got));
}

/* The range check shared by the parser (on the JSON number) and by
 * config_validate (on the stored value). NaN fails every comparison. */
static mr_status check_number(const cfg_key *k, const char *path, double v, mr_error *err)
{
    int ok = (k->min_open ? v > k->min : v >= k->min) && v <= k->max;
    if (ok && k->choices) {
        ok = 0;
        for (const int *c = k->choices; *c; c++) ok |= v == *c;
    }
    if (ok) return MR_OK;
    if (k->choices) {
        char list[128] = "";
        size_t len = 0;
        for (const int *c = k->choices; *c && len < sizeof list; c++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", c == k->choices ? "" : c[1] ? ", " : " or ", *c);
        return mr_fail(err, MR_ERR_CONFIG, "%s: expected %s, got %.9g", path, list, v);
    }
    return mr_fail(err, MR_ERR_CONFIG, "%s: expected %s in %c%.10g,%.10g], got %.9g", path,
                   k->type == CFG_INT ? "an integer" : "a number", k->min_open ? '(' : '[', k->min, k->max, v);
}

static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[64];
    if (la >= 64 || lb >= 64) return 64;
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

static mr_status unknown_key(const cfg_section *sec, const char *prefix, const char *path, const char *key,
                             mr_error *err)
{
    const char *best = NULL;
    int best_d = 3; /* suggest only near misses: a typo, not a different key */
    for (int i = 0; i < sec->num_keys; i++) {
        int d = edit_distance(key, sec->keys[i].name);
        if (d < best_d) best_d = d, best = sec->keys[i].name;
    }
    if (!best) return mr_fail(err, MR_ERR_CONFIG, "unknown key \"%s\"", path);
    char want[PATH_LEN];
    join_path(want, prefix, best);
    return mr_fail(err, MR_ERR_CONFIG, "unknown key \"%s\" (did you mean \"%s\"?)", path, want);
}

/* ---- parsing: JSON values into fields ----------------------------------- */

static mr_status parse_number(const cfg_key *k, const char *path, const cJSON *j, double *v, mr_error *err)
{
    if (!cJSON_IsNumber(j)) return type_error(err, path, k->type == CFG_INT ? "an integer" : "a number", j);
    *v = j->valuedouble;
    if (k->type == CFG_INT && *v != floor(*v))
        return mr_fail(err, MR_ERR_CONFIG, "%s: expected an integer, got %.9g", path, *v);
    return check_number(k, path, *v, err);
}

/* An array of min_n..max_n numbers into dst (zeroed first, so the struct
 * holds nothing stale past the new length). */
static mr_status parse_float_array(const cfg_key *k, const char *path, const cJSON *j, float *dst, int min_n,
                                   int max_n, int *count, mr_error *err)
{
    if (!cJSON_IsArray(j)) return type_error(err, path, "an array of numbers", j);
    int n = cJSON_GetArraySize(j);
    if (n < min_n || n > max_n) {
        if (min_n == max_n)
            return mr_fail(err, MR_ERR_CONFIG, "%s: expected an array of %d numbers, got %d", path, min_n, n);
        return mr_fail(err, MR_ERR_CONFIG, "%s: expected an array of %d to %d numbers, got %d", path, min_n,
                       max_n, n);
    }
    memset(dst, 0, (size_t)max_n * sizeof *dst);
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        char epath[PATH_LEN];
        double v = 0;
        index_path(epath, path, i);
        MR_TRY(parse_number(k, epath, e, &v, err));
        dst[i] = (float)v;
    }
    if (count) *count = n;
    return MR_OK;
}

static mr_status parse_enum(const cfg_key *k, const char *path, const cJSON *j, int *dst, mr_error *err)
{
    if (!cJSON_IsString(j)) return type_error(err, path, "a string", j);
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; k->names[i]; i++) {
        if (strcmp(j->valuestring, k->names[i]) == 0) {
            *dst = i;
            return MR_OK;
        }
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"", i ? ", " : "", k->names[i]);
    }
    return mr_fail(err, MR_ERR_CONFIG, "%s: expected one of %s, got \"%.64s\"", path, list, j->valuestring);
}

/* A non-empty string that fits buf[size] with its NUL. */
static mr_status parse_string(const char *path, const cJSON *j, char *buf, size_t size, mr_error *err)
{
    if (!cJSON_IsString(j)) return type_error(err, path, "a string", j);
    size_t n = strlen(j->valuestring);
    if (n == 0) return mr_fail(err, MR_ERR_CONFIG, "%s: expected a non-empty string", path);
    if (n >= size) return mr_fail(err, MR_ERR_CONFIG, "%s: longer than %zu bytes", path, size - 1);
    memset(buf, 0, size);
    memcpy(buf, j->valuestring, n);
    return MR_OK;
}

/* "sizes": [[32], [64], ...]: 1..MR_MAX_FPN_LEVELS rows of equal length. */
static mr_status parse_anchor_sizes(const cfg_key *k, const char *path, const cJSON *j, mr_anchor_config *an,
                                    mr_error *err)
{
    if (!cJSON_IsArray(j)) return type_error(err, path, "an array of arrays of numbers (one row per FPN level)", j);
    int rows = cJSON_GetArraySize(j);
    if (rows < 1 || rows > MR_MAX_FPN_LEVELS)
        return mr_fail(err, MR_ERR_CONFIG, "%s: expected 1 to %d rows (one per FPN level), got %d", path,
                       MR_MAX_FPN_LEVELS, rows);
    memset(an->sizes, 0, sizeof an->sizes);
    int l = 0, width = 0;
    for (const cJSON *row = j->child; row; row = row->next, l++) {
        char rpath[PATH_LEN];
        int n;
        index_path(rpath, path, l);
        MR_TRY(parse_float_array(k, rpath, row, an->sizes[l], 1, MR_MAX_ANCHOR_SIZES, &n, err));
        if (l == 0) width = n;
        else if (n != width)
            return mr_fail(err, MR_ERR_CONFIG, "%s: has %d sizes, but %s[0] has %d; every level needs the same count",
                           rpath, n, path, width);
    }
    an->num_levels = rows;
    an->num_sizes_per_level = width;
    return MR_OK;
}

static mr_status parse_class_names(parse_state *ps, const char *path, const cJSON *j)
{
    mr_classes_config *cl = &ps->cfg->classes;
    if (!cJSON_IsArray(j)) return type_error(ps->err, path, "an array of strings", j);
    int n = cJSON_GetArraySize(j);
    if (n < 1 || n > MR_MAX_CLASSES)
        return mr_fail(ps->err, MR_ERR_CONFIG, "%s: expected 1 to %d names, got %d", path, MR_MAX_CLASSES, n);
    memset(cl->class_names, 0, sizeof cl->class_names);
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        char epath[PATH_LEN];
        index_path(epath, path, i);
        MR_TRY(parse_string(epath, e, cl->class_names[i], MR_MAX_CLASS_NAME, ps->err));
    }
    ps->num_class_names = n;
    return MR_OK;
}

static mr_status parse_section(parse_state *ps, const cfg_section *sec, const cJSON *obj, char *base,
                               const char *prefix);

static mr_status parse_key(parse_state *ps, const cfg_key *k, const cJSON *j, char *field, const char *path)
{
    mr_error *err = ps->err;
    double v = 0;
    switch (k->type) {
    case CFG_INT:
        MR_TRY(parse_number(k, path, j, &v, err));
        *(int *)field = (int)v;
        return MR_OK;
    case CFG_FLOAT:
        MR_TRY(parse_number(k, path, j, &v, err));
        *(float *)field = (float)v;
        return MR_OK;
    case CFG_DOUBLE:
        MR_TRY(parse_number(k, path, j, &v, err));
        *(double *)field = v;
        return MR_OK;
    case CFG_BOOL:
        if (!cJSON_IsBool(j)) return type_error(err, path, "true or false", j);
        *(int *)field = cJSON_IsTrue(j) ? 1 : 0;
        return MR_OK;
    case CFG_FLOATS: {
        int n = (int)(k->size / sizeof(float));
        return parse_float_array(k, path, j, (float *)field, n, n, NULL, err);
    }
    case CFG_FLOAT_LIST:
        return parse_float_array(k, path, j, (float *)field, 1, (int)(k->size / sizeof(float)),
                                 (int *)(field - k->offset + k->count_offset), err);
    case CFG_ENUM:
        return parse_enum(k, path, j, (int *)field, err);
    case CFG_STRING:
        return parse_string(path, j, field, k->size, err);
    case CFG_SECTION:
        if (!cJSON_IsObject(j)) return type_error(err, path, "an object", j);
        return parse_section(ps, k->section, j, field, path);
    case CFG_ANCHOR_SIZES:
        return parse_anchor_sizes(k, path, j, &ps->cfg->anchors, err);
    case CFG_CLASS_NAMES:
        return parse_class_names(ps, path, j);
    }
    return mr_fail(err, MR_ERR_INTERNAL, "%s: key type %d not handled", path, (int)k->type);
}

static mr_status parse_section(parse_state *ps, const cfg_section *sec, const cJSON *obj, char *base,
                               const char *prefix)
{
    for (const cJSON *item = obj->child; item; item = item->next) {
        char path[PATH_LEN];
        join_path(path, prefix, item->string);
        const cfg_key *k = NULL;
        for (int i = 0; i < sec->num_keys && !k; i++)
            if (strcmp(sec->keys[i].name, item->string) == 0) k = &sec->keys[i];
        if (!k) return unknown_key(sec, prefix, path, item->string, ps->err);
        /* cJSON keeps both copies of a repeated key; the second would be silently ignored. */
        for (const cJSON *prev = obj->child; prev != item; prev = prev->next)
            if (strcmp(prev->string, item->string) == 0)
                return mr_fail(ps->err, MR_ERR_CONFIG, "duplicate key \"%s\"", path);
        MR_TRY(parse_key(ps, k, item, base + k->offset, path));
    }
    return MR_OK;
}

/* Names when the file gives none: COCO's for 81 classes, else placeholders. */
static void default_class_names(mr_classes_config *cl)
{
    memset(cl->class_names, 0, sizeof cl->class_names);
    for (int i = 0; i < cl->num_classes; i++) {
        if (cl->num_classes == CFG_COCO_NUM_CLASSES) strcpy(cl->class_names[i], cfg_coco_names[i]);
        else if (i == 0) strcpy(cl->class_names[i], "__background__");
        else snprintf(cl->class_names[i], MR_MAX_CLASS_NAME, "class_%d", i);
    }
}

/* ---- validation: the stored struct -------------------------------------- */

static mr_status validate_section(const cfg_section *sec, const char *base, const char *prefix, mr_error *err);

static mr_status validate_key(const cfg_key *k, const char *base, const char *path, mr_error *err)
{
    const char *field = base + k->offset;
    char epath[PATH_LEN];
    switch (k->type) {
    case CFG_INT:
        return check_number(k, path, *(const int *)field, err);
    case CFG_FLOAT:
        return check_number(k, path, *(const float *)field, err);
    case CFG_DOUBLE:
        return check_number(k, path, *(const double *)field, err);
    case CFG_BOOL: {
        int v = *(const int *)field;
        if (v != 0 && v != 1) return mr_fail(err, MR_ERR_CONFIG, "%s: expected 0 or 1 (false, true), got %d", path, v);
        return MR_OK;
    }
    case CFG_FLOATS:
    case CFG_FLOAT_LIST: {
        int cap = (int)(k->size / sizeof(float)), n = cap;
        if (k->type == CFG_FLOAT_LIST) {
            n = *(const int *)(base + k->count_offset);
            if (n < 1 || n > cap)
                return mr_fail(err, MR_ERR_CONFIG, "%s: expected 1 to %d values, got %d", path, cap, n);
        }
        for (int i = 0; i < n; i++) {
            index_path(epath, path, i);
            MR_TRY(check_number(k, epath, ((const float *)field)[i], err));
        }
        return MR_OK;
    }
    case CFG_ENUM: {
        int v = *(const int *)field, n = 0;
        while (k->names[n]) n++;
        if (v < 0 || v >= n) return mr_fail(err, MR_ERR_CONFIG, "%s: invalid value %d", path, v);
        return MR_OK;
    }
    case CFG_STRING:
        if (!memchr(field, 0, k->size)) return mr_fail(err, MR_ERR_CONFIG, "%s: not NUL-terminated", path);
        return MR_OK;
    case CFG_SECTION:
        return validate_section(k->section, field, path, err);
    case CFG_ANCHOR_SIZES: {
        const mr_anchor_config *an = (const mr_anchor_config *)base;
        if (an->num_levels < 1 || an->num_levels > MR_MAX_FPN_LEVELS)
            return mr_fail(err, MR_ERR_CONFIG, "%s: expected 1 to %d rows, got %d", path, MR_MAX_FPN_LEVELS,
                           an->num_levels);
        if (an->num_sizes_per_level < 1 || an->num_sizes_per_level > MR_MAX_ANCHOR_SIZES)
            return mr_fail(err, MR_ERR_CONFIG, "%s: expected 1 to %d sizes per level, got %d", path,
                           MR_MAX_ANCHOR_SIZES, an->num_sizes_per_level);
        for (int l = 0; l < an->num_levels; l++)
            for (int s = 0; s < an->num_sizes_per_level; s++) {
                char row[PATH_LEN];
                index_path(row, path, l);
                index_path(epath, row, s);
                MR_TRY(check_number(k, epath, an->sizes[l][s], err));
            }
        return MR_OK;
    }
    case CFG_CLASS_NAMES: {
        /* num_classes precedes class_names in the table, so it is in range here. */
        const mr_classes_config *cl = (const mr_classes_config *)base;
        for (int i = 0; i < cl->num_classes; i++) {
            index_path(epath, path, i);
            if (!memchr(cl->class_names[i], 0, MR_MAX_CLASS_NAME))
                return mr_fail(err, MR_ERR_CONFIG, "%s: not NUL-terminated", epath);
            if (!cl->class_names[i][0])
                return mr_fail(err, MR_ERR_CONFIG, "%s: empty name (classes.num_classes is %d)", epath,
                               cl->num_classes);
        }
        return MR_OK;
    }
    }
    return mr_fail(err, MR_ERR_INTERNAL, "%s: key type %d not handled", path, (int)k->type);
}

static mr_status validate_section(const cfg_section *sec, const char *base, const char *prefix, mr_error *err)
{
    for (int i = 0; i < sec->num_keys; i++) {
        char path[PATH_LEN];
        join_path(path, prefix, sec->keys[i].name);
        MR_TRY(validate_key(&sec->keys[i], base, path, err));
    }
    return MR_OK;
}

/* A section's GroupNorm must split every channel count it normalises into
 * whole groups (channels[0..n), each named in the message). */
static mr_status validate_groups(const char *section, mr_norm_kind norm, int groups, const int *channels,
                                 const char *const *names, int n, mr_error *err)
{
    if (norm != MR_NORM_GROUP_NORM) return MR_OK;
    for (int i = 0; i < n; i++)
        if (channels[i] % groups)
            return mr_fail(err, MR_ERR_CONFIG, "%s.norm_groups: %d groups do not divide %s's %d channels", section,
                           groups, names[i], channels[i]);
    return MR_OK;
}

static mr_status validate_norms(const mr_config *cfg, mr_error *err)
{
    const mr_backbone_config *bb = &cfg->backbone;
    if (bb->norm == MR_NORM_NONE)
        return mr_fail(err, MR_ERR_CONFIG, "backbone.norm: \"none\": the trunk's convolutions have no bias; "
                       "\"batchnorm\" or \"group_norm\"");
    int w = bb->num_groups * bb->width_per_group;
    int trunk[3] = {bb->stem_out_channels, w, bb->res2_out_channels};
    const char *const trunk_names[3] = {"backbone.stem_out_channels", "the res2 bottleneck width",
                                        "backbone.res2_out_channels"};
    MR_TRY(validate_groups("backbone", bb->norm, bb->norm_groups, trunk, trunk_names, 3, err));
    const char *const fpn_names[1] = {"fpn.out_channels"};
    MR_TRY(validate_groups("fpn", cfg->fpn.norm, cfg->fpn.norm_groups, &cfg->fpn.out_channels, fpn_names, 1, err));
    const char *const box_names[1] = {"box_head.conv_dim"};
    if (cfg->box_head.num_convs > 0)
        MR_TRY(validate_groups("box_head", cfg->box_head.norm, cfg->box_head.norm_groups, &cfg->box_head.conv_dim,
                               box_names, 1, err));
    const char *const mask_names[1] = {"mask_head.conv_dim"};
    return validate_groups("mask_head", cfg->mask_head.norm, cfg->mask_head.norm_groups, &cfg->mask_head.conv_dim,
                           mask_names, 1, err);
}

/* Rules that tie keys together, checked after each key is in range. */
static mr_status validate_rules(const mr_config *cfg, mr_error *err)
{
    const mr_input_config *in = &cfg->input;
    if (in->min_size > in->max_size)
        return mr_fail(err, MR_ERR_CONFIG, "input.min_size: %d is larger than input.max_size %d", in->min_size,
                       in->max_size);
    if ((in->canvas_h > 0) != (in->canvas_w > 0))
        return mr_fail(err, MR_ERR_CONFIG, "input.canvas_h, canvas_w: %dx%d: set both, or neither (0)", in->canvas_h,
                       in->canvas_w);
    int div = in->size_divisibility > 1 ? in->size_divisibility : 1;
    if (in->canvas_h % div || in->canvas_w % div)
        return mr_fail(err, MR_ERR_CONFIG, "input.canvas_h, canvas_w: %dx%d: not multiples of input.size_divisibility "
                       "%d", in->canvas_h, in->canvas_w, div);
    const mr_fpn_config *fpn = &cfg->fpn;
    if (fpn->min_level > fpn->max_level)
        return mr_fail(err, MR_ERR_CONFIG, "fpn.min_level: %d is above fpn.max_level %d", fpn->min_level,
                       fpn->max_level);
    int levels = fpn->max_level - fpn->min_level + 1;
    if (cfg->anchors.num_levels != levels)
        return mr_fail(err, MR_ERR_CONFIG, "anchors.sizes: has %d rows, but fpn levels %d..%d need %d (one per level)",
                       cfg->anchors.num_levels, fpn->min_level, fpn->max_level, levels);
    /* Detectron's cell table is built on a stride x stride box, so the grid
     * stride must be the level's 2^l, not torchvision's size ratio. */
    if (cfg->anchors.cell_rule == MR_ANCHOR_CELL_DETECTRON && cfg->anchors.stride_rule != MR_ANCHOR_STRIDE_LEVEL)
        return mr_fail(err, MR_ERR_CONFIG, "anchors.cell_rule: \"detectron\" needs anchors.stride_rule \"level\"");
    return validate_norms(cfg, err);
}

static mr_status validate(const mr_config *cfg, mr_error *err)
{
    MR_TRY(validate_section(&cfg_root, (const char *)cfg, "", err));
    return validate_rules(cfg, err);
}

mr_status config_validate(const mr_config *cfg, const char *origin, mr_error *err)
{
    mr_status st = validate(cfg, err);
    if (st != MR_OK) mr_error_prefix(err, "%s", origin ? origin : "config");
    return st;
}

/* ---- entry points ------------------------------------------------------- */

/* Keys and values from the file appear in messages, and JSON allows a newline
 * in them ("a\nb", or raw, which cJSON accepts): control characters print as
 * '?', so the message stays one line. */
static void one_line(mr_error *err)
{
    if (!err) return;
    for (char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

static mr_status syntax_error(const char *text, const char *at, mr_error *err)
{
    if (!at) return mr_fail(err, MR_ERR_FORMAT, "malformed JSON");
    size_t offset = (size_t)(at - text);
    int line = 1;
    const char *line_start = text;
    for (const char *p = text; p < at; p++)
        if (*p == '\n') line++, line_start = p + 1;
    return mr_fail(err, MR_ERR_FORMAT, "malformed JSON at line %d, column %zu (byte %zu)", line,
                   (size_t)(at - line_start) + 1, offset);
}

static mr_status parse_into(mr_config *out, const cJSON *root, mr_error *err)
{
    if (!cJSON_IsObject(root))
        return mr_fail(err, MR_ERR_CONFIG, "expected a JSON object at the top level, got %s", json_type_name(root));
    parse_state ps = {out, err, -1};
    config_defaults(out);
    MR_TRY(parse_section(&ps, &cfg_root, root, (char *)out, ""));
    /* box_head.agnostic_nms_thresh defaults to the file's box_head.nms_thresh */
    const cJSON *bh = cJSON_GetObjectItemCaseSensitive(root, "box_head");
    if (!cJSON_GetObjectItemCaseSensitive(bh, "agnostic_nms_thresh"))
        out->box_head.agnostic_nms_thresh = out->box_head.nms_thresh;
    mr_classes_config *cl = &out->classes;
    if (ps.num_class_names < 0) default_class_names(cl);
    else if (ps.num_class_names != cl->num_classes)
        return mr_fail(err, MR_ERR_CONFIG, "classes.class_names: has %d names, but classes.num_classes is %d",
                       ps.num_class_names, cl->num_classes);
    return validate(out, err);
}

mr_status config_parse(mr_config *cfg, const char *json, const char *origin, mr_error *err)
{
    if (!origin) origin = "config";
    if (!json) return mr_fail(err, MR_ERR_CONFIG, "%s: no JSON text", origin);

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    mr_status st;
    if (!root) {
        st = syntax_error(json, end, err);
    } else {
        /* Parsed into a copy: on failure the caller's struct is untouched. */
        mr_config *tmp = malloc(sizeof *tmp);
        if (!tmp) {
            st = mr_fail(err, MR_ERR_OOM, "out of memory for the config");
        } else {
            st = parse_into(tmp, root, err);
            if (st == MR_OK) memcpy(cfg, tmp, sizeof *cfg);
            free(tmp);
        }
        cJSON_Delete(root);
    }
    if (st != MR_OK) {
        mr_error_prefix(err, "%s", origin);
        one_line(err);
    }
    return st;
}

mr_status config_load(mr_config *cfg, const char *path, mr_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return mr_fail(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *text = malloc(MAX_CONFIG_BYTES + 1);
    if (!text) {
        fclose(f);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory", path);
    }
    size_t n = fread(text, 1, MAX_CONFIG_BYTES + 1, f);
    int read_errno = errno, failed = ferror(f);
    fclose(f);

    mr_status st;
    if (failed) st = mr_fail(err, MR_ERR_IO, "%s: cannot read: %s", path, strerror(read_errno));
    else if (n > MAX_CONFIG_BYTES)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: larger than %d bytes, not a config file", path, MAX_CONFIG_BYTES);
    else if (n == 0)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: the file is empty, not a JSON config (use {} for defaults)", path);
    else if (memchr(text, 0, n))
        st = mr_fail(err, MR_ERR_FORMAT, "%s: contains a NUL byte at byte %zu, not a JSON text", path,
                     (size_t)((char *)memchr(text, 0, n) - text));
    else {
        text[n] = '\0';
        st = config_parse(cfg, text, path, err);
    }
    free(text);
    return st;
}

void config_stage_blocks(const mr_config *cfg, int blocks[4])
{
    static const int table[3][5] = {{50, 3, 4, 6, 3}, {101, 3, 4, 23, 3}, {152, 3, 8, 36, 3}};
    for (int s = 0; s < 4; s++) blocks[s] = 0; /* unreachable for a validated config */
    for (int i = 0; i < 3; i++)
        if (table[i][0] == cfg->backbone.depth)
            for (int s = 0; s < 4; s++) blocks[s] = table[i][s + 1];
}
