/*
 * test_device.c — suite "device": a caller whose tensors live on another
 * device hands the probe only each tensor's amax at the steps without
 * statistics (fp8_probe_needs_tensor, fp8_probe_note_amax), and the run
 * file is the one recording every tensor would have written.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_probe.h"
#include "fp8_stats.h"
#include "fp8_store.h"
#include "tests.h"

/* tensor values at a step: a drifting scale (delayed scaling overflows), a
 * NaN at step 13, an Inf at step 17 */
static void values(float *x, size_t n, int64_t s, uint64_t *seed)
{
    double k = pow(2.0, 0.3 * (double)(s % 9));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(k * ((double)(test_rand(seed) >> 11) / 9007199254740992.0 - 0.5));
    if (s == 13)
        x[3] = NAN;
    if (s == 17)
        x[5] = INFINITY;
}

/* run: every step recorded (mode 0), or the tensor only where the probe
 * needs it and its amax elsewhere (mode 1) */
static void write(const char *path, int mode)
{
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 5;
    fp8_probe_run *run = fp8_probe_open(path, &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    const char *sh[] = {"e4m3:delayed:history=4", "e5m2:delayed", "e4m3:current"};
    fp8_probe *p = fp8_probe_declare(run, "x.input", FP8_ROLE_ACTIVATION, 0, NULL, sh, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[8 * 64];
    uint64_t seed = 3;
    int noted = 0;
    for (int64_t s = 0; s < 40; s++) {
        for (int micro = 0; micro < 2; micro++) { /* two micro-batches a step: the max of their amaxes */
            values(x, 8 * 64, s * 2 + micro, &seed);
            int need = fp8_probe_needs_tensor(p, s);
            CU_ASSERT(need == 0 || need == 1);
            CU_ASSERT_EQUAL(need, s % 5 == 0);
            if (mode == 0 || need) {
                CU_ASSERT_EQUAL(fp8_probe_record(p, s, x, 8, 64), FP8_OK);
            } else {
                fp8_amax_info ai;
                CU_ASSERT_EQUAL(fp8_tensor_amax(x, 8 * 64, &ai), FP8_OK);
                unsigned nf = (ai.inf_count ? 1u : 0u) | (ai.nan_count ? 2u : 0u);
                CU_ASSERT_EQUAL(fp8_probe_note_amax(p, s, ai.amax, nf), FP8_OK);
                noted++;
            }
        }
        CU_ASSERT_EQUAL(fp8_probe_step_end(run, s), FP8_OK);
    }
    if (mode == 1) {
        CU_ASSERT_EQUAL(noted, 2 * 32);
        /* a statistics step needs the tensor: the amax alone is refused */
        EXPECT_ERROR(fp8_probe_note_amax(p, 40, 1.0f, 0), "needs the tensor itself");
        EXPECT_ERROR(fp8_probe_note_amax(p, 41, NAN, 0), "is not a finite number");
        EXPECT_ERROR(fp8_probe_note_amax(p, 41, 1.0f, 4), "nonfinite 4");
    }
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

static void test_note_amax_equals_record(void)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/all.h5", test_scratch_dir());
    snprintf(b, sizeof b, "%s/noted.h5", test_scratch_dir());
    write(a, 0);
    write(b, 1);
    fp8_run *ra = fp8_run_load(a), *rb = fp8_run_load(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ra);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rb);
    /* the same statistics records (statistics steps had the tensor in both) */
    CU_ASSERT_EQUAL_FATAL(ra->nrecords, rb->nrecords);
    CU_ASSERT_EQUAL(ra->nrecords, 8 * 2 * 3); /* 8 statistics steps x 2 micro-batches x 3 recipes */
    size_t same = 0;
    for (size_t i = 0; i < ra->nrecords; i++)
        same += ra->records[i].step == rb->records[i].step && ra->records[i].recipe == rb->records[i].recipe &&
                memcmp(&ra->records[i].stats.scale, &rb->records[i].stats.scale, sizeof(double)) == 0 &&
                ra->records[i].stats.overflows == rb->records[i].stats.overflows &&
                ra->records[i].stats.sqnr_db == rb->records[i].stats.sqnr_db;
    CU_ASSERT_EQUAL(same, ra->nrecords);
    /* the every-step rows bit for bit: amax, the scales the delayed histories
     * gave (the noted amaxes moved them as records would), the NaN/Inf bits */
    CU_ASSERT_EQUAL_FATAL(ra->nsteps, rb->nsteps);
    CU_ASSERT(ra->nsteps >= 40 * 3);
    size_t rows_same = 0, inf_rows = 0, nan_rows = 0;
    for (size_t i = 0; i < ra->nsteps; i++) {
        const fp8_step_row *x = &ra->steps[i], *y = &rb->steps[i];
        rows_same += x->step == y->step && x->recipe == y->recipe && memcmp(&x->amax, &y->amax, 4) == 0 &&
                     memcmp(&x->scale, &y->scale, 4) == 0 && x->nonfinite == y->nonfinite;
        inf_rows += (y->nonfinite & 1u) != 0, nan_rows += (y->nonfinite & 2u) != 0;
    }
    CU_ASSERT_EQUAL(rows_same, ra->nsteps);
    CU_ASSERT(inf_rows > 0 && nan_rows > 0);
    fp8_run_free(ra);
    fp8_run_free(rb);
}

/* the recipes that need the tensor at every step */
static void test_needs_tensor(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/needs.h5", test_scratch_dir());
    fp8_probe_options o = fp8_probe_defaults();
    o.every = 10;
    fp8_probe_run *run = fp8_probe_open(path, &o, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    const char *plain[] = {"e4m3:delayed", "e4m3:current", "mxfp8"};
    const char *blk[] = {"e4m3:block=1x128:delayed,eps=0"};
    fp8_probe *a = fp8_probe_declare(run, "a", FP8_ROLE_ACTIVATION, 0, "hybrid:delayed", plain, 3);
    fp8_probe *b = fp8_probe_declare(run, "b", FP8_ROLE_ACTIVATION, 0, NULL, blk, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(fp8_probe_needs_tensor(a, 0), 1);  /* statistics */
    CU_ASSERT_EQUAL(fp8_probe_needs_tensor(a, 3), 0);  /* the amax is all */
    CU_ASSERT_EQUAL(fp8_probe_needs_tensor(b, 3), 1);  /* per-block histories need the blocks */
    float s, si;
    CU_ASSERT_EQUAL(fp8_probe_active_scale(a, &s, &si), FP8_OK);
    CU_ASSERT_EQUAL(s, 1.0f); /* TE's start */
    EXPECT_ERROR(fp8_probe_active_scale(b, &s, &si), "not a per-tensor delayed recipe");
    EXPECT_ERROR(fp8_probe_needs_tensor(a, -1), "step");
    CU_ASSERT_EQUAL(fp8_probe_close(run), FP8_OK);
}

/* the export a logger or a notebook reads: one JSON object per record */
static void test_export_jsonl(void)
{
    char a[512], out[4096];
    snprintf(a, sizeof a, "%s/all.h5", test_scratch_dir());
    write(a, 0);
    /* every line parses, as many as records, TE's names, the same numbers as the CSV */
    CU_ASSERT_EQUAL(test_run_cli("%1$s export %2$s --format jsonl > %2$s.jsonl && %1$s export %2$s > %2$s.csv && "
                                 "/usr/bin/python3 -c \"import json, csv, math, sys; "
                                 "j = [json.loads(l) for l in open(sys.argv[1])]; c = list(csv.DictReader(open(sys.argv[2]))); "
                                 "assert len(j) == len(c) == 48, (len(j), len(c)); "
                                 "bad = [i for i, (x, y) in enumerate(zip(j, c)) if x['tensor'] != y['tensor'] or "
                                 "x['step'] != int(y['step']) or x['overflows_num'] != int(y['overflows']) or "
                                 "not math.isclose(x['underflows%%'], float(y['underflow_pct']), rel_tol=1e-6, abs_tol=1e-12) or "
                                 "not math.isclose(x['cur_amax'], float(y['amax']), rel_tol=1e-8)]; "
                                 "assert not bad, bad[:3]; print('ok', len(j))\" %2$s.jsonl %2$s.csv",
                                 a, out, sizeof out), 0);
    CU_ASSERT(strstr(out, "ok 48") != NULL);
    CU_ASSERT_EQUAL(test_run_cli("%1$s export %2$s --format jsonl --scalars 2>&1", a, out, sizeof out), 2);
}

void register_device_tests(void)
{
    static CU_TestInfo tests[] = {
        {"amaxes handed over where no tensor is needed: the run file equals recording every tensor", test_note_amax_equals_record},
        {"which probes need the tensor; the active delayed scale for a caller that casts itself", test_needs_tensor},
        {"export --format jsonl: one object per record, TE's names, the CSV's numbers", test_export_jsonl},
        CU_TEST_INFO_NULL,
    };
    add_suite("device", tests);
}
