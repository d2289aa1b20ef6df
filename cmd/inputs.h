/* The list of images a run works through: files named on the command line,
 * folders walked recursively in sorted order, and files listed one per line
 * in --list files. In a folder, only files with an image extension
 * (inputs_image_extension: .png, .jpg, .jpeg, .jpe, .jfif, any case) are
 * inputs; the others (annotations.json, notes.txt, ...) are counted in
 * not_images and skipped. Whether an input is an image is then decided from
 * its content (PNG or JPEG signature): a file named as an image that does
 * not decode is an error, and a file named on the command line or in a
 * list is always tried. */
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
    int not_images; /* files in walked folders skipped: no image extension */
} input_list;

/* 1 if the file name ends in an extension the decoder's formats use. */
int inputs_image_extension(const char *name);
/* Adds `arg`: a file, or a folder (recursively). */
int inputs_add_path(input_list *l, const char *arg, cli_error *err);
/* Adds every non-empty line of `list_path` (a path each; '#' starts a comment). */
int inputs_add_list(input_list *l, const char *list_path, cli_error *err);
/* Makes output stems unique ("x", "x-2", ...), in input order. */
void inputs_unique_names(input_list *l);
void inputs_free(input_list *l);

#endif
