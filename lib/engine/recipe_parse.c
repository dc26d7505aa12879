/*
 * recipe_parse.c — recipe specs: "FORMAT:KIND[,option...]" parsed against
 * one table of options (docs/recipes.md lists the same), checked, and put
 * in canonical form (the spec every record stores).  The scale rules and
 * the state: recipe.c.
 */
#include <errno.h>
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_recipe.h"
#include "recipe_internal.h"

/* ---- parsing ---------------------------------------------------------------- */

static int bad(const char *spec, const char *fmt, const char *part)
{
    char what[200];
    snprintf(what, sizeof what, fmt, part);
    return FP8_ERROR(FP8_EINVAL, "recipe '%s': %s", spec, what);
}

static int set_format(fp8_format *dst, const char *name)
{
    fp8_format scratch;
    const fp8_format *f = fp8_format_find(name, &scratch);
    if (!f)
        return -1;
    *dst = *f;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* "RxC" into *rows, *cols (positive integers up to 2^20); what names the
 * value in messages ("block shape", "weights tile"), eg an example. */
static int parse_tile(const char *spec, char *val, const char *what, const char *eg, int *rows, int *cols)
{
    char msg[120];
    char *x = strchr(val, 'x');
    if (!x) {
        snprintf(msg, sizeof msg, "%s '%%s' is not RxC (e.g. %s)", what, eg);
        return bad(spec, msg, val);
    }
    *x = 0;
    if (parse_int(val, 1, 1 << 20, rows) || parse_int(x + 1, 1, 1 << 20, cols)) {
        snprintf(msg, sizeof msg, "%s is not RxC with positive integers (got '%%s')", what);
        return bad(spec, msg, val);
    }
    return 0;
}

/* ---- the options: one table (docs/recipes.md lists the same) ---------------- */

#define K(k) (1u << (k))
#define K_ALL 0xFFFFu
#define K_DELAYED K(FP8_RECIPE_DELAYED)
#define K_CURRENTS (K(FP8_RECIPE_CURRENT) | K(FP8_RECIPE_ROWWISE) | K(FP8_RECIPE_COLWISE))
#define K_BLOCK K(FP8_RECIPE_BLOCK)
#define K_MX K(FP8_RECIPE_MX)
#define K_NVFP4 K(FP8_RECIPE_NVFP4)

typedef enum { VAL_NONE, VAL_NEEDED, VAL_OPTIONAL } val_kind;

/* one option: its names, the kinds of recipe it applies to, whether it
 * takes a value, and what it sets (val: the value or NULL; the table row
 * for its argument) */
typedef struct opt_row opt_row;
struct opt_row {
    const char *name[3];
    unsigned kinds;
    val_kind value;
    int (*set)(const char *spec, fp8_recipe *r, char *val, const opt_row *o);
    int arg;         /* the setter's constant (a mode, a flag value)     */
    int delayed_opt; /* one of block=RxC:delayed's history, algo, margin */
};

static int set_overflow(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)spec, (void)val;
    r->cast.overflow = (fp8_overflow)o->arg;
    return 0;
}

static int set_round(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (strcmp(val, "nearest") == 0)
        r->cast.round = FP8_ROUND_NEAREST;
    else if (strcmp(val, "zero") == 0)
        r->cast.round = FP8_ROUND_ZERO;
    else if (strcmp(val, "stochastic") == 0)
        r->cast.round = FP8_ROUND_STOCHASTIC;
    else
        return bad(spec, "unknown rounding '%s' (nearest, zero, stochastic)", val);
    return 0;
}

static int set_seed(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    char *end;
    r->cast.seed = strtoull(val, &end, 10);
    if (*end || *val == '-')
        return bad(spec, "seed '%s' is not an unsigned integer", val);
    return 0;
}

static int set_smooth(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (!val || strcmp(val, "published") == 0)
        r->smooth = 1;
    else if (strcmp(val, "fold") == 0)
        r->smooth = 2;
    else
        return bad(spec, "smooth '%s' is not published (the default) or fold", val);
    return 0;
}

/* flags: arg picks which (and what the flag clears) */
enum { F_BLOCK_DELAYED, F_FINITE_AMAX, F_TORCHAO, F_POW2, F_SR_GRAD, F_UE8M0, F_FP32, F_TRANSPOSED };

static int set_flag(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)spec, (void)val;
    switch (o->arg) {
    case F_BLOCK_DELAYED: r->block_delayed = 1; break;
    case F_FINITE_AMAX: r->finite_amax = 1; break;
    case F_TORCHAO: r->torchao = 1; break;
    case F_POW2: r->pow2 = 1, r->ue8m0 = 0; break;
    case F_SR_GRAD: r->sr_grad = 1; break;
    case F_UE8M0: r->ue8m0 = 1, r->pow2 = 0; break;
    case F_FP32: r->ue8m0 = r->pow2 = 0; break;
    default: r->transposed = 1; break;
    }
    return 0;
}

static int set_history(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (parse_int(val, 1, 1 << 20, &r->history_len))
        return bad(spec, "history '%s' is not an integer in 1..1048576", val);
    return 0;
}

static int set_algo(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (strcmp(val, "max") == 0)
        r->algo_most_recent = 0;
    else if (strcmp(val, "most_recent") == 0)
        r->algo_most_recent = 1;
    else
        return bad(spec, "algo '%s' is not max or most_recent", val);
    return 0;
}

static int set_margin(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (parse_int(val, 0, 64, &r->margin))
        return bad(spec, "margin '%s' is not an integer in 0..64", val);
    return 0;
}

static int set_eps(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (parse_double(val, &r->eps) || r->eps < 0)
        return bad(spec, "eps '%s' is not a number >= 0", val);
    return 0;
}

static int set_reduce(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (!fp8_group_name_ok(val))
        return bad(spec, "reduce group '%s' is not a name of 1..23 letters, digits, '_' or '-'", val);
    memcpy(r->reduce, val, strlen(val) + 1);
    return 0;
}

static int set_rht(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    r->rht = 1;
    r->rht_seed = 0;
    if (val) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (end == val || *end || errno || val[0] == '-')
            return bad(spec, "rht seed '%s' is not a non-negative integer", val);
        r->rht_seed = v;
    }
    return 0;
}

static int set_weights(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    return parse_tile(spec, val, "weights tile", o->arg ? "16x16" : "128x128", &r->wblock_rows, &r->wblock_cols);
}

static int set_mx_round(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)spec, (void)val;
    r->mx_round = (fp8_mx_round)o->arg;
    return 0;
}

static int set_elem(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (set_format(&r->fwd, val))
        return bad(spec, "unknown element format '%s'", val);
    r->bwd = r->fwd;
    return 0;
}

static int set_group(const char *spec, fp8_recipe *r, char *val, const opt_row *o)
{
    (void)o;
    if (parse_int(val, 1, 1 << 16, &r->group))
        return bad(spec, "group '%s' is not an integer in 1..65536", val);
    return 0;
}

/* The first row whose name and kinds match an option is its meaning. */
static const opt_row options[] = {
    /* the element cast, any kind */
    {{"nosat", "no-saturate"}, K_ALL, VAL_NONE, set_overflow, FP8_NO_SATURATE, 0},
    {{"sat", "saturate"}, K_ALL, VAL_NONE, set_overflow, FP8_SATURATE, 0},
    {{"round"}, K_ALL, VAL_NEEDED, set_round, 0, 0},
    {{"seed"}, K_ALL, VAL_NEEDED, set_seed, 0, 0},
    {{"smooth"}, K_ALL, VAL_OPTIONAL, set_smooth, 0, 0},
    /* the scales */
    {{"delayed"}, K_BLOCK, VAL_NONE, set_flag, F_BLOCK_DELAYED, 0},
    {{"history", "amax_history_len"}, K_DELAYED | K_BLOCK, VAL_NEEDED, set_history, 0, 1},
    {{"algo", "amax_compute_algo"}, K_DELAYED | K_BLOCK, VAL_NEEDED, set_algo, 0, 1},
    {{"margin"}, K_DELAYED | K_BLOCK, VAL_NEEDED, set_margin, 0, 1},
    {{"finite_amax"}, K_DELAYED, VAL_NONE, set_flag, F_FINITE_AMAX, 0},
    {{"eps", "epsilon", "amax_floor"}, K_CURRENTS | K_BLOCK, VAL_NEEDED, set_eps, 0, 0},
    {{"reduce"}, K_DELAYED | K(FP8_RECIPE_CURRENT), VAL_NEEDED, set_reduce, 0, 0},
    {{"torchao"}, K_CURRENTS, VAL_NONE, set_flag, F_TORCHAO, 0},
    {{"pow2"}, K_DELAYED | K_CURRENTS | K_BLOCK, VAL_NONE, set_flag, F_POW2, 0},
    {{"sr_grad"}, K_NVFP4, VAL_NONE, set_flag, F_SR_GRAD, 0},
    {{"rht"}, K_NVFP4, VAL_OPTIONAL, set_rht, 0, 0},
    {{"weights"}, K_NVFP4, VAL_NEEDED, set_weights, 1, 0},
    {{"ue8m0"}, K_BLOCK, VAL_NONE, set_flag, F_UE8M0, 0},
    {{"fp32"}, K_BLOCK, VAL_NONE, set_flag, F_FP32, 0},
    {{"weights"}, K_BLOCK, VAL_NEEDED, set_weights, 0, 0},
    {{"transposed", "colwise"}, K_BLOCK, VAL_NONE, set_flag, F_TRANSPOSED, 0},
    {{"floor"}, K_MX, VAL_NONE, set_mx_round, FP8_MX_FLOOR, 0},
    {{"ceil"}, K_MX, VAL_NONE, set_mx_round, FP8_MX_CEIL, 0},
    {{"rceil"}, K_MX, VAL_NONE, set_mx_round, FP8_MX_RCEIL, 0},
    {{"even"}, K_MX, VAL_NONE, set_mx_round, FP8_MX_EVEN, 0},
    {{"elem"}, K_MX, VAL_NEEDED, set_elem, 0, 0},
    {{"group"}, K_MX | K_NVFP4, VAL_NEEDED, set_group, 0, 0},
};

static const opt_row *find_option(const char *key, fp8_recipe_kind kind)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (options[i].kinds & K(kind))
            for (int a = 0; a < 3 && options[i].name[a]; a++)
                if (strcmp(key, options[i].name[a]) == 0)
                    return &options[i];
    return NULL;
}

/* One option item "key" or "key=value" for the recipe being built;
 * *delayed_opt |= it is one of history, algo, margin. */
static int apply_option(const char *spec, fp8_recipe *r, char *item, int *delayed_opt)
{
    char *val = strchr(item, '=');
    if (val)
        *val++ = 0;
    const opt_row *o = find_option(item, r->kind);
    if (!o) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown option '%%s' for %s recipes", fp8_recipe_kind_name(r->kind));
        return bad(spec, msg, item);
    }
    if (o->value == VAL_NEEDED && (!val || !*val))
        return bad(spec, "option '%s' needs a value", item);
    if (o->value == VAL_NONE && val)
        return bad(spec, "option '%s' takes no value", item);
    *delayed_opt |= o->delayed_opt;
    return o->set(spec, r, val, o);
}

int fp8_group_name_ok(const char *s)
{
    size_t len = s ? strlen(s) : 0;
    return len && len < sizeof ((fp8_recipe *)0)->reduce &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == len;
}

static void canonical(fp8_recipe *r)
{
    char opts[256] = "";
    size_t n = 0;
#define ADD(...) n += (size_t)snprintf(opts + n, sizeof opts - n, __VA_ARGS__)
    const char *fmt = r->hybrid ? "hybrid" : r->fwd.name;
    switch (r->kind) {
    case FP8_RECIPE_DELAYED:
        ADD("history=%d,algo=%s,margin=%d%s%s", r->history_len, r->algo_most_recent ? "most_recent" : "max", r->margin,
            r->pow2 ? ",pow2" : "", r->finite_amax ? ",finite_amax" : "");
        break;
    case FP8_RECIPE_CURRENT:
    case FP8_RECIPE_ROWWISE:
    case FP8_RECIPE_COLWISE:
        if (r->torchao)
            ADD("torchao%s", r->pow2 ? ",pow2" : "");
        else
            ADD("eps=%.9g%s", r->eps, r->pow2 ? ",pow2" : "");
        break;
    case FP8_RECIPE_BLOCK:
        ADD("eps=%.9g,%s%s", r->eps, r->ue8m0 ? "ue8m0" : r->pow2 ? "pow2" : "fp32", r->transposed ? ",transposed" : "");
        if (r->wblock_rows)
            ADD(",weights=%dx%d", r->wblock_rows, r->wblock_cols);
        if (r->block_delayed)
            ADD(",delayed,history=%d,algo=%s,margin=%d", r->history_len, r->algo_most_recent ? "most_recent" : "max",
                r->margin);
        break;
    case FP8_RECIPE_MX: {
        static const char *modes[] = {"floor", "ceil", "rceil", "even"};
        ADD("%s,group=%d", modes[r->mx_round], r->group);
        break;
    }
    case FP8_RECIPE_NVFP4:
        ADD("group=%d", r->group);
        if (r->wblock_rows)
            ADD(",weights=%dx%d", r->wblock_rows, r->wblock_cols);
        if (r->sr_grad)
            ADD(",sr_grad");
        if (r->rht)
            ADD(",rht=%llu", (unsigned long long)r->rht_seed);
        break;
    default:
        break;
    }
    if (r->reduce[0])
        ADD("%sreduce=%s", n ? "," : "", r->reduce);
    if (r->cast.overflow == FP8_NO_SATURATE)
        ADD("%snosat", n ? "," : "");
    if (r->cast.round == FP8_ROUND_ZERO)
        ADD("%sround=zero", n ? "," : "");
    if (r->cast.round == FP8_ROUND_STOCHASTIC)
        ADD("%sround=stochastic,seed=%llu", n ? "," : "", (unsigned long long)r->cast.seed);
    if (r->smooth)
        ADD("%ssmooth%s", n ? "," : "", r->smooth == 2 ? "=fold" : "");
#undef ADD
    if (r->kind == FP8_RECIPE_NVFP4)
        snprintf(r->spec, sizeof r->spec, "nvfp4%s%s", n ? ":" : "", opts);
    else if (r->kind == FP8_RECIPE_BLOCK)
        snprintf(r->spec, sizeof r->spec, "%s:block=%dx%d:%s", fmt, r->block_rows, r->block_cols, opts);
    else if (r->kind == FP8_RECIPE_MX)
        snprintf(r->spec, sizeof r->spec, "%s:mx:%s", fmt, opts);
    else
        snprintf(r->spec, sizeof r->spec, "%s:%s%s%s", fmt, fp8_recipe_kind_name(r->kind), n ? ":" : "", opts);
}

static int parse_spec(const char *spec, fp8_recipe *out)
{
    if (!spec || !*spec)
        return FP8_ERROR(FP8_EINVAL, "empty recipe spec");
    if (strlen(spec) >= 256)
        return FP8_ERROR(FP8_EINVAL, "recipe spec longer than 255 characters");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    fp8_recipe r;
    memset(&r, 0, sizeof r);
    r.history_len = 1024;
    r.group = 32;
    r.block_rows = 1;
    r.block_cols = 128;

    /* split on ':' */
    char *parts[16];
    int np = 0;
    for (char *p = buf; np < 16;) {
        parts[np++] = p;
        char *c = strchr(p, ':');
        if (!c)
            break;
        *c = 0;
        p = c + 1;
    }
    for (int i = 0; i < np; i++)
        if (!*parts[i])
            return bad(spec, "%sempty part between ':'", "");
    int next = 1;
    const char *head = parts[0];
    if (strcmp(head, "mxfp8") == 0 || strcmp(head, "mxfp6") == 0 || strcmp(head, "mxfp4") == 0) {
        r.kind = FP8_RECIPE_MX;
        set_format(&r.fwd, head[4] == '8' ? "e4m3" : head[4] == '6' ? "e2m3" : "e2m1");
        r.bwd = r.fwd;
    } else if (strcmp(head, "nvfp4") == 0) {
        r.kind = FP8_RECIPE_NVFP4;
        r.group = 16;
        set_format(&r.fwd, "e2m1");
        r.bwd = r.fwd;
    } else {
        if (strcmp(head, "hybrid") == 0) {
            r.hybrid = 1;
            set_format(&r.fwd, "e4m3");
            set_format(&r.bwd, "e5m2");
        } else if (set_format(&r.fwd, head) != 0) {
            return bad(spec, "unknown format '%s' (e4m3, e5m2, hybrid, mxfp8, mxfp6, mxfp4, nvfp4, any eXmY)", head);
        } else {
            r.bwd = r.fwd;
        }
        if (np < 2)
            return bad(spec, "missing kind after '%s' (delayed, current, rowwise, colwise, block=RxC, mx, none)", head);
        char *kind = parts[1];
        char *kv = strchr(kind, '=');
        if (kv)
            *kv++ = 0;
        static const struct { const char *n; fp8_recipe_kind k; } kinds[] = {
            {"none", FP8_RECIPE_NONE},       {"delayed", FP8_RECIPE_DELAYED}, {"current", FP8_RECIPE_CURRENT},
            {"tensorwise", FP8_RECIPE_CURRENT}, {"rowwise", FP8_RECIPE_ROWWISE}, {"colwise", FP8_RECIPE_COLWISE},
            {"block", FP8_RECIPE_BLOCK},     {"mx", FP8_RECIPE_MX},
        };
        int found = 0;
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (strcmp(kind, kinds[i].n) == 0) {
                r.kind = kinds[i].k;
                found = 1;
            }
        if (!found)
            return bad(spec, "unknown kind '%s' (delayed, current, rowwise, colwise, block=RxC, mx, none)", kind);
        if (kv && r.kind != FP8_RECIPE_BLOCK)
            return bad(spec, "kind '%s' takes no '=' value", kind);
        if (r.kind == FP8_RECIPE_BLOCK) {
            r.eps = 1e-4; /* DeepSeek's amax floor */
            if (kv && parse_tile(spec, kv, "block shape", "1x128, 128x128", &r.block_rows, &r.block_cols))
                return FP8_EINVAL;
        }
        if (r.kind == FP8_RECIPE_MX && (r.fwd.bits > 8 || r.fwd.kind == FP8_KIND_E8M0))
            return bad(spec, "MX elements must be an 8-bit-or-narrower signed format, not '%s'", r.fwd.name);
        next = 2;
    }
    if (r.kind == FP8_RECIPE_NONE || r.kind == FP8_RECIPE_DELAYED || r.kind == FP8_RECIPE_CURRENT ||
        r.kind == FP8_RECIPE_ROWWISE || r.kind == FP8_RECIPE_COLWISE)
        r.eps = 0.0;
    int delayed_opts = 0; /* history, algo or margin given */
    for (int i = next; i < np; i++) {
        char *item = parts[i];
        while (item) {
            char *comma = strchr(item, ',');
            if (comma)
                *comma = 0;
            if (!*item)
                return bad(spec, "%sempty option", "");
            int st = apply_option(spec, &r, item, &delayed_opts);
            if (st)
                return st;
            item = comma ? comma + 1 : NULL;
        }
    }
    if (r.kind == FP8_RECIPE_BLOCK && delayed_opts && !r.block_delayed)
        return bad(spec, "%shistory, algo and margin need `delayed` (block=RxC:delayed,history=H,...)", "");
    canonical(&r);
    *out = r;
    return FP8_OK;
}

/* Numbers in a spec are read (strtod) and printed (%.9g) in the default
 * floating-point environment: under a host's FE_UPWARD 1e-4 would otherwise
 * read as another double and print as "0.000100000001", and the recipe's
 * name, its identity in run files, would depend on the caller. */
int fp8_recipe_parse(const char *spec, fp8_recipe *out)
{
    fenv_t host;
    int saved = fegetenv(&host) == 0;
    if (saved)
        fesetenv(FE_DFL_ENV);
    int st = parse_spec(spec, out);
    if (saved)
        fesetenv(&host);
    return st;
}

/* a spec and a role by name, parsed into a new state (the bindings' way in) */
fp8_recipe_state *fp8_recipe_state_new(const char *spec, const char *role)
{
    fp8_recipe r;
    fp8_role ro = FP8_ROLE_ACTIVATION;
    if (role && fp8_role_parse(role, &ro) != FP8_OK)
        return NULL;
    if (fp8_recipe_parse(spec, &r) != FP8_OK)
        return NULL;
    return fp8_recipe_state_alloc(&r, ro);
}
