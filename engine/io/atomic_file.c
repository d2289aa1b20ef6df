#include "io/atomic_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void release(atomic_file *af)
{
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    af->f = NULL;
}

mr_status atomic_file_open(atomic_file *af, const char *path, mr_error *err)
{
    memset(af, 0, sizeof *af);
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp = malloc(n);
    if (!af->path || !af->tmp) {
        release(af);
        return mr_fail(err, MR_ERR_OOM, "out of memory");
    }
    /* A device or FIFO (/dev/stdout, /dev/full) is written in place: renaming
     * over it would replace the device node with a regular file. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) snprintf(af->tmp, n, "%s", path);
    else snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->in_place = strcmp(af->tmp, af->path) == 0;
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        mr_status st = mr_fail(err, MR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        release(af);
        return st;
    }
    return MR_OK;
}

void atomic_file_write(atomic_file *af, const void *data, size_t n)
{
    if (!af->failed && n && fwrite(data, 1, n, af->f) != n) af->failed = errno ? errno : EIO;
}

void atomic_file_printf(atomic_file *af, const char *fmt, ...)
{
    if (af->failed) return;
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(af->f, fmt, ap) < 0) af->failed = errno ? errno : EIO;
    va_end(ap);
}

mr_status atomic_file_commit(atomic_file *af, mr_error *err)
{
    int e = af->failed;
    if (!e && fflush(af->f) != 0) e = errno;
    if (!e && fsync(fileno(af->f)) != 0 && errno != EINVAL && errno != EROFS) e = errno;
    if (fclose(af->f) != 0 && !e) e = errno;
    if (!e && !af->in_place && rename(af->tmp, af->path) != 0) e = errno;
    mr_status st = MR_OK;
    if (e) {
        if (!af->in_place) unlink(af->tmp);
        st = mr_fail(err, MR_ERR_IO, "%s: write failed: %s", af->path, strerror(e));
    }
    release(af);
    return st;
}

void atomic_file_abort(atomic_file *af)
{
    if (!af->f) return;
    fclose(af->f);
    if (!af->in_place) unlink(af->tmp);
    release(af);
}
