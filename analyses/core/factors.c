/*
 * factors.c — recipes taken apart into comparable factors (factors.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "factors.h"

void an_factors_of(const fp8_recipe *r0, fp8_role role, an_factors *f)
{
    memset(f, 0, sizeof *f);
    fp8_recipe r = *r0;
    fp8_recipe_for_role(&r, role); /* the weights' tile of a block recipe */
    const fp8_format *fmt = fp8_recipe_format(&r, role);
    snprintf(f->format, sizeof f->format, "%s", fmt ? fmt->name : "?");
    f->bits = fmt ? fmt->bits : 8;
    f->eps = r.eps;
    snprintf(f->enc, sizeof f->enc, "%s", r.pow2 ? "pow2" : "fp32");
    snprintf(f->gran, sizeof f->gran, "tensor");
    switch (r.kind) {
    case FP8_RECIPE_NONE:
        f->timing = 0;
        break;
    case FP8_RECIPE_DELAYED:
        f->timing = 1;
        snprintf(f->delayed, sizeof f->delayed, "h=%d,%s,m=%d%s", r.history_len, r.algo_most_recent ? "most_recent" : "max",
                 r.margin, r.finite_amax ? ",finite_amax" : "");
        break;
    case FP8_RECIPE_CURRENT:
        f->timing = 2;
        break;
    case FP8_RECIPE_ROWWISE:
        f->timing = 2;
        snprintf(f->gran, sizeof f->gran, "row");
        break;
    case FP8_RECIPE_COLWISE:
        f->timing = 2;
        snprintf(f->gran, sizeof f->gran, "col");
        break;
    case FP8_RECIPE_BLOCK:
        f->timing = 2;
        /* transposed: the transpose is tiled, i.e. CxR tiles of the tensor */
        if (r.transposed)
            snprintf(f->gran, sizeof f->gran, "%dx%d", r.block_cols, r.block_rows);
        else
            snprintf(f->gran, sizeof f->gran, "%dx%d", r.block_rows, r.block_cols);
        snprintf(f->enc, sizeof f->enc, "%s", r.ue8m0 ? "ue8m0" : r.pow2 ? "pow2" : "fp32");
        if (r.block_delayed) { /* delayed scaling at block granularity */
            f->timing = 1;
            snprintf(f->delayed, sizeof f->delayed, "h=%d,%s,m=%d", r.history_len,
                     r.algo_most_recent ? "most_recent" : "max", r.margin);
        }
        break;
    case FP8_RECIPE_MX: {
        static const char *enc[] = {"e8m0-floor", "e8m0-ceil", "ue8m0", "e8m0-even"};
        f->timing = 2;
        snprintf(f->gran, sizeof f->gran, "1x%d", r.group);
        snprintf(f->enc, sizeof f->enc, "%s", enc[r.mx_round]);
        f->eps = 0;
        break;
    }
    case FP8_RECIPE_NVFP4:
        f->timing = 2;
        if (r.tile2d) /* weights=RxC on the weight role: 2D tiles */
            snprintf(f->gran, sizeof f->gran, "%dx%d", r.wblock_rows, r.wblock_cols);
        else
            snprintf(f->gran, sizeof f->gran, "1x%d", r.group);
        snprintf(f->enc, sizeof f->enc, "e4m3x2");
        f->eps = 0;
        break;
    }
    size_t n = 0;
    if (r.cast.overflow == FP8_NO_SATURATE)
        n += (size_t)snprintf(f->cast + n, sizeof f->cast - n, "%snosat", n ? "," : "");
    if (r.cast.round == FP8_ROUND_ZERO && n < sizeof f->cast)
        n += (size_t)snprintf(f->cast + n, sizeof f->cast - n, "%sround=zero", n ? "," : "");
    if (r.cast.round == FP8_ROUND_STOCHASTIC && n < sizeof f->cast)
        n += (size_t)snprintf(f->cast + n, sizeof f->cast - n, "%sstochastic", n ? "," : "");
    /* sr_grad shows as stochastic on the gradient role (fp8_recipe_for_role) */
    if (r.rht_active && n < sizeof f->cast)
        n += (size_t)snprintf(f->cast + n, sizeof f->cast - n, "%srht", n ? "," : "");
    if (r.torchao && n < sizeof f->cast)
        n += (size_t)snprintf(f->cast + n, sizeof f->cast - n, "%storchao", n ? "," : "");
    /* Smooth SwiGLU evaluated as a shadow: the cast of a smoothed tensor */
    if (r.smooth && n < sizeof f->cast)
        snprintf(f->cast + n, sizeof f->cast - n, "%s%s", n ? "," : "", r.smooth == 2 ? "smooth=fold" : "smooth");
}

static int differs(an_factor k, const an_factors *a, const an_factors *b)
{
    switch (k) {
    case AN_F_FORMAT:
        return strcmp(a->format, b->format) != 0;
    case AN_F_TIMING:
        return a->timing != b->timing;
    case AN_F_GRANULARITY:
        return strcmp(a->gran, b->gran) != 0;
    case AN_F_ENCODING:
        return strcmp(a->enc, b->enc) != 0;
    case AN_F_FLOOR:
        return a->eps != b->eps;
    case AN_F_DELAYED:
        /* only between two delayed recipes: a timing change brings its own */
        return a->timing == 1 && b->timing == 1 && strcmp(a->delayed, b->delayed) != 0;
    case AN_F_CAST:
        return strcmp(a->cast, b->cast) != 0;
    default:
        return 0;
    }
}

unsigned an_factors_diff(const an_factors *a, const an_factors *b)
{
    unsigned m = 0;
    for (int k = 0; k < AN_NFACTOR; k++)
        if (differs((an_factor)k, a, b))
            m |= 1u << k;
    return m;
}

int an_factors_equal(const an_factors *a, const an_factors *b)
{
    for (int k = 0; k < AN_NFACTOR; k++)
        if (differs((an_factor)k, a, b))
            return 0;
    return 1;
}

int an_factors_cmp(const an_factors *a, const an_factors *b)
{
    int c;
    if ((c = strcmp(a->format, b->format)) != 0)
        return c;
    if (a->timing != b->timing)
        return a->timing < b->timing ? -1 : 1;
    if ((c = strcmp(a->gran, b->gran)) != 0 || (c = strcmp(a->enc, b->enc)) != 0)
        return c;
    if (a->eps != b->eps)
        return a->eps < b->eps ? -1 : 1;
    /* the delayed settings count only between two delayed recipes, and
     * then timing is 1 on both */
    if (a->timing == 1 && (c = strcmp(a->delayed, b->delayed)) != 0)
        return c;
    return strcmp(a->cast, b->cast);
}

/* options of a cast string ("stochastic,rht") in one and not the other */
static int cast_options_apart(const char *a, const char *b)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        const char *s = pass ? b : a, *other = pass ? a : b;
        while (*s) {
            size_t len = strcspn(s, ",");
            int found = 0;
            for (const char *o = other; *o;) {
                size_t ol = strcspn(o, ",");
                if (ol == len && strncmp(o, s, len) == 0)
                    found = 1;
                o += ol + (o[ol] == ',');
            }
            n += !found;
            s += len + (s[len] == ',');
        }
    }
    return n;
}

int an_factors_one(const an_factors *a, const an_factors *b)
{
    if (cast_options_apart(a->cast, b->cast) > 1) /* one cast option at a time */
        return -1;
    int which = -1;
    for (int k = 0; k < AN_NFACTOR; k++)
        if (differs((an_factor)k, a, b)) {
            if (which >= 0)
                return -1;
            which = k;
        }
    return which;
}

static int ebits(const char *fmt)
{
    int e = 0, m = 0;
    if (sscanf(fmt, "e%dm%d", &e, &m) == 2)
        return e;
    return 0;
}

/* elements per scale group, larger = coarser */
static double coarseness(const char *g)
{
    int r = 0, c = 0;
    if (strcmp(g, "tensor") == 0)
        return 1e18;
    if (strcmp(g, "row") == 0 || strcmp(g, "col") == 0)
        return 1e9;
    if (sscanf(g, "%dx%d", &r, &c) == 2)
        return (double)r * (double)c;
    return 0;
}

static int enc_rank(const char *e)
{
    static const char *order[] = {"fp32", "pow2", "ue8m0", "e8m0-floor", "e8m0-ceil", "e8m0-even", "e4m3x2"};
    for (int i = 0; i < 7; i++)
        if (strcmp(e, order[i]) == 0)
            return i;
    return 7;
}

int an_factors_from_first(an_factor k, const an_factors *a, const an_factors *b)
{
    switch (k) {
    case AN_F_FORMAT:
        if (ebits(a->format) != ebits(b->format))
            return ebits(a->format) > ebits(b->format); /* the wider range first */
        return strcmp(a->format, b->format) <= 0;
    case AN_F_TIMING:
        return a->timing <= b->timing;
    case AN_F_GRANULARITY:
        return coarseness(a->gran) >= coarseness(b->gran);
    case AN_F_ENCODING:
        return enc_rank(a->enc) <= enc_rank(b->enc);
    case AN_F_FLOOR:
        return a->eps <= b->eps;
    case AN_F_DELAYED: {
        int ha = 0, hb = 0, ma = 0, mb = 0;
        sscanf(a->delayed, "h=%d", &ha);
        sscanf(b->delayed, "h=%d", &hb);
        const char *pa = strstr(a->delayed, "m="), *pb = strstr(b->delayed, "m=");
        if (pa)
            ma = (int)strtol(pa + 2, NULL, 10);
        if (pb)
            mb = (int)strtol(pb + 2, NULL, 10);
        if (ha != hb)
            return ha > hb; /* TE's default 1024 first */
        if (ma != mb)
            return ma < mb;
        return strcmp(a->delayed, b->delayed) <= 0;
    }
    case AN_F_CAST: /* fewer options (nearest-even, saturating, no transform) first */
        if (strlen(a->cast) != strlen(b->cast))
            return strlen(a->cast) < strlen(b->cast);
        return strcmp(a->cast, b->cast) <= 0;
    default:
        return 1;
    }
}

const char *an_factor_name(an_factor k)
{
    static const char *n[] = {"format", "timing", "granularity", "scale_encoding", "amax_floor", "delayed_settings", "cast_options"};
    return (unsigned)k < AN_NFACTOR ? n[k] : "?";
}

const char *an_factor_level(an_factor k, const an_factors *f, char *buf, size_t n)
{
    static const char *timing[] = {"none", "delayed", "current"};
    switch (k) {
    case AN_F_FORMAT:
        snprintf(buf, n, "%s", f->format);
        break;
    case AN_F_TIMING:
        snprintf(buf, n, "%s", timing[f->timing]);
        break;
    case AN_F_GRANULARITY:
        snprintf(buf, n, "%s", f->gran);
        break;
    case AN_F_ENCODING:
        snprintf(buf, n, "%s", f->enc);
        break;
    case AN_F_FLOOR:
        snprintf(buf, n, "eps=%.3g", f->eps);
        break;
    case AN_F_DELAYED:
        snprintf(buf, n, "%s", f->delayed);
        break;
    case AN_F_CAST:
        snprintf(buf, n, "%s", f->cast[0] ? f->cast : "nearest");
        break;
    default:
        snprintf(buf, n, "?");
    }
    return buf;
}

const char *an_factors_label(const an_factors *f, char *buf, size_t n)
{
    size_t l = 0;
    int mx = strcmp(f->gran, "1x32") == 0 && (strcmp(f->enc, "ue8m0") == 0 || strncmp(f->enc, "e8m0-", 5) == 0);
    if (strcmp(f->enc, "e4m3x2") == 0 && strcmp(f->format, "e2m1") == 0 && strcmp(f->gran, "1x16") == 0)
        l = (size_t)snprintf(buf, n, "nvfp4");
    else if (strcmp(f->enc, "e4m3x2") == 0 && strcmp(f->format, "e2m1") == 0)
        l = (size_t)snprintf(buf, n, "nvfp4 %s", f->gran);
    else if (mx && f->eps == 0) {
        const char *name = !strcmp(f->format, "e4m3")   ? "mxfp8"
                           : !strcmp(f->format, "e5m2") ? "mxfp8-e5m2"
                           : !strcmp(f->format, "e2m3") ? "mxfp6"
                           : !strcmp(f->format, "e3m2") ? "mxfp6-e3m2"
                           : !strcmp(f->format, "e2m1") ? "mxfp4"
                                                        : f->format;
        const char *rule = !strcmp(f->enc, "ue8m0") ? "rceil" : f->enc + 5;
        l = (size_t)snprintf(buf, n, "%s %s", name, rule);
    } else if (f->timing == 0)
        l = (size_t)snprintf(buf, n, "%s none", f->format);
    else if (f->timing == 1 && strcmp(f->gran, "tensor"))
        l = (size_t)snprintf(buf, n, "%s block %s delayed %s%s%s", f->format, f->gran, f->delayed,
                             strcmp(f->enc, "fp32") ? " " : "", strcmp(f->enc, "fp32") ? f->enc : "");
    else if (f->timing == 1)
        l = (size_t)snprintf(buf, n, "%s delayed %s%s", f->format, f->delayed, strcmp(f->enc, "fp32") ? " pow2" : "");
    else if (!strcmp(f->gran, "tensor"))
        l = (size_t)snprintf(buf, n, "%s current%s%s", f->format, strcmp(f->enc, "fp32") ? " " : "",
                             strcmp(f->enc, "fp32") ? f->enc : "");
    else if (!strcmp(f->gran, "row") || !strcmp(f->gran, "col"))
        l = (size_t)snprintf(buf, n, "%s %swise%s%s", f->format, f->gran, strcmp(f->enc, "fp32") ? " " : "",
                             strcmp(f->enc, "fp32") ? f->enc : "");
    else
        l = (size_t)snprintf(buf, n, "%s block %s%s%s", f->format, f->gran, strcmp(f->enc, "fp32") ? " " : "",
                             strcmp(f->enc, "fp32") ? f->enc : "");
    if (f->eps > 0 && l < n)
        l += (size_t)snprintf(buf + l, n - l, " eps=%.3g", f->eps);
    if (f->cast[0] && l < n)
        snprintf(buf + l, n - l, " (%s)", f->cast);
    return buf;
}
