/* Internal to config.c and config_table.c (and the config unit test): the
 * description of every JSON config key. One table row per key drives the
 * parser, the range checks of config_validate() and the test that every
 * struct field has a key; configs/README.md documents the same rows.
 *
 * A row's `name` is the struct field's name (the tables stringify it), so a
 * JSON key and its field cannot drift apart. */
#ifndef MR_CONFIG_TABLE_H
#define MR_CONFIG_TABLE_H

#include <stddef.h>

#include "core/config.h"

typedef enum {
    CFG_INT,          /* int: a JSON number without a fraction                 */
    CFG_BOOL,         /* int 0/1: JSON true | false                            */
    CFG_FLOAT,        /* float: a JSON number                                  */
    CFG_DOUBLE,       /* double: a JSON number kept exact (NMS thresholds)     */
    CFG_FLOATS,       /* float[n]: an array of exactly n numbers               */
    CFG_FLOAT_LIST,   /* float[n] + int count at count_offset: 1..n numbers    */
    CFG_ENUM,         /* an int-sized enum: one of names[], value = index      */
    CFG_STRING,       /* char[n], NUL-terminated                               */
    CFG_SECTION,      /* a nested object described by `section`                */
    CFG_ANCHOR_SIZES, /* anchors.sizes: one row of sizes per FPN level         */
    CFG_CLASS_NAMES   /* classes.class_names: num_classes strings              */
} cfg_type;

typedef struct cfg_section cfg_section;

typedef struct {
    const char *name;          /* JSON key = struct field name                    */
    cfg_type type;
    size_t offset;             /* of the field within its section's struct        */
    size_t size;               /* sizeof the field                                */
    double min, max;           /* numbers, and each element of arrays: the range  */
    int min_open;              /* 1: the range excludes min, "(0,1]"              */
    size_t count_offset;       /* FLOAT_LIST: offset of the int element count     */
    const char *const *names;  /* ENUM: names indexed by value, NULL-terminated   */
    const int *choices;        /* INT: allowed values, 0-terminated; NULL = range */
    const cfg_section *section;/* SECTION: the nested object's keys               */
} cfg_key;

struct cfg_section {
    const char *name;          /* struct type, for tests and messages */
    size_t size;               /* sizeof the section's struct         */
    const cfg_key *keys;
    int num_keys;
};

/* The top level: "name", "input", "backbone", ... "classes". */
extern const cfg_section cfg_root;

/* COCO's 80 categories in Detectron's contiguous order, index 0 = background. */
#define CFG_COCO_NUM_CLASSES 81
extern const char *const cfg_coco_names[CFG_COCO_NUM_CLASSES];

#endif
