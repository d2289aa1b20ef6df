/* The list of images a run works through: files named on the command line,
 * folders walked recursively in sorted order, and files listed one per line
 * in --list files. In a folder, only regular files with an image extension
 * (inputs_image_extension, any case) are inputs; the others are skipped,
 * each recorded with its reason: files without an image extension
 * (annotations.json, notes.txt, ...; counted in not_images), and, counted
 * in special, anything that is not a regular file (a FIFO, a socket, a
 * device), a dangling link or a link loop, and a folder met again by
 * (device, inode), which a symbolic link back up the tree would otherwise
 * walk for ever. Whether an input is an image is then decided from its
 * content: a file named as an image that does not decode is an error, and
 * a file named on the command line or in a list is always tried. */
#ifndef DETECT_INPUTS_H
#define DETECT_INPUTS_H

#include "cli_error.h"

typedef struct {
    char *path;  /* as opened */
    char *name;  /* output stem: path below the folder it came from, '/' -> '_', extension dropped */
} input_item;

typedef struct {
    char *path;
    char *reason;  /* "not a regular file (a FIFO)", ... */
    int special;   /* 1: not a regular file, a broken link or a folder again; 0: no image extension */
} input_skip;

typedef struct {
    input_item *items;
    int count, cap;
    input_skip *skipped; /* in walk order */
    int nskipped, skipped_cap;
    int not_images; /* skipped files without an image extension */
    int special;    /* skipped entries that are not regular files, broken links or folders again */
} input_list;

/* 1 if the file name ends in an extension the decoder's formats use. */
int inputs_image_extension(const char *name);
/* Adds `arg`: a file, or a folder (recursively). */
int inputs_add_path(input_list *l, const char *arg, cli_error *err);
/* Adds every non-empty line of `list_path` (a path each; '#' starts a comment). */
int inputs_add_list(input_list *l, const char *list_path, cli_error *err);
/* Makes output stems unique ("x", "x-2", ...), in input order. */
void inputs_unique_names(input_list *l);
/* Prints "<prog>: skipped PATH: REASON" to stderr for each special skip,
 * and with verbose for every skip. */
void inputs_report_skipped(const input_list *l, const char *prog, int verbose);
void inputs_free(input_list *l);

#endif
