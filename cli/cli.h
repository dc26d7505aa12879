/* cli.h — the fp8prof command table; each command is cmd_<name>(argc, argv). */
#ifndef FP8_CLI_H
#define FP8_CLI_H

typedef struct {
    const char *name;
    const char *summary;
    const char *usage; /* full help text */
    int (*run)(int argc, char **argv);
} cli_command;

int cmd_formats(int argc, char **argv);
int cmd_table(int argc, char **argv);
int cmd_cast(int argc, char **argv);
int cmd_tour(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import_nvdlfw(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_dynamics(int argc, char **argv);
int cmd_outliers(int argc, char **argv);
int cmd_loss(int argc, char **argv);
int cmd_advise(int argc, char **argv);
int cmd_claim(int argc, char **argv);
int cmd_swiglu(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_gemm_error(int argc, char **argv);
int cmd_ranks(int argc, char **argv);
int cmd_coverage(int argc, char **argv);

extern const cli_command cli_commands[];

/* Print "fp8prof: <what>" to stderr and return 2 (usage error). */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parse option value v as a number in [lo, hi] (an integer if asked);
 * 0, or a usage error (exit status 2) naming cmd, opt and v. */
int cli_number(const char *cmd, const char *opt, const char *v, double lo, double hi, int integer, double *out);
/* 1 when argv holds -h or --help. */
int cli_wants_help(int argc, char **argv);
/* Print the help of the named command; returns 0, or 2 when no command
 * has that name (nothing printed). */
int cli_help(const char *name);

#endif
