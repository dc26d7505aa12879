/*
 * test_ranks.c — suite "ranks": multi-rank runs.  The reduce= recipe
 * option, the index file, the cross-rank analyses against hand-worked
 * cases, and real MPI runs (mpirun -np 4, tp=2 x dp=2) whose scales are
 * checked against an independent recomputation from the rank files'
 * per-rank amax: current scaling from the group max, delayed scaling by
 * replaying the history of group maxima.  The wrong-group bug (the dp
 * communicator registered as "tp") must be caught.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8.h"
#include "fp8_probe.h"
#include "fp8_ranks.h"
#include "fp8_stats.h"
#include "fp8_store.h"
#include "ranks.h"
#include "tests.h"
#include "recipe_state.h"

static char dir[256];

static const char *tmp_dir(void)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fp8prof_ranks_XXXXXX");
        if (!mkdtemp(dir))
            snprintf(dir, sizeof dir, "/tmp");
    }
    return dir;
}

/* A shell line: %1$s the fp8prof path, %2$s the test directory. */
static int sh(const char *fmt, char *out, size_t cap) { return test_run_cli(fmt, tmp_dir(), out, cap); }

static char out[1 << 16];

static void test_reduce_spec(void)
{
    fp8_recipe r;
    CU_ASSERT_EQUAL(fp8_recipe_parse("e4m3:delayed:reduce=tp", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.reduce, "tp");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.spec, ",reduce=tp"));
    CU_ASSERT_EQUAL(fp8_recipe_parse("hybrid:current:reduce=data_parallel-1", &r), FP8_OK);
    CU_ASSERT_STRING_EQUAL(r.reduce, "data_parallel-1");
    fp8_recipe again;
    CU_ASSERT_EQUAL(fp8_recipe_parse(r.spec, &again), FP8_OK); /* the canonical spec parses to itself */
    CU_ASSERT_STRING_EQUAL(again.spec, r.spec);
    EXPECT_ERROR(fp8_recipe_parse("e4m3:current:reduce=a b", &r), "reduce group");
    EXPECT_ERROR(fp8_recipe_parse("e4m3:current:reduce=abcdefghijklmnopqrstuvwxyz", &r), "reduce group");
    EXPECT_ERROR(fp8_recipe_parse("e4m3:block=1x128:reduce=tp", &r), "unknown option 'reduce'");
    /* a one-process run has no groups: declaring such a recipe says so */
    char path[512];
    snprintf(path, sizeof path, "%s/one.h5", tmp_dir());
    fp8_probe_run *run = fp8_probe_open(path, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_PTR_NULL(fp8_probe_declare(run, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:delayed:reduce=tp", NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "fp8_probe_open_mpi"));
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

/* group_amax set: current scaling scales from it; NaN: from the tensor */
static void test_group_amax(void)
{
    fp8_recipe_state *st = fp8_recipe_state_new("e4m3:current", "activation");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    float x[4] = {0.5f, -2.0f, 1.0f, 0.25f}, q[4];
    fp8_stats s;
    CU_ASSERT_TRUE(isnan(st->group_amax));
    CU_ASSERT_EQUAL(fp8_quantize_ex(st, x, 1, 4, q, &s, 0), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(s.scale, 448.0 / 2.0, 0);
    st->group_amax = 7.0f; /* another rank's tensor reached 7 */
    CU_ASSERT_EQUAL(fp8_quantize_ex(st, x, 1, 4, q, &s, 0), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(s.scale, 448.0 / 7.0, 1e-5);
    CU_ASSERT_DOUBLE_EQUAL(s.amax, 2.0, 0); /* the statistics stay this rank's */
    st->group_amax = 1.0f; /* below the local amax: the local one wins */
    CU_ASSERT_EQUAL(fp8_quantize_ex(st, x, 1, 4, q, &s, 0), FP8_OK);
    CU_ASSERT_DOUBLE_EQUAL(s.scale, 448.0 / 2.0, 0);
    fp8_recipe_state_free(st);
}

/* rank files written by hand: tensor "a" with amax per (rank, step); they
 * share the run id ranks_id, which their index carries too */
static char ranks_id[FP8_RUN_ID_LEN + 1];
static void write_ranks(const char *index, int nranks, const float amax[][3], int bad_rank_meta)
{
    fp8_store_run_id_new(ranks_id);
    fp8_probe_options o = fp8_probe_defaults();
    o.run_id = ranks_id;
    for (int r = 0; r < nranks; r++) {
        char p[600], rs[16], ws[16];
        fp8_rank_path(index, r, p, sizeof p);
        snprintf(rs, sizeof rs, "%d", bad_rank_meta && r == 1 ? 5 : r);
        snprintf(ws, sizeof ws, "%d", nranks);
        const char *kv[] = {"mpi_rank", rs, "mpi_world_size", ws};
        fp8_probe_run *run = fp8_probe_open(p, &o, kv, 2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(run);
        fp8_probe *pa = fp8_probe_declare(run, "a", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(pa);
        for (int s = 0; s < 3; s++) {
            float x[8] = {0.1f, -0.2f, 0.05f, 0.0f, 0.3f, -0.01f, 0.02f, 0.0f};
            x[5] = -amax[r][s];
            CU_ASSERT_EQUAL(fp8_probe_record(pa, s, x, 2, 4), FP8_OK);
            CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
        }
        CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
    }
    const char *ikv[] = {"source", "test"};
    CU_ASSERT_EQUAL(fp8_ranks_write_index(index, nranks, ikv, 1, ranks_id), FP8_OK);
}

static void test_index_and_skew(void)
{
    char index[512], r0[600];
    snprintf(index, sizeof index, "%s/hand.h5", tmp_dir());
    CU_ASSERT_EQUAL(fp8_rank_path(index, 0, r0, sizeof r0), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r0, "/hand.rank0.h5"));
    const float amax[2][3] = {{1, 2, 4}, {2, 2, 1}};
    write_ranks(index, 2, amax, 0);
    CU_ASSERT_EQUAL(fp8_ranks_of(index), 2);
    CU_ASSERT_EQUAL(fp8_ranks_of(r0), 0); /* a rank file is an ordinary run */
    /* every reader takes the index as the run: rank 0's file */
    fp8_run *run = fp8_run_load(index);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_EQUAL(run->nranks, 2);
    CU_ASSERT_STRING_EQUAL(run->path, r0);
    CU_ASSERT_STRING_EQUAL(run->index_path, index);
    CU_ASSERT_EQUAL(run->nrecords, 3);
    CU_ASSERT_DOUBLE_EQUAL(run->records[2].stats.amax, 4.0, 0);
    fp8_run_free(run);
    /* hand-worked skew: max/min per step = 2/1, 2/2, 4/1 -> median 2, max 4 at
     * step 2; the largest amax: rank 1, rank 0 (ties go to the lower rank), rank 0 */
    an_ranks R;
    CU_ASSERT_EQUAL_FATAL(an_ranks_load(index, &R), 0);
    CU_ASSERT_EQUAL(R.nranks, 2);
    CU_ASSERT_EQUAL(R.nsteps, 3);
    CU_ASSERT_EQUAL(R.skew[0].steps, 3);
    CU_ASSERT_DOUBLE_EQUAL(R.skew[0].skew_median, 2.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(R.skew[0].skew_max, 4.0, 1e-12);
    CU_ASSERT_EQUAL(R.skew[0].skew_max_step, 2);
    CU_ASSERT_EQUAL(R.skew[0].top_rank, 0);
    CU_ASSERT_DOUBLE_EQUAL(R.skew[0].top_share, 2.0 / 3.0, 1e-12);
    CU_ASSERT_EQUAL(R.nscales, 0); /* nothing reduces */
    CU_ASSERT_FALSE(an_ranks_bad(&R));
    an_ranks_free(&R);
    /* the CLI: a one-process run is refused with a reason */
    CU_ASSERT_EQUAL(sh("%1$s ranks %2$s/hand.rank0.h5 2>&1", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "not a multi-rank run"));
}

/* the declared layout, hand-worked: 8 ranks, tp=2 (Megatron order) */
static void test_layout(void)
{
    char b[16384];
    CU_ASSERT_EQUAL(fp8_ranks_layout_members(8, 2, "tp", 5, b, sizeof b), 4);
    CU_ASSERT_STRING_EQUAL(b, "4,5");
    CU_ASSERT_EQUAL(fp8_ranks_layout_members(8, 2, "dp", 5, b, sizeof b), 1);
    CU_ASSERT_STRING_EQUAL(b, "1,3,5,7");
    CU_ASSERT_EQUAL(fp8_ranks_layout_members(8, 2, "world", 5, b, sizeof b), 0);
    CU_ASSERT_STRING_EQUAL(b, "0,1,2,3,4,5,6,7");
    CU_ASSERT_EQUAL(fp8_ranks_layout_first(8, 2, "dp", 6), 0);
    CU_ASSERT_EQUAL(fp8_ranks_layout_first(8, 2, "pp", 6), -1);   /* not a layout group */
    CU_ASSERT_EQUAL(fp8_ranks_layout_first(8, 3, "tp", 6), -1);   /* 3 does not divide 8 */
    CU_ASSERT_EQUAL(fp8_ranks_layout_first(8, 2, "tp", 8), -1);   /* no rank 8 */
    CU_ASSERT_EQUAL(fp8_ranks_layout_members(8, 2, "dp", 5, b, 5), -1); /* "1,3,5,7" does not fit */
    /* a 1024-rank group is listed whole (the lists used to be cut short) */
    CU_ASSERT_EQUAL(fp8_ranks_layout_members(1024, 1, "dp", 7, b, sizeof b), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(b, ",1022,1023"));
    CU_ASSERT_EQUAL(strlen(b), 10 + 90 * 2 + 900 * 3 + 24 * 4 + 1023);
}

static void test_untrusted_index(void)
{
    char index[512];
    /* a rank file that says it is another rank */
    snprintf(index, sizeof index, "%s/liar.h5", tmp_dir());
    const float amax[2][3] = {{1, 1, 1}, {1, 1, 1}};
    write_ranks(index, 2, amax, 1);
    an_ranks R;
    CU_ASSERT_EQUAL(an_ranks_load(index, &R), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "the index says rank 1 of 2"));
    /* an index naming more ranks than there are files */
    snprintf(index, sizeof index, "%s/short.h5", tmp_dir());
    write_ranks(index, 2, amax, 0);
    CU_ASSERT_EQUAL(fp8_ranks_write_index(index, 3, NULL, 0, ranks_id), FP8_OK);
    CU_ASSERT_EQUAL(an_ranks_load(index, &R), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "says rank 0 of 2, the index says rank 0 of 3"));
    /* a rank's file missing */
    char r0[600];
    fp8_rank_path(index, 1, r0, sizeof r0);
    CU_ASSERT_EQUAL(fp8_ranks_write_index(index, 2, NULL, 0, ranks_id), FP8_OK);
    unlink(r0);
    CU_ASSERT_EQUAL(an_ranks_load(index, &R), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "rank 1 of"));
    /* rank 0's file missing: the run cannot be read, and the message names it */
    fp8_rank_path(index, 0, r0, sizeof r0);
    unlink(r0);
    CU_ASSERT_PTR_NULL(fp8_run_load(index));
    CU_ASSERT_PTR_NOT_NULL(strstr(fp8_error_message(), "rank 0's file"));
}

/* ---- real ranks ------------------------------------------------------------ */

#define MPIRUN_ENV "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 " \
                   "mpirun -x ASAN_OPTIONS --oversubscribe "
#define MPIRUN_N(n) MPIRUN_ENV "-np " #n " "
#define MPIRUN MPIRUN_N(4)

typedef struct {
    fp8_run *r[4];
} four;

static int load_four(const char *index, four *f)
{
    for (int i = 0; i < 4; i++) {
        char p[600];
        fp8_rank_path(index, i, p, sizeof p);
        f->r[i] = fp8_run_load_series(p);
        if (!f->r[i])
            return 1;
    }
    return 0;
}

static void free_four(four *f)
{
    for (int i = 0; i < 4; i++)
        fp8_run_free(f->r[i]);
}

/* rank r's row of (tensor name, recipe spec, step), NULL if none */
static const fp8_step_row *row_of(const fp8_run *run, const char *tensor, const char *spec, int64_t step)
{
    for (size_t i = 0; i < run->nsteps; i++) {
        const fp8_step_row *s = &run->steps[i];
        if (s->step == step && strcmp(run->tensor_name[s->tensor], tensor) == 0 &&
            strcmp(run->recipe_spec[s->recipe], spec) == 0)
            return s;
    }
    return NULL;
}

#define STEPS 24
static void test_mpi_reduction(void)
{
    int rc = sh(MPIRUN "%1$s synth --tp 2 --steps 24 --tensors 6 --rows 8 --cols 128 "
                       "--recipe e4m3:delayed:history=4,reduce=tp --shadow e4m3:current:reduce=tp "
                       "--shadow e4m3:current -o %2$s/tp.h5 2>&1",
                out, sizeof out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char index[512];
    snprintf(index, sizeof index, "%s/tp.h5", tmp_dir());
    CU_ASSERT_EQUAL(fp8_ranks_of(index), 4);
    four f;
    CU_ASSERT_EQUAL_FATAL(load_four(index, &f), 0);
    const char *del = f.r[0]->recipe_spec[0], *cur = f.r[0]->recipe_spec[1], *loc = f.r[0]->recipe_spec[2];
    CU_ASSERT_PTR_NOT_NULL(strstr(del, "reduce=tp"));
    size_t checked = 0, bad = 0, differ_dp = 0;
    for (int t = 0; t < f.r[0]->ntensors; t++) {
        const char *name = f.r[0]->tensor_name[t];
        for (int r = 0; r < 4; r++) {
            int partner = r ^ 1; /* tp=2: ranks {0,1} and {2,3} */
            float hist[4] = {0, 0, 0, 0}, scale = 1.0f;
            for (int64_t s = 0; s < STEPS; s++) {
                const fp8_step_row *a = row_of(f.r[r], name, cur, s), *b = row_of(f.r[partner], name, cur, s);
                const fp8_step_row *d = row_of(f.r[r], name, del, s), *l = row_of(f.r[r], name, loc, s);
                const fp8_step_row *o = row_of(f.r[r ^ 2], name, del, s); /* same dp group, other tp group */
                if (!a || !b || !d || !l || !o) {
                    bad++;
                    continue;
                }
                /* what the recipe's reduce should do, from the per-rank amax recorded */
                float g = a->amax > b->amax ? a->amax : b->amax;
                if ((a->nonfinite | b->nonfinite) & 1u)
                    g = INFINITY;
                float want_cur = fp8_scale_current(448.0f, g, 0.0, 0, 0);
                float want_loc = fp8_scale_current(448.0f, a->nonfinite & 1u ? INFINITY : a->amax, 0.0, 0, 0);
                bad += a->scale != want_cur || l->scale != want_loc || d->scale != scale;
                differ_dp += d->scale != o->scale;
                checked++;
                /* delayed: slot 0 = the group max of this step, then the update */
                memmove(hist + 1, hist, 3 * sizeof *hist);
                hist[0] = g;
                float m = 0;
                for (int k = 0; k < 4; k++)
                    m = hist[k] > m ? hist[k] : m;
                scale = fp8_scale_delayed(448.0f, m, 0, 0, scale);
            }
        }
    }
    CU_ASSERT_EQUAL(checked, (size_t)f.r[0]->ntensors * 4 * STEPS);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(differ_dp > checked / 2); /* other tp groups see other data: their scales differ */
    free_four(&f);
    /* the analysis agrees: no differing scale, membership as declared */
    CU_ASSERT_EQUAL(sh("%1$s ranks %2$s/tp.h5 --check", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "every reducing recipe's scale is equal"));
    /* every command reads the index as the run (rank 0's file) */
    CU_ASSERT_EQUAL(sh("%1$s info %2$s/tp.h5", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "mpi_rank             0"));
    /* replay cannot check a reducing recipe against one rank's amax: it says so
     * instead of reporting a mismatch */
    CU_ASSERT_EQUAL(sh("%1$s replay %2$s/tp.h5 2>/dev/null", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Not checked: delayed recipes that reduce their amax across ranks"));
}

static void test_mpi_wrong_group(void)
{
    int rc = sh(MPIRUN "%1$s synth --tp 2 --steps 12 --tensors 3 --rows 8 --cols 128 "
                       "--recipe e4m3:current:reduce=tp --wrong-group -o %2$s/wrong.h5 2>&1",
                out, sizeof out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(sh("%1$s ranks %2$s/wrong.h5 --check", out, sizeof out), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank 1: the communicator registered as 'tp' holds ranks 1,3; tp=2, dp=2 expects 0,1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "SCALES DIFFER"));
    an_ranks R;
    char index[512];
    snprintf(index, sizeof index, "%s/wrong.h5", tmp_dir());
    CU_ASSERT_EQUAL_FATAL(an_ranks_load(index, &R), 0);
    CU_ASSERT_EQUAL(R.nscales, 3);
    for (size_t i = 0; i < R.nscales; i++) /* current scaling: wrong from the first step */
        CU_ASSERT(R.scales[i].differ >= 11 && R.scales[i].first_step == 0);
    an_ranks_free(&R);
    /* the report says it too: its section, its finding, its data file */
    CU_ASSERT_EQUAL(sh("%1$s report %2$s/wrong.h5 --boot 50 -o %2$s/wrong_rep >/dev/null 2>&1 && "
                       "cat %2$s/wrong_rep/report.md %2$s/wrong_rep/ranks_scales_wrong.tsv",
                       out, sizeof out),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "## Across ranks: wrong"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "**Verdict: the amax is reduced over the wrong group**"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "SCALES DIFFER inside a reduction group (wrong group)")); /* the finding */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tensor\trecipe\tgroup\tinstances\tsteps\tdiffer"));
}

/* the scalar series `name` of a run: values by step into v[0..n) (NaN: none) */
static void series(const fp8_run *run, const char *name, double *v, int n)
{
    for (int i = 0; i < n; i++)
        v[i] = NAN;
    int id = -1;
    for (int k = 0; k < run->nscalar_names; k++)
        if (strcmp(run->scalar_name[k], name) == 0)
            id = k;
    for (size_t i = 0; id >= 0 && i < run->nscalars; i++)
        if ((int)run->scalar_id[i] == id && run->scalar_step[i] >= 0 && run->scalar_step[i] < n)
            v[run->scalar_step[i]] = run->scalar_value[i];
}

/* runs a and b of the test directory, loaded (fatal when either fails) */
static int load_two(const char *a, const char *b, fp8_run **p, fp8_run **q)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s", tmp_dir(), a);
    snprintf(pb, sizeof pb, "%s/%s", tmp_dir(), b);
    *p = fp8_run_load(pa), *q = fp8_run_load(pb);
    if (*p && *q)
        return 0;
    fp8_run_free(*p), fp8_run_free(*q);
    return 1;
}

#define TRAIN "train --steps 8 --layers 1 --dim 32 --heads 2 --ctx 32 --batch 8 --val-every 4 --quiet "

/* the same training (TRAIN, then extra) in one process into `plain` and on
 * np ranks into `ranked`, both loaded (1 when a step fails) */
static int train_both(const char *extra, int np, const char *plain, const char *ranked, fp8_run **p, fp8_run **q)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%%1$s " TRAIN "%s-o %%2$s/%s 2>&1", extra, plain);
    if (sh(cmd, out, sizeof out) != 0)
        return 1;
    snprintf(cmd, sizeof cmd, MPIRUN_ENV "-np %d %%1$s " TRAIN "%s-o %%2$s/%s 2>&1", np, extra, ranked);
    if (sh(cmd, out, sizeof out) != 0)
        return 1;
    return load_two(plain, ranked, p, q);
}

/* one rank computes exactly what a plain run computes */
static void test_mpi_train_np1(void)
{
    fp8_run *p, *q;
    CU_ASSERT_EQUAL_FATAL(train_both("", 1, "plain.h5", "one.h5", &p, &q), 0);
    CU_ASSERT_EQUAL(q->nranks, 1);
    static const char *names[] = {"loss", "grad_norm", "val_loss"};
    for (int k = 0; k < 3; k++) {
        double u[8], w[8];
        series(p, names[k], u, 8);
        series(q, names[k], w, 8);
        int same = 1, have = 0;
        for (int i = 0; i < 8; i++) {
            same &= (isnan(u[i]) && isnan(w[i])) || memcmp(&u[i], &w[i], sizeof u[i]) == 0;
            have += !isnan(u[i]);
        }
        CU_ASSERT_TRUE(same);
        CU_ASSERT(have >= 2);
    }
    CU_ASSERT_EQUAL(p->nrecords, q->nrecords);
    size_t differ = 0;
    for (size_t i = 0; i < p->nrecords && i < q->nrecords; i++)
        differ += p->records[i].stats.amax != q->records[i].stats.amax ||
                  memcmp(&p->records[i].stats.sqnr_db, &q->records[i].stats.sqnr_db, sizeof(double)) != 0;
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(p->nrecords > 10);
    fp8_run_free(p);
    fp8_run_free(q);
}

/* two ranks with half the batch each = one process with the whole batch
 * (float32: no cast differs between the two), up to float addition order;
 * with FP8, the replicated weights' records agree across ranks */
static void test_mpi_train_np2(void)
{
    fp8_run *p, *q;
    CU_ASSERT_EQUAL_FATAL(train_both("--recipe fp32 ", 2, "whole.h5", "halves.h5", &p, &q), 0);
    CU_ASSERT_EQUAL(q->nranks, 2);
    double u[8], w[8], g1[8], g2[8], worst = 0, worstg = 0;
    series(p, "loss", u, 8), series(q, "loss", w, 8);
    series(p, "grad_norm", g1, 8), series(q, "grad_norm", g2, 8);
    for (int i = 0; i < 8; i++) {
        worst = fmax(worst, fabs(u[i] - w[i]) / fabs(u[i]));
        worstg = fmax(worstg, fabs(g1[i] - g2[i]) / fabs(g1[i]));
    }
    CU_ASSERT(worst < 1e-5);
    CU_ASSERT(worstg < 1e-4);
    CU_ASSERT(u[0] > 4 && u[7] < u[0]); /* it trained */
    fp8_run_free(p);
    fp8_run_free(q);
    /* not the same as one rank training on half the batch: the test can tell */
    CU_ASSERT_EQUAL_FATAL(sh("%1$s " TRAIN "--recipe fp32 --batch 4 -o %2$s/half.h5 2>&1", out, sizeof out), 0);
    CU_ASSERT_EQUAL_FATAL(load_two("half.h5", "halves.h5", &p, &q), 0);
    series(p, "loss", u, 8);
    CU_ASSERT(fabs(u[7] - w[7]) / fabs(w[7]) > 1e-4);
    fp8_run_free(p);
    fp8_run_free(q);
    /* FP8 (hybrid:delayed): the weights are the same on both ranks, so are their records */
    CU_ASSERT_EQUAL_FATAL(sh(MPIRUN_N(2) "%1$s " TRAIN "-o %2$s/fp8two.h5 2>&1", out, sizeof out), 0);
    CU_ASSERT_EQUAL_FATAL(load_two("fp8two.rank0.h5", "fp8two.rank1.h5", &p, &q), 0);
    size_t weights = 0, wdiff = 0, adiff = 0;
    for (size_t i = 0; i < p->nrecords && i < q->nrecords; i++) {
        const fp8_record *x = &p->records[i], *y = &q->records[i];
        /* (smooth=fold casts W2 / s with s from the rank's own activations) */
        int is_w = p->tensor_role[x->tensor] == FP8_ROLE_WEIGHT && !strstr(p->recipe_spec[x->recipe], "smooth=fold");
        weights += is_w;
        if (is_w)
            wdiff += x->stats.amax != y->stats.amax || x->stats.sqnr_db != y->stats.sqnr_db;
        else
            adiff += x->stats.amax != y->stats.amax;
    }
    CU_ASSERT(weights > 0);
    CU_ASSERT_EQUAL(wdiff, 0);
    CU_ASSERT(adiff > 0); /* activations are each rank's own shard */
    fp8_run_free(p);
    fp8_run_free(q);
}

/* ranks that break the collective rules: errors, not hangs (tests/mpi_mismatch.c) */
static void test_mpi_mismatch(void)
{
    const char *exe = getenv("FP8PROF");
    char prog[600], cmd[1400];
    snprintf(prog, sizeof prog, "%.*smpi_mismatch", exe ? (int)(strrchr(exe, '/') ? strrchr(exe, '/') - exe + 1 : 0) : 6,
             exe ? exe : "build/");
    snprintf(cmd, sizeof cmd, MPIRUN_N(2) "timeout 120 %s %%2$s/mismatch.h5 2>&1", prog);
    int rc = sh(cmd, out, sizeof out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NULL(strstr(out, "FAIL"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok mismatched casts: FP8_EINVAL naming the group"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok matched casts reduce again"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "ok different recipes on the ranks: refused at declare"));
    if (rc != 0)
        fprintf(stderr, "%s\n", out);
}

void register_ranks_tests(void)
{
    static CU_TestInfo tests[] = {
        {"reduce= spec", test_reduce_spec},
        {"group amax into current scaling", test_group_amax},
        {"index and skew", test_index_and_skew},
        {"untrusted index and rank files", test_untrusted_index},
        {"declared layout, hand-worked", test_layout},
        {"mpirun: reductions recomputed", test_mpi_reduction},
        {"mpirun: wrong group caught", test_mpi_wrong_group},
        {"mpirun train: np=1 is the plain run", test_mpi_train_np1},
        {"mpirun train: np=2 is one process with the whole batch", test_mpi_train_np2},
        {"mpirun: ranks that break the rules get errors, not hangs", test_mpi_mismatch},
        CU_TEST_INFO_NULL,
    };
    add_suite("ranks", tests);
}
