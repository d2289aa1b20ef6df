/* Output files that are either complete or absent: written under a
 * temporary name beside the target (`<path>.tmp.<pid>`), flushed, synced and
 * renamed into place on commit; removed on abort or on any write error. An
 * interrupted run therefore never leaves a half-written output, and a full
 * disk is reported (every write, flush and close is checked). */
#ifndef MR_ATOMIC_FILE_H
#define MR_ATOMIC_FILE_H

#include <stdio.h>

#include "core/status.h"

typedef struct {
    FILE *f;
    char *path, *tmp;
    int failed;   /* a write failed; commit reports it */
    int in_place; /* the target is a device or FIFO: written directly */
} atomic_file;

mr_status atomic_file_open(atomic_file *af, const char *path, mr_error *err);

/* fwrite/fputs/fprintf through these, so failures are remembered. */
void atomic_file_write(atomic_file *af, const void *data, size_t n);
void atomic_file_printf(atomic_file *af, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Flush, fsync, close and rename; on failure the temporary is removed and
 * the error names the target path. Frees af's resources either way. */
mr_status atomic_file_commit(atomic_file *af, mr_error *err);

/* Closes and removes the temporary (the target is left as it was). */
void atomic_file_abort(atomic_file *af);

#endif
