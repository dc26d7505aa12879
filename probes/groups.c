/*
 * groups.c — the named communicators of a multi-rank run, seen from the
 * core library (groups.h): lookups here, the reduction behind the function
 * pointers probes/mpi.c fills in.  A one-process run has no groups (NULL).
 */
#include <string.h>

#include "fp8_error.h"
#include "groups.h"

int fp8__groups_find(const fp8__groups *g, const char *name)
{
    for (int i = 0; g && i < g->n; i++)
        if (strcmp(g->name[i], name) == 0)
            return i;
    return -1;
}

int fp8__groups_count(const fp8__groups *g) { return g ? g->n : 0; }

const char *fp8__groups_name(const fp8__groups *g, int gi) { return g && gi >= 0 && gi < g->n ? g->name[gi] : ""; }

int fp8__groups_max(fp8__groups *g, int gi, uint32_t tag, float *buf, int n)
{
    if (!g || !g->max || gi < 0 || gi >= g->n || n < 0)
        return FP8_ERROR(FP8_EINVAL, "amax reduction: no group %d", gi);
    return g->max(g, gi, tag, buf, n);
}

void fp8__groups_free(fp8__groups *g)
{
    if (g && g->release)
        g->release(g);
}
