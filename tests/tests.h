/* tests.h — suite registration and small helpers shared by the tests. */
#ifndef FP8_TESTS_H
#define FP8_TESTS_H
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <string.h>

void register_format_tests(void);
void register_cast_tests(void);
void register_fenv_tests(void);
void register_cli_tests(void);
void register_recipe_tests(void);
void register_stats_tests(void);
void register_stats_parts_tests(void);
void register_exp_hist_tests(void);
void register_kernels_tests(void);
void register_kernels_cast_tests(void);
void register_npy_tests(void);
void register_store_tests(void);
void register_probe_tests(void);
void register_layers_tests(void);
void register_model_tests(void);
void register_analyses_tests(void);
void register_inference_tests(void);
void register_verdicts_tests(void);
void register_hostile_tests(void);
void register_nvdlfw_tests(void);
void register_index_tests(void);
void register_gemm_tests(void);
void register_nvfp4_tests(void);
void register_sweeps_tests(void);
void register_ranks_tests(void);
void register_hardening_tests(void);
void register_shadows_tests(void);
void register_answers_tests(void);
void register_glance_tests(void);
void register_device_tests(void);
void register_background_tests(void);

/* pipe + fork: the child keeps fd[1] (to write), the parent fd[0] (to
 * read); returns fork's pid, -1 on failure. */
#include <sys/types.h>
pid_t fork_piped(int fd[2]);

/* In a forked writer: its n-th pwrite is torn at a page boundary and the
 * process killed (tear.c). */
void test_tear_at(long n);

/* Assert that st is an error whose fp8_error_message() contains words. */
void expect_error_at(int st, const char *words, const char *file, int line);
#define EXPECT_ERROR(st, words) expect_error_at((st), (words), __FILE__, __LINE__)

/* Run a shell line whose first %s (or %1$s) is the fp8prof path ($FP8PROF,
 * default build/fp8prof) and second (%2$s) arg; stdout into out (up to
 * cap - 1 bytes); the exit status, -1 when it did not exit. */
#include <stddef.h>
int test_run_cli(const char *fmt, const char *arg, char *out, size_t cap);

/* The test process's own scratch directory (created on first use, removed
 * at exit; FP8PROF_KEEP_SCRATCH=1 keeps it), and name inside it (a static
 * buffer of a ring of 16: copy it to keep it longer). */
const char *test_scratch_dir(void);
const char *test_path(const char *name);

/* Smooth SwiGLU's column scales, by hand: s_j = 1 / max_i |x_ij| of a
 * rows x cols tensor (no column of zeros expected). */
void test_column_scales(const float *x, size_t rows, size_t cols, float *s);

/* A test that cannot run here says so: the line is printed at once and
 * again in the summary at the end of the run (test_skips_report). */
void test_skip(const char *why);
void test_skips_report(void);

/* Add a suite with the given tests (a CU_TEST_INFO_NULL-terminated table);
 * exits on registry failure. */
void add_suite(const char *name, CU_TestInfo *tests);

static inline float f_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* xorshift-style generator for test inputs (not the library's). */
static inline uint64_t test_rand(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}
#endif
