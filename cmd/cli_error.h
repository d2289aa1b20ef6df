/* The command's own error reporting: functions of cmd/ return 0 or -1 and
 * leave one line in a cli_error, which main prints as "detect: <line>".
 * Errors of the library (include/detect.h) arrive through cli_api. */
#ifndef DETECT_CLI_ERROR_H
#define DETECT_CLI_ERROR_H

#include <stdarg.h>
#include <stdio.h>

#include "detect.h"

typedef struct {
    char msg[1024];
} cli_error;

/* Sets the message and returns -1, so callers can `return cli_fail(...)`. */
static inline int cli_fail(cli_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int cli_fail(cli_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err) vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* 0 for DETECT_OK; otherwise the library's message and -1. */
static inline int cli_api(cli_error *err, detect_status st)
{
    return st == DETECT_OK ? 0 : cli_fail(err, "%s", detect_last_error());
}

#define CLI_TRY(expr)                                                                                                \
    do {                                                                                                             \
        if ((expr) != 0) return -1;                                                                                  \
    } while (0)

#endif
