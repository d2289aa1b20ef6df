/* Status codes and error messages.
 *
 * Every function that can fail on input returns an mr_status and, when it
 * fails, writes one human-readable line into an mr_error supplied by the
 * caller. The line names the file, tensor, option or op at fault, so the
 * command can print it as-is. Nothing aborts on bad input. */
#ifndef MR_STATUS_H
#define MR_STATUS_H

#include <stddef.h>

typedef enum {
    MR_OK = 0,
    MR_ERR_IO,          /* a file could not be opened, read or written */
    MR_ERR_FORMAT,      /* a file's contents are malformed (image, weights, JSON) */
    MR_ERR_CONFIG,      /* a config key is unknown, of the wrong type or out of range */
    MR_ERR_SHAPE,       /* a tensor has the wrong shape or is missing */
    MR_ERR_RANGE,       /* a size or value is outside what the engine allows */
    MR_ERR_OOM,         /* an allocation failed */
    MR_ERR_UNSUPPORTED, /* valid input, but not implemented by this build/backend */
    MR_ERR_BACKEND,     /* a library (oneDNN, cuDNN, cuBLAS, CUDA) returned an error */
    MR_ERR_INTERNAL     /* a bug: an invariant no input should break */
} mr_status;

#define MR_ERROR_MSG_LEN 1024

typedef struct {
    mr_status status;
    char msg[MR_ERROR_MSG_LEN];
} mr_error;

const char *mr_status_name(mr_status s);

/* Records status and a printf-style message in err (err may be NULL) and
 * returns status, so callers can write `return mr_fail(err, ...)`. */
mr_status mr_fail(mr_error *err, mr_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with context ("model.safetensors: ..."). */
void mr_error_prefix(mr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define MR_TRY(expr)                                                          \
    do {                                                                      \
        mr_status mr_try_status_ = (expr);                                    \
        if (mr_try_status_ != MR_OK) return mr_try_status_;                   \
    } while (0)

#endif
