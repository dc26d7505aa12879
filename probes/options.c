/*
 * options.c — the probe options (fp8_probe.h): their defaults and setting
 * one by name from a string (the C API's callers, the Python package, the
 * command line).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_error.h"
#include "fp8_probe.h"

fp8_probe_options fp8_probe_defaults(void)
{
    fp8_probe_options o;
    memset(&o, 0, sizeof o);
    o.every = 1;
    o.start = 0;
    o.end = -1;
    o.exp_hist = 1;
    o.flush_steps = 10;
    o.flush_seconds = 5.0;
    o.snapshot_pattern = NULL;
    o.snapshot_every = 100;
    o.snapshot_pairs = 0;
    o.series = 1;
    o.block_amax_every = 0;
    o.threads = 1;
    o.background = 0;
    o.background_mb = 256;
    return o;
}

size_t fp8_probe_options_size(void) { return sizeof(fp8_probe_options); }

void fp8_probe_defaults_into(fp8_probe_options *o)
{
    if (o)
        *o = fp8_probe_defaults();
}

int fp8_probe_option_set(fp8_probe_options *o, const char *key, const char *value)
{
    if (!o || !key || !value)
        return FP8_ERROR(FP8_EINVAL, "probe option: NULL argument");
    if (strcmp(key, "snapshot_pattern") == 0) {
        o->snapshot_pattern = value;
        return FP8_OK;
    }
    if (strcmp(key, "run_id") == 0) {
        o->run_id = value;
        return FP8_OK;
    }
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || v != v)
        return FP8_ERROR(FP8_EINVAL, "probe option %s: '%s' is not a number", key, value);
    static const struct {
        const char *k;
        size_t off;
        int kind; /* 0 int64, 1 int, 2 double */
    } keys[] = {
        {"every", offsetof(fp8_probe_options, every), 0},
        {"start", offsetof(fp8_probe_options, start), 0},
        {"end", offsetof(fp8_probe_options, end), 0},
        {"exp_hist", offsetof(fp8_probe_options, exp_hist), 1},
        {"flush_steps", offsetof(fp8_probe_options, flush_steps), 0},
        {"flush_seconds", offsetof(fp8_probe_options, flush_seconds), 2},
        {"snapshot_every", offsetof(fp8_probe_options, snapshot_every), 0},
        {"snapshot_pairs", offsetof(fp8_probe_options, snapshot_pairs), 1},
        {"snapshot_codes", offsetof(fp8_probe_options, snapshot_codes), 1},
        {"series", offsetof(fp8_probe_options, series), 1},
        {"block_amax_every", offsetof(fp8_probe_options, block_amax_every), 0},
        {"threads", offsetof(fp8_probe_options, threads), 1},
        {"background", offsetof(fp8_probe_options, background), 1},
        {"background_mb", offsetof(fp8_probe_options, background_mb), 0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i].k) == 0) {
            char *p = (char *)o + keys[i].off;
            if (keys[i].kind != 2 && (v != floor(v) || fabs(v) > 9e18))
                return FP8_ERROR(FP8_EINVAL, "probe option %s: '%s' is not an integer", key, value);
            if (keys[i].kind == 1 && fabs(v) > 2147483647.0)
                return FP8_ERROR(FP8_EINVAL, "probe option %s: '%s' is out of range", key, value);
            if (keys[i].kind == 0) {
                int64_t x = (int64_t)v;
                memcpy(p, &x, sizeof x);
            } else if (keys[i].kind == 1) {
                int x = (int)v;
                memcpy(p, &x, sizeof x);
            } else {
                memcpy(p, &v, sizeof v);
            }
            return FP8_OK;
        }
    return FP8_ERROR(FP8_EINVAL, "probe option: unknown key '%s' (every, start, end, exp_hist, flush_steps, "
                                 "flush_seconds, snapshot_pattern, snapshot_every, snapshot_pairs, snapshot_codes, "
                                 "series, block_amax_every, threads, background, background_mb, run_id)", key);
}
