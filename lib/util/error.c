/*
 * error.c — thread-local error messages and the replaceable handler.
 * Invariant: nothing here allocates, exits or aborts.
 */
#include <stdarg.h>
#include <stdio.h>

#include "fp8_error.h"

static _Thread_local char last_message[512];
static fp8_error_handler handler;

int fp8_error_set(fp8_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    if (handler)
        handler(status, last_message);
    return (int)status;
}

const char *fp8_error_message(void) { return last_message; }

fp8_error_handler fp8_error_set_handler(fp8_error_handler h)
{
    fp8_error_handler old = handler;
    handler = h;
    return old;
}

const char *fp8_status_name(int status)
{
    switch (status) {
    case FP8_OK: return "ok";
    case FP8_EINVAL: return "invalid argument";
    case FP8_ENOMEM: return "out of memory";
    case FP8_EIO: return "i/o error";
    case FP8_ERANGE: return "out of range";
    case FP8_EUNSUPPORTED: return "unsupported";
    default: return "unknown status";
    }
}
