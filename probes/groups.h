/*
 * groups.h — internal: the named communicators of a multi-rank probe run
 * (probes/mpi.c) as probe.c sees them, without MPI's header (probes/groups.c).
 */
#ifndef FP8_PROBE_GROUPS_H
#define FP8_PROBE_GROUPS_H

#include <stdint.h>

#include "hash.h" /* fp8__fnv1a: tags of a collective */

#include "fp8_probe.h"

typedef struct fp8__groups fp8__groups;

/* The groups as the core library sees them: names, and the reduction that
 * the MPI layer (libfp8prof_mpi, probes/mpi.c) fills in, so that
 * libfp8prof itself never links MPI.  "world" is group 0. */
#define FP8__GROUPS_CAP 9
struct fp8__groups {
    int n;
    char name[FP8__GROUPS_CAP][24];
    int (*max)(fp8__groups *g, int gi, uint32_t tag, float *buf, int n);
    void (*release)(fp8__groups *g);
};

/* The index of the group registered under name, -1 when there is none. */
int fp8__groups_find(const fp8__groups *g, const char *name);
int fp8__groups_count(const fp8__groups *g);
const char *fp8__groups_name(const fp8__groups *g, int gi);

/* buf[0..n) = its elementwise max over the ranks of group gi, in place.
 * Every rank of the group calls it at the same point with the same n and
 * tag (a fingerprint of what is reduced); when they differ, no rank's buf
 * changes and each returns FP8_EINVAL saying so (instead of a hang, or a
 * max taken over different tensors). */
int fp8__groups_max(fp8__groups *g, int gi, uint32_t tag, float *buf, int n);

void fp8__groups_free(fp8__groups *g);

/* probe.c: hand the groups to a run (it frees them at close). */
void fp8__probe_run_set_groups(fp8_probe_run *run, fp8__groups *g);


#endif
