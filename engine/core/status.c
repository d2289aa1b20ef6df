#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *mr_status_name(mr_status s)
{
    switch (s) {
    case MR_OK: return "ok";
    case MR_ERR_IO: return "I/O error";
    case MR_ERR_FORMAT: return "format error";
    case MR_ERR_CONFIG: return "config error";
    case MR_ERR_SHAPE: return "shape error";
    case MR_ERR_RANGE: return "out of range";
    case MR_ERR_OOM: return "out of memory";
    case MR_ERR_UNSUPPORTED: return "unsupported";
    case MR_ERR_BACKEND: return "backend error";
    case MR_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}

mr_status mr_fail(mr_error *err, mr_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void mr_error_prefix(mr_error *err, const char *fmt, ...)
{
    if (!err) return;
    char prefix[MR_ERROR_MSG_LEN], old[MR_ERROR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%.*s: %.*s", 400, prefix, MR_ERROR_MSG_LEN - 410, old);
}
