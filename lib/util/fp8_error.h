/*
 * fp8_error.h — status codes and the one place errors go.
 *
 * Every fallible function returns an fp8_status (0 = FP8_OK).  The failing
 * function records a message with FP8_ERROR(); the message stays readable in
 * the calling thread with fp8_error_message() until the next error.  The
 * handler, called once per error, is replaceable; the default does nothing
 * more than keep the message, so a training loop is never aborted.
 */
#ifndef FP8_ERROR_H
#define FP8_ERROR_H

typedef enum {
    FP8_OK = 0,
    FP8_EINVAL,   /* bad argument or input                                */
    FP8_ENOMEM,   /* allocation failed                                    */
    FP8_EIO,      /* file or storage failure                              */
    FP8_ERANGE,   /* value out of the accepted range                      */
    FP8_EUNSUPPORTED
} fp8_status;

typedef void (*fp8_error_handler)(fp8_status status, const char *message);

/* Record message (printf-style) for the calling thread, call the handler,
 * return status.  Use through FP8_ERROR so every error has one breakpoint. */
int fp8_error_set(fp8_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define FP8_ERROR(status, ...) fp8_error_set((status), __VA_ARGS__)

/* Last message recorded in this thread ("" when none). */
const char *fp8_error_message(void);

/* Replace the handler (NULL restores the default); returns the old one. */
fp8_error_handler fp8_error_set_handler(fp8_error_handler h);

const char *fp8_status_name(int status);

#endif
