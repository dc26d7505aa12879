/*
 * test_main.c — the CUnit runner: one suite per lib module (and the CLI).
 * Exit status is nonzero when any assertion fails.  Arguments name suites
 * to run alone (test_fp8prof npy cli); none runs them all.
 *
 * The suite runs inside its own scratch directory (a fresh mkdtemp
 * directory, removed at exit unless FP8PROF_KEEP_SCRATCH is set) that holds
 * a build/ folder: every path build/... a test names is this run's own, so
 * two runs (make test and make asan) never touch each other's files, and
 * none touches the repository's build/.
 */
#include <CUnit/Basic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"

/* $FP8PROF (default build/fp8prof) made absolute, then the scratch
 * directory made the working directory. */
static int enter_scratch(void)
{
    const char *exe = getenv("FP8PROF");
    char abs_exe[PATH_MAX];
    if (realpath(exe ? exe : "build/fp8prof", abs_exe))
        setenv("FP8PROF", abs_exe, 1);
    const char *dir = test_scratch_dir();
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/build", dir);
    if ((mkdir(sub, 0777) != 0 && access(sub, W_OK) != 0) || chdir(dir) != 0) {
        fprintf(stderr, "cannot work in the scratch directory %s\n", dir);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (enter_scratch() != 0)
        return 2;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    register_format_tests();
    register_cast_tests();
    register_fenv_tests();
    register_recipe_tests();
    register_shadows_tests();
    register_stats_tests();
    register_stats_parts_tests();
    register_exp_hist_tests();
    register_kernels_tests();
    register_kernels_cast_tests();
    register_npy_tests();
    register_store_tests();
    register_probe_tests();
    register_device_tests();
    register_background_tests();
    register_layers_tests();
    register_model_tests();
    register_analyses_tests();
    register_inference_tests();
    register_verdicts_tests();
    register_answers_tests();
    register_glance_tests();
    register_index_tests();
    register_gemm_tests();
    register_nvfp4_tests();
    register_sweeps_tests();
    register_ranks_tests();
    register_hostile_tests();
    register_hardening_tests();
    register_nvdlfw_tests();
    register_cli_tests();
    CU_basic_set_mode(CU_BRM_VERBOSE);
    unsigned failed = 0, run = 0;
    if (argc > 1) { /* test_fp8prof SUITE...: run only these suites */
        for (int i = 1; i < argc; i++) {
            CU_pSuite s = CU_get_suite(argv[i]);
            if (!s) {
                fprintf(stderr, "no suite named '%s'\n", argv[i]);
                CU_cleanup_registry();
                return 2;
            }
            CU_basic_run_suite(s);
            /* (each run starts CUnit's counts afresh: the suites' sum) */
            failed += CU_get_number_of_failures() + CU_get_number_of_tests_failed();
            run += CU_get_number_of_tests_run();
        }
    } else {
        CU_basic_run_tests();
        failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
        run = CU_get_number_of_tests_run();
    }
    test_skips_report();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "no tests ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
