/* The list of images a run works through: files named on the command line,
 * folders walked recursively in sorted order, and files listed one per line
 * in --list files. Every regular file in a folder is an input; whether it is
 * an image is decided later from its content (PNG or JPEG signature), not
 * its name, so a stray text file is reported as "not an image", once. */
#ifndef DETECT_INPUTS_H
#define DETECT_INPUTS_H

#include "cli_error.h"

typedef struct {
    char *path;  /* as opened */
    char *name;  /* output stem: path below the folder it came from, '/' -> '_', extension dropped */
} input_item;

typedef struct {
    input_item *items;
    int count, cap;
} input_list;

/* Adds `arg`: a file, or a folder (recursively). */
int inputs_add_path(input_list *l, const char *arg, cli_error *err);
/* Adds every non-empty line of `list_path` (a path each; '#' starts a comment). */
int inputs_add_list(input_list *l, const char *list_path, cli_error *err);
/* Makes output stems unique ("x", "x-2", ...), in input order. */
void inputs_unique_names(input_list *l);
void inputs_free(input_list *l);

#endif
