/* Opening and reading encoded images: see image_source.h. */
#include "io/image_source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a non-regular file is, for the message. */
static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a plain file";
}

/* A path opened without blocking (open() on a FIFO with no writer would
 * wait for ever; O_NONBLOCK has no effect on a regular file) and checked
 * with fstat before any read. */
static mr_status open_regular(const char *path, FILE **f, mr_error *err)
{
    *f = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        const int e = errno;
        struct stat lb;
        if (e == ELOOP) return mr_fail(err, MR_ERR_IO, "%s: cannot open: a symbolic link loop", path);
        if (e == ENXIO) /* open() refuses a socket so */
            return mr_fail(err, MR_ERR_IO, "%s: not a regular file (a socket or device)", path);
        if (e == ENOENT && lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode))
            return mr_fail(err, MR_ERR_IO, "%s: cannot open: a dangling symbolic link", path);
        return mr_fail(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return mr_fail(err, MR_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return mr_fail(err, MR_ERR_IO, "%s: not a regular file (%s)", path, file_kind(sb.st_mode));
    }
    /* Reads from here on may block as on any regular file. */
    int flags = fcntl(fd, F_GETFL);
    if (flags != -1) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *f = fdopen(fd, "rb");
    if (!*f) {
        int e = errno;
        close(fd);
        return mr_fail(err, MR_ERR_OOM, "%s: cannot open: %s", path, strerror(e));
    }
    return MR_OK;
}

mr_status image_source_open(const image_source *src, FILE **f, uint8_t *head, size_t n, size_t *got,
                            mr_error *err)
{
    *f = NULL;
    *got = 0;
    if (src->data && src->size == 0) return MR_OK; /* an empty buffer reads as an empty file */
    if (src->data) {
        *f = fmemopen((void *)src->data, src->size, "rb");
        if (!*f) return mr_fail(err, MR_ERR_OOM, "%s: cannot open: %s", src->name, strerror(errno));
    } else {
        MR_TRY(open_regular(src->name, f, err));
    }
    *got = fread(head, 1, n, *f);
    if (ferror(*f) || fseek(*f, 0, SEEK_SET) != 0) {
        fclose(*f);
        *f = NULL;
        return mr_fail(err, MR_ERR_IO, "%s: read error", src->name);
    }
    return MR_OK;
}

mr_status image_source_read_all(const image_source *src, const uint8_t **bytes, size_t *size, void **owned,
                                mr_error *err)
{
    *bytes = NULL;
    *size = 0;
    *owned = NULL;
    if (src->data) {
        *bytes = src->data;
        *size = src->size;
        return MR_OK;
    }
    FILE *f;
    MR_TRY(open_regular(src->name, &f, err));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0) {
        fclose(f);
        return mr_fail(err, MR_ERR_IO, "%s: cannot stat", src->name);
    }
    if ((unsigned long long)sb.st_size > (1ull << 31)) {
        fclose(f);
        return mr_fail(err, MR_ERR_RANGE, "%s: file of %lld bytes, larger than the 2 GiB an image may have",
                       src->name, (long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory reading %zu bytes", src->name, n);
    }
    size_t got = fread(buf, 1, n, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return mr_fail(err, MR_ERR_IO, "%s: read error", src->name);
    }
    *bytes = buf;
    *size = got; /* a file that shrank meanwhile reads as truncated */
    *owned = buf;
    return MR_OK;
}

mr_status image_check_side(const char *name, const char *kind, uint32_t h, uint32_t w, int max_side,
                           mr_error *err)
{
    if (h == 0 || w == 0)
        return mr_fail(err, MR_ERR_FORMAT, "%s: %s has zero size (%ux%u)", name, kind, (unsigned)h, (unsigned)w);
    if (max_side > 0 && (h > (uint32_t)max_side || w > (uint32_t)max_side))
        return mr_fail(err, MR_ERR_RANGE,
                       "%s: image is %ux%u (HxW), larger than the limit of %d pixels a side "
                       "(input.max_image_side)",
                       name, (unsigned)h, (unsigned)w, max_side);
    return MR_OK;
}

uint8_t *image_alloc_rgb(uint32_t h, uint32_t w)
{
    size_t row = (size_t)w * 3;
    if (w != 0 && row / 3 != w) return NULL;
    if (h != 0 && row > SIZE_MAX / h) return NULL;
    return malloc(row * h);
}

void image_cmyk_to_rgb(const uint8_t *cmyk, uint8_t *rgb, size_t n)
{
    for (size_t i = 0; i < n; i++, cmyk += 4, rgb += 3) {
        const int nk = 255 - cmyk[3];
        for (int c = 0; c < 3; c++) {
            const int t = cmyk[c] * nk + 128; /* MULDIV255 */
            const int v = nk - ((t >> 8) + t) / 256;
            rgb[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}
