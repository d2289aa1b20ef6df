/* Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.c; built and
 * run by scripts/fuzz.sh). The engine's loaders take a path, so each input
 * is written to an in-memory file (memfd) and opened again through
 * /proc/self/fd/N, which is a regular file as fstat sees it: the same code
 * path as a file on disk, with nothing left behind in /tmp. */
#ifndef MR_FUZZ_COMMON_H
#define MR_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A violated invariant: print it and abort, so libFuzzer saves the input. */
#define FUZZ_CHECK(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz invariant failed: %s (%s:%d): ", #cond,     \
                    __FILE__, __LINE__);                                      \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* One memfd per process, rewritten for each input; its path in path[64]. */
static inline void fuzz_memfile(const uint8_t *data, size_t size, char path[64])
{
    static int fd = -1;
    if (fd < 0) {
        fd = memfd_create("fuzz_input", 0);
        FUZZ_CHECK(fd >= 0, "memfd_create failed");
    }
    FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate failed");
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        FUZZ_CHECK(n > 0, "pwrite failed");
        done += (size_t)n;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
}

#endif
