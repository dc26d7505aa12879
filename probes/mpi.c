/*
 * mpi.c — multi-rank probe runs (fp8_probe_mpi.h): per-rank files, the
 * index, and the amax reductions over named communicators (groups.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_error.h"
#include "fp8_probe_mpi.h"
#include "fp8_ranks.h"
#include "fp8_recipe.h"
#include "fp8_store.h"
#include "groups.h"

/* the groups with their communicators (our duplicates; errors return) */
typedef struct {
    fp8__groups g; /* first: a pointer to it is a pointer to this */
    MPI_Comm comm[FP8_PROBE_MAX_GROUPS + 1];
} mpi_groups;
_Static_assert(FP8_PROBE_MAX_GROUPS + 1 <= FP8__GROUPS_CAP, "groups.h holds world and every group");

static MPI_Comm comm_of(fp8__groups *g, int gi) { return ((mpi_groups *)g)->comm[gi]; }

static int mpi_max(fp8__groups *g, int gi, uint32_t tag, float *buf, int n)
{
    /* the fingerprint first: its max and min agree only when every rank
     * reduces the same thing (then all go on; else none does) */
    long long v = ((long long)tag << 20) | (long long)n, mm[2] = {v, -v};
    if (MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_LONG_LONG, MPI_MAX, comm_of(g, gi)) != MPI_SUCCESS)
        return FP8_ERROR(FP8_EIO, "amax reduction over group '%s': MPI_Allreduce failed", g->name[gi]);
    if (mm[0] != -mm[1])
        return FP8_ERROR(FP8_EINVAL,
                         "amax reduction over group '%s': its ranks reduce different tensors or counts at this point "
                         "(declare and cast the same tensors in the same order on every rank); this rank's amax used",
                         g->name[gi]);
    if (n && MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_MAX, comm_of(g, gi)) != MPI_SUCCESS)
        return FP8_ERROR(FP8_EIO, "amax reduction over group '%s': MPI_Allreduce failed", g->name[gi]);
    return FP8_OK;
}

static void mpi_release(fp8__groups *g)
{
    int fin = 0;
    MPI_Finalized(&fin);
    for (int i = 0; i < g->n && !fin; i++)
        MPI_Comm_free(&((mpi_groups *)g)->comm[i]);
    free(g);
}

/* "a,b,c": the world ranks of comm's members, in comm's order */
static void members(MPI_Comm comm, MPI_Comm world, char *out, size_t cap)
{
    MPI_Group gc, gw;
    int n = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_group(comm, &gc);
    MPI_Comm_group(world, &gw);
    int *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    size_t k = 0;
    out[0] = 0;
    if (a && b) {
        for (int i = 0; i < n; i++)
            a[i] = i;
        MPI_Group_translate_ranks(gc, n, a, gw, b);
        for (int i = 0; i < n && k + 12 < cap; i++)
            k += (size_t)snprintf(out + k, cap - k, "%s%d", i ? "," : "", b[i]);
    }
    free(a);
    free(b);
    MPI_Group_free(&gc);
    MPI_Group_free(&gw);
}

/* every rank's ok: the lowest failing rank (or -1) */
static int first_failure(MPI_Comm world, int ok, int rank)
{
    int f = ok ? 1 << 30 : rank;
    MPI_Allreduce(MPI_IN_PLACE, &f, 1, MPI_INT, MPI_MIN, world);
    return f == 1 << 30 ? -1 : f;
}

fp8_probe_run *fp8_probe_open_mpi(const char *path, const fp8_probe_options *opts, const char *const *kv, int nkv,
                                  MPI_Comm world, const char *const *names, const MPI_Comm *groups, int ngroups)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_open_mpi: MPI is %s", fin ? "finalized" : "not initialized (MPI_Init first)");
        return NULL;
    }
    if (world == MPI_COMM_NULL) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_open_mpi: world is MPI_COMM_NULL");
        return NULL;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    /* argument checks every rank makes alike (no collective needed) */
    const char *bad = NULL;
    char why[400] = "";
    if (!path || !*path)
        bad = "no path";
    else if (ngroups < 0 || ngroups > FP8_PROBE_MAX_GROUPS || (ngroups && (!names || !groups)))
        bad = "groups: 0..8 names and communicators";
    else if (nkv < 0 || nkv > 200 || (nkv && !kv))
        bad = "bad metadata pairs";
    for (int i = 0; !bad && i < ngroups; i++) {
        if (!fp8_group_name_ok(names[i]) || strcmp(names[i], "world") == 0)
            snprintf(why, sizeof why, "group name '%.40s' is not 1..23 letters, digits, '_', '-' (nor \"world\")",
                     names[i] ? names[i] : "(null)"),
                bad = why;
        for (int k = 0; !bad && k < i; k++)
            if (strcmp(names[i], names[k]) == 0)
                snprintf(why, sizeof why, "group '%s' registered twice", names[i]), bad = why;
        if (!bad && groups[i] == MPI_COMM_NULL)
            snprintf(why, sizeof why, "group '%s' is MPI_COMM_NULL on rank %d", names[i], rank), bad = why;
    }
    if (bad) {
        FP8_ERROR(FP8_EINVAL, "fp8_probe_open_mpi: %s", bad);
        return NULL;
    }
    mpi_groups *mg = calloc(1, sizeof *mg);
    fp8__groups *g = mg ? &mg->g : NULL;
    if (g)
        g->max = mpi_max, g->release = mpi_release;
    char rpath[1100];
    int ok = g && fp8_rank_path(path, rank, rpath, sizeof rpath) == 0;
    /* the duplicates are collective over each communicator: made on every rank */
    if (g) {
        MPI_Comm_dup(world, &mg->comm[0]);
        snprintf(g->name[0], sizeof g->name[0], "world");
        g->n = 1;
        for (int i = 0; i < ngroups; i++, g->n++) {
            MPI_Comm_dup(groups[i], &mg->comm[g->n]);
            snprintf(g->name[g->n], sizeof g->name[g->n], "%s", names[i]);
        }
        for (int i = 0; i < g->n; i++)
            MPI_Comm_set_errhandler(mg->comm[i], MPI_ERRORS_RETURN);
    }
    /* this rank's metadata: the caller's pairs, then rank, size and groups */
    int nmeta = nkv + 3 + (g ? g->n : 0);
    const char **mkv = calloc((size_t)nmeta * 2, sizeof *mkv);
    char (*text)[256] = calloc(3, sizeof *text);
    char (*keys)[40] = calloc((size_t)(FP8_PROBE_MAX_GROUPS + 1), sizeof *keys);
    /* a group's member list: at most every world rank, 7 characters each */
    size_t lcap = (size_t)size * 7 + 16;
    char *lists = calloc((size_t)(FP8_PROBE_MAX_GROUPS + 1), lcap);
    ok = ok && mkv && text && keys && lists;
    int m = 0;
    if (ok) {
        for (int i = 0; i < nkv; i++, m++)
            mkv[2 * m] = kv[2 * i], mkv[2 * m + 1] = kv[2 * i + 1];
        snprintf(text[0], sizeof text[0], "%d", rank);
        snprintf(text[1], sizeof text[1], "%d", size);
        size_t k = 0;
        for (int i = 1; i < g->n; i++)
            k += (size_t)snprintf(text[2] + k, sizeof text[2] - k, "%s%s", i > 1 ? "," : "", g->name[i]);
        mkv[2 * m] = "mpi_rank", mkv[2 * m + 1] = text[0], m++;
        mkv[2 * m] = "mpi_world_size", mkv[2 * m + 1] = text[1], m++;
        mkv[2 * m] = "mpi_groups", mkv[2 * m + 1] = text[2], m++;
        for (int i = 1; i < g->n; i++, m++) {
            snprintf(keys[i], sizeof keys[i], "mpi_group.%s", g->name[i]);
            members(mg->comm[i], world, lists + (size_t)i * lcap, lcap);
            mkv[2 * m] = keys[i], mkv[2 * m + 1] = lists + (size_t)i * lcap;
        }
    }
    /* one run id for every rank file and the index: rank 0 draws it (every
     * rank takes part in the broadcast, whatever failed above) */
    char run_id[FP8_RUN_ID_LEN + 1] = "";
    if (rank == 0)
        fp8_store_run_id_new(run_id);
    MPI_Bcast(run_id, (int)sizeof run_id, MPI_CHAR, 0, world);
    run_id[FP8_RUN_ID_LEN] = 0;
    fp8_probe_options ro = opts ? *opts : fp8_probe_defaults();
    ro.run_id = run_id;
    fp8_probe_run *run = ok ? fp8_probe_open(rpath, &ro, mkv, m) : NULL;
    if (!run && ok)
        snprintf(why, sizeof why, "%s", fp8_error_message());
    int failed = first_failure(world, run != NULL, rank);
    /* rank 0: the index, once every rank file exists */
    int ist = FP8_OK;
    if (failed < 0 && rank == 0) {
        const char *ikv[2 * 203];
        int ni = 0;
        for (int i = 0; i < nkv; i++, ni++)
            ikv[2 * ni] = kv[2 * i], ikv[2 * ni + 1] = kv[2 * i + 1];
        ikv[2 * ni] = "mpi_world_size", ikv[2 * ni + 1] = text[1], ni++;
        ikv[2 * ni] = "mpi_groups", ikv[2 * ni + 1] = text[2], ni++;
        ist = fp8_ranks_write_index(path, size, ikv, ni, run_id);
        if (ist != FP8_OK)
            snprintf(why, sizeof why, "%s", fp8_error_message());
    }
    if (failed < 0)
        failed = first_failure(world, ist == FP8_OK, rank);
    free(mkv);
    free(text);
    free(keys);
    free(lists);
    if (failed >= 0) {
        /* every rank learns which one failed; the failing rank keeps its own message */
        if (run)
            fp8_probe_close(run);
        fp8__groups_free(g);
        if (failed == rank && why[0])
            FP8_ERROR(FP8_EIO, "fp8_probe_open_mpi: rank %d: %s", rank, why);
        else
            FP8_ERROR(FP8_EIO, "fp8_probe_open_mpi: rank %d could not create its run file (or the index)", failed);
        return NULL;
    }
    fp8__probe_run_set_groups(run, g);
    return run;
}
