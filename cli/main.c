/*
 * main.c — build/fp8prof: the single command-line entry point.
 * Dispatches to one command per verb; exit status 0 ok, 1 failure, 2 usage.
 */
#include <stdarg.h>
#include <hdf5.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define OPTS "Options: -o DIR (data files; default fp8prof-out), --tensor PATTERN, --boot N (1000),\n"\
     "--seed N, --sqnr-margin DB (1), --block-gain DB (3), --underflow-max F (0.01),\n"\
     "--min-events N (3), --loss NAME (loss), --diverge F (0.02), --diverge-steps N (20),\n"\
     "--equivalence-margin PCT (1), --claim-margin DB (0.1), --lr-warmup STEPS (default\n"\
     "/meta lr_warmup), --baseline RUN (the loss baseline; default: the arm of runs without\n"\
     "FP8 with the most replicates, docs/analyses.md), --smooth WITHOUT,WITH (the Smooth\n"\
     "SwiGLU pair across runs).  RUN: a file name without .h5, or the path as given.\n"\
     "Definitions: docs/analyses.md.\n"

const cli_command cli_commands[] = {
    {"formats", "list every built-in number format and its parameters",
     "usage: fp8prof formats\n"
     "One row per built-in format: bits, exponent/mantissa bits, bias, max finite,\n"
     "min normal, min subnormal, and whether it has Inf, NaN and -0.\n",
     cmd_formats},
    {"table", "every code of a format with its class and value",
     "usage: fp8prof table FORMAT\n"
     "One line per code: 0xHH CLASS %a %.9g (class: zero, subnormal, normal, inf, nan).\n"
     "FORMAT: e4m3 e5m2 e4m3fnuz e5m2fnuz e8m0 e2m1 e2m3 e3m2 fp16 bf16, or eXmY[bBIAS][ieee|fn|fnuz|f].\n",
     cmd_table},
    {"cast", "cast values to a format and back",
     "usage: fp8prof cast FORMAT [--round nearest|zero|stochastic] [--seed N]\n"
     "                   [--saturate|--no-saturate] [--scale S] [VALUES...]\n"
     "Values come from the arguments, or from stdin when none are given (decimal or\n"
     "hex-float, whitespace separated).  One line per value:\n"
     "  INPUT CODE DEQUANTIZED CLASS\n"
     "with CODE = cast(INPUT * S) as 0xHH and DEQUANTIZED = decode(CODE) * (1/S) as %.9g.\n"
     "CLASS: exact rounded subnormal flushed saturated overflow nan.\n"
     "Defaults: --round nearest, --saturate, --scale 1, --seed 0.  Stochastic rounding\n"
     "uses element index i (0, 1, ...) of the value list as the generator's counter.\n",
     cmd_cast},
    {"stats", "every statistic of tensors under a recipe (.npy or raw float32 files)",
     "usage: fp8prof stats --recipe SPEC [--raw] [--rows R --cols C] [--role ROLE] [--json] FILE...\n"
     "Quantizes each FILE under the recipe and prints every statistic (names and\n"
     "definitions: docs/statistics.md), one block per file, or one JSON object per\n"
     "line with --json (Inf/NaN values as null).  FILE: .npy (float32 or float16, shape\n"
     "from the header: the last axis is cols; known by its magic, not its name).  With\n"
     "--raw, files without the .npy magic are read as raw little-endian float32 (shape\n"
     "from --rows/--cols; default one row); without it they are refused.  Files are\n"
     "steps in order: a delayed recipe\n"
     "carries its amax history from file to file, e.g.\n"
     "  fp8prof stats --recipe e4m3:delayed:history=16 step*.npy\n"
     "ROLE (activation, weight, gradient, output, other) picks the format of hybrid\n"
     "recipes.  Recipe grammar: docs/recipes.md.  Exit 2 for usage errors, 1 when a\n"
     "file cannot be read (the files before it are printed).\n",
     cmd_stats},
    {"info", "what a run file holds: metadata, recipes, tensors, worst statistics",
     "usage: fp8prof info RUN.h5\n"
     "Metadata, recipes, tensors, the step range, and per tensor x recipe the largest\n"
     "overflow and underflow percentages and the smallest SQNR.\n",
     cmd_info},
    {"export", "a run as CSV, or as nvidia-dlframework-inspect logs",
     "usage: fp8prof export RUN.h5 [--format csv|jsonl] [--scalars] [-o FILE]\n"
     "       fp8prof export RUN.h5 --format nvdlfw [--recipe SPEC] -o DIR\n"
     "csv: one row per tensor x step x recipe with a header row (stdout unless -o);\n"
     "--scalars: the scalar series instead (name,step,value).  jsonl: one JSON object per\n"
     "tensor x step x recipe, TransformerEngine's statistic names where they exist\n"
     "(underflows%, overflows%, cur_amax, mse, ...; docs/statistics.md), null for NaN.\n"
     "nvdlfw: DIR/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log in\n"
     "TransformerEngine's debug format, for the active recipe (or --recipe SPEC).\n",
     cmd_export},
    {"import-nvdlfw", "TransformerEngine debug logs into a run file",
     "usage: fp8prof import-nvdlfw LOGDIR -o RUN.h5\n"
     "Reads TransformerEngine's FileLogger logs: LOGDIR/nvdlfw_inspect_statistics_logs/\n"
     "*.log and LOGDIR/rank_<r>/nvdlfw_inspect_statistics_logs/*.log (every rank; ranks\n"
     "other than 0 get '@rank<r>' on their tensor names).  activation, gradient,\n"
     "weight, output, wgrad and dgrad tensors; recipe-prefixed statistics become\n"
     "shadow recipes te:<recipe>; statistics a log lacks stay absent (docs/schema.md).\n"
     "Lines it cannot parse are listed with file and line number, and the exit status\n"
     "is then 1.  RUN.h5 is written under a temporary name and must not be a log.\n",
     cmd_import_nvdlfw},
    {"watch", "follow a run while it is written",
     "usage: fp8prof watch RUN.h5 [--interval SECONDS] [--idle SECONDS] [--once]\n"
     "Prints, for every new step, the tensors with the worst overflow, underflow and\n"
     "SQNR (the first look shows the latest step only).  Ends when the writer closes\n"
     "the file, after --idle SECONDS without a new step (a writer killed mid-run leaves\n"
     "its file marked open), or on Ctrl-C.  --once prints the latest step and exits.\n"
     "--interval: 0.05 to 3600 seconds between reads (default 2).\n",
     cmd_watch},
    {"synth", "write a synthetic run (for tests, benchmarks, a first look)",
     "usage: fp8prof synth [--steps N] [--tensors K] [--rows R --cols C] [--seed S]\n"
     "                     [--recipe SPEC] [--shadow SPEC ...] [--record-every N] [--ranks N] [--tp T] [--wrong-group] -o RUN.h5\n"
     "Defaults: 300 steps, 12 tensors of 32x256, hybrid:delayed:history=16 with shadows\n"
     "e4m3:current, e4m3:block=1x128, mxfp8.  Tensor kinds: Gaussian, Student-t,\n"
     "outlier channels, drifting scale, an 8x jump at mid-run, NaN bursts.\n"
     "--ranks N: N rank files and their index from one process (rank r draws from seed and r;\n"
     "no amax reduction), declared layout --tp T x N/T.  Under mpirun: one file per rank, groups\n"
     "'tp' (T consecutive ranks) and 'dp' registered for reduce=tp / reduce=dp recipes;\n"
     "--wrong-group registers the dp communicator as 'tp' (the bug fp8prof ranks catches).\n",
     cmd_synth},
    {"train", "train the built-in Llama-style model with emulated FP8, recording probes",
     "usage: fp8prof train [--recipe SPEC|fp32|bf16] [--shadow SPEC ...] [--smooth-swiglu[=fold|published]]\n"
     "                     [--steps N] [--layers L --dim D --hidden F --heads H --ctx T --batch B]\n"
     "                     [--lr LR --warmup W --weight-decay WD] [--seed S] [--data-seed S]\n"
     "                     [--data FILE ...]\n"
     "                     [--val-every K] [--record-every N] [--snapshot-every K]\n"
     "                     [--block-amax-every K] [--gemm-error-every K] [--fp8-head] [--quiet]\n"
     "                     [--acc-bits B --promote N] -o RUN.h5\n"
     "Defaults: hybrid:delayed; 8 shadows that change one factor at a time (format,\n"
     "timing, granularity, scale encoding, per-block delayed): e4m3/e5m2 x delayed/current,\n"
     "e4m3/e5m2:block=1x128:eps=0, e4m3:block=1x128:ue8m0,eps=0, e4m3:block=1x128:delayed,eps=0\n"
     "(--shadow replaces them, --shadow none for none; up to 15; make demo records 13); in a\n"
     "run without --smooth-swiglu the down projection also records its plain recipe smoothed\n"
     "(smooth / smooth=fold shadows) and the GEMM output of both variants;\n"
     "300 steps, 4 layers of dim 96 (--hidden: 8/3 dim) with 4 heads, ctx 128, batch 8,\n"
     "lr 3e-3 with 30 warm-up steps then cosine to 10%, no weight decay, --seed 1 (the\n"
     "weights) and --data-seed 1 (the batches: replicates change one of them),\n"
     "Debian's fortunes as data (else /usr/share/common-licenses), validation every 50\n"
     "steps, snapshots of *.mlp.w2.input at steps 50k and 50k+1 (--snapshot-every),\n"
     "probe statistics every 10 steps (every tensor's amax and every recipe's scale are\n"
     "stored at every step), 1x128-block amaxes of every tensor at steps 10k and 10k+1\n"
     "(--block-amax-every; 0: off); each FP8 GEMM's output SQNR against the same GEMM in\n"
     "FP32 (fprop, dgrad, wgrad) as scalars gemm_sqnr_db/<linear>/<gemm>, at the steps with\n"
     "statistics (--gemm-error-every; 0: off).  Every linear layer's GEMM operands go\n"
     "through the probes (FP8 casts, FP32 accumulation); embedding, norms, attention and\n"
     "the head stay FP32 (--fp8-head casts the head too).  Smooth SwiGLU scales each\n"
     "channel of the down projection's input by 1/its amax before the cast and undoes it\n"
     "either in the weight before the weight's cast (fold, the default) or on the\n"
     "dequantized activation (published: the paper's s^-1 Q(s h)).  --acc-bits B --promote N:\n"
     "every FP8 GEMM accumulates in a B-bit truncating accumulator promoted to FP32 every N\n"
     "products (fp8prof gemm-error's model, docs/gemm.md; B 0: FP32; scalar emulation, about\n"
     "10^7 products a second: small models only).  Ctrl-C ends the run cleanly.\n"
     "Under mpirun (mpirun -np N build/fp8prof train ... -o RUN.h5): data parallel; --batch is the\n"
     "global batch, split into N contiguous shares; gradients are averaged over the ranks before\n"
     "each update; rank R records RUN.rankR.h5 and rank 0 the index RUN.h5; communicator 'dp' (all\n"
     "ranks) is there for reduce=dp recipes.  -np 1 computes what the plain command computes.\n",
     cmd_train},
    {"compare", "recipes side by side after warm-up; one-factor comparisons; a verdict per tensor",
     "usage: fp8prof compare RUN.h5 [MORE.h5 ...] [options]\n"
     "Per tensor and role, after warm-up (reported apart): overflow events (every step for\n"
     "per-tensor scales), overflow, TE overflow, underflow and subnormal rates, SQNR\n"
     "quantiles, scale stability; every pair of recipes that differ in one factor only\n"
     "(format, timing, granularity, scale encoding) with block-bootstrap 95% intervals and\n"
     "Holm-adjusted tests; a verdict delayed-safe / needs JIT / needs block scaling with\n"
     "the deciding rule.  Markdown to stdout.\n"
     OPTS,
     cmd_compare},
    {"replay", "delayed scaling replayed: history 1..1024, max/most_recent, margin 0..3",
     "usage: fp8prof replay RUN.h5 [MORE.h5 ...] [options]\n"
     "From every step's amax (and the exponent histograms of the recorded steps): per\n"
     "setting the overflow events after warm-up (exact) and the bounds of the values\n"
     "overflowing and flushed; the settings no other certainly beats; the choice by a\n"
     "stated rule and its first-half / second-half robustness; each tensor's best setting;\n"
     "the recorded delayed recipes' scales replayed bit for bit.\n"
     OPTS,
     cmd_replay},
    {"dynamics", "amax volatility at tensor, row and block granularity",
     "usage: fp8prof dynamics RUN.h5 [MORE.h5 ...] [options]\n"
     "log2(amax_t/amax_{t-1}) one step apart: per tensor from every step (quantiles,\n"
     "autocorrelation, trend with a Newey-West error); rows, 1x128 blocks and 128x128\n"
     "tiles from the block amaxes at paired steps; per tensor the volatility ratio\n"
     "(block over tensor) with a bootstrap interval — descriptive: on activations and\n"
     "gradients a block position holds other tokens at every step.  What delayed scaling\n"
     "costs at each granularity is `fp8prof claim`.\n"
     OPTS,
     cmd_dynamics},
    {"outliers", "kurtosis, max/RMS, outlier channels; --vs RUN2 side by side",
     "usage: fp8prof outliers RUN.h5 [--vs RUN2.h5] [options]\n"
     "Per tensor kurtosis and max/RMS over steps; from snapshots the top channels, how\n"
     "long they persist and their amax over time; with --vs the same tensors of a second\n"
     "run (e.g. Smooth SwiGLU) with the overflow counts of shared recipes.\n"
     OPTS,
     cmd_outliers},
    {"loss", "does FP8 loss track the baseline: an equivalence test on replicates",
     "usage: fp8prof loss RUN.h5 [MORE.h5 ...] [options]\n"
     "Runs whose /meta agrees on all but the seed are replicates of one arm; the baseline\n"
     "is --baseline's arm, else the arm without FP8 with the most replicates (never the\n"
     "file order).  Per arm the tail loss against the baseline's with a 90% interval from\n"
     "the pooled replicate sd: equivalent (two one-sided tests at --equivalence-margin),\n"
     "different, or cannot tell (always without replicates); the minimum detectable\n"
     "difference and the replicates needed; divergence (--diverge, --diverge-steps).\n"
     OPTS,
     cmd_loss},
    {"advise", "cheapest safe format and recipe per tensor; E4M3 vs E5M2 from the data",
     "usage: fp8prof advise RUN.h5 [MORE.h5 ...] [options]\n"
     "Per tensor the recipe with the fewest bits per element (scales included) with fewer\n"
     "than --min-events overflow events and within --sqnr-margin dB of the best median\n"
     "SQNR; E4M3 vs E5M2 on recipes identical but for the format, with a sign test.\n"
     OPTS,
     cmd_advise},
    {"claim", "delayed scaling at tensor and block granularity on identical tensors: the claim tested",
     "usage: fp8prof claim RUN.h5 [MORE.h5 ...] [options]\n"
     "On every tensor that carries per-tensor delayed and current recipes and per-block\n"
     "delayed and current recipes (block=RxC:delayed with the tensor recipe's history):\n"
     "what current scaling gains over delayed at each granularity, their difference per\n"
     "role with a calibrated 95% interval, the median step, overflow events of all four;\n"
     "the claim 'per-tensor amax suits delayed, per-block amax suits just-in-time scaling'\n"
     "supported / not supported / cannot tell at --claim-margin DB (0.1); phases apart.\n"
     OPTS,
     cmd_claim},
    {"swiglu", "Smooth SwiGLU on identical tensors (paired), across runs beside a placebo",
     "usage: fp8prof swiglu RUN.h5 [MORE.h5 ...] [options]\n"
     "Smoothed shadows (recipe options smooth and smooth=fold) against the plain recipe on\n"
     "the same down-projection tensors and GEMM outputs at every statistics step; runs\n"
     "trained with smoothing against runs without, beside two runs that differ only in the\n"
     "seed (how far runs drift anyway); the gate/up alignment over the run.\n"
     OPTS,
     cmd_swiglu},
    {"report", "every analysis and figure: DIR/index.html and DIR/report.md",
     "usage: fp8prof report RUN.h5 [MORE.h5 ...] -o DIR [options]\n"
     "Runs compare, claim, replay, dynamics, outliers, swiglu, loss and advise, draws the\n"
     "figures with gnuplot and writes DIR/report.md and DIR/index.html (figures inline;\n"
     "opens from disk), headed by a summary.  The loss baseline: --baseline, else the\n"
     "stated rule of `fp8prof loss`.  A run with Smooth SwiGLU and one without (same\n"
     "recipe) are compared side by side, beside a placebo pair.  Also DIR/summary.json\n"
     "(comparisons, claims, smooth_swiglu, loss, phases, replay, warm-up: machine-readable,\n"
     "docs/analyses.md).  Prints the path of index.html.\n"
     OPTS,
     cmd_report},
    {"check", "exit 1 when a run breaks a budget (for a training job's CI)",
     "usage: fp8prof check RUN.h5 [MORE.h5 ...] [--max-overflow-events N] [--max-overflow-pct X]\n"
     "                     [--max-underflow-pct X] [--min-sqnr-db Y] [--max-warmup-steps K]\n"
     "                     [--from-step S] [--recipe SPEC|all] [--tensor PATTERN] [--json]\n"
     "Holds every tensor, after warm-up (or from step S on: start-up is not behaviour),\n"
     "under its active recipe (or SPEC, or every recipe)\n"
     "to each budget given; lists every breach.  Exit 0: within budget; 1: a budget is\n"
     "broken; 2: usage error or nothing to check.  Definitions: docs/analyses.md.\n",
     cmd_check},
    {"ranks", "a multi-rank run across its ranks: amax skew, reduction cost, scales that differ in a group",
     "usage: fp8prof ranks RUN.h5 [--json] [--check] [--heatmap TENSOR -o DIR]\n"
     "RUN.h5 is the index of a multi-rank run (fp8_probe_open_mpi, synth --ranks or under mpirun,\n"
     "train under mpirun).  Per tensor: rank skew, max/min amax over ranks per step (median, p95,\n"
     "max).  Per recipe with reduce=GROUP: steps where two ranks of one instance of GROUP cast\n"
     "with different scales (the wrong-group bug), and the binades the reduction moves each\n"
     "rank's scale.  Communicators registered as tp / dp are checked against the declared\n"
     "topology (/meta parallel_tp, tp ranks consecutive).  --check: exit status 3 when scales\n"
     "differ or a communicator is wrong.  --heatmap: rank x step map of log2(amax) of the first\n"
     "tensor matching the pattern (DIR/ranks_heatmap.png).\n",
     cmd_ranks},
    {"gemm-error", "an FP8 GEMM with a limited-precision accumulator against the exact product",
     "usage: fp8prof gemm-error [--format e4m3] [--k 4096] [--acc-bits 14] [--promote N] [--m 64 --n 64]\n"
     "                          [--round] [--seed S] [--json]\n"
     "       fp8prof gemm-error --sweep -o DIR [--format F] [--acc-bits B] [--m M --n N]\n"
     "Gaussian operands cast to FORMAT with per-tensor current scales, multiplied with an\n"
     "accumulator that keeps B significant bits (dropped bits truncated, or --round to\n"
     "nearest), promoted to FP32 every N products (0: never); the relative error against\n"
     "the exact product of the same FP8 operands, Frobenius and largest element (outputs of\n"
     "at least a tenth of the rms), beside float32 accumulation.  --sweep: K from 128 to\n"
     "16384 without promotion, with promotion every 128 and in float32: a table,\n"
     "DIR/gemm_error.tsv and DIR/fig_gemm_error.png.  The model: docs/gemm.md.\n",
     cmd_gemm_error},
    {"coverage", "how often the report's 95% intervals cover, by simulation at a series' length and autocorrelation",
     "usage: fp8prof coverage [--n 25,49,100,200] [--rho 0,0.5,0.8,0.9] [--sims 2000] [--boot 400] [--seed 1]\n"
     "Simulates Gaussian AR(1) series of each length n and lag-1 correlation rho (true mean\n"
     "0) and prints, as a Markdown table, how often each 95% interval holds the mean: the\n"
     "calibrated interval every analysis uses, the plain Newey-West t interval, and a\n"
     "circular block bootstrap with --boot resamples (0: skip it).  Definitions:\n"
     "docs/analyses.md, \"Inference\".\n",
     cmd_coverage},
    {"tour", "a first look: the formats and what casting and the recipes do to a few values",
     "usage: fp8prof tour\n"
     "Shows the format table, what casting does to a handful of values and how each\n"
     "recipe scales a small tensor.  The full demo (ten training runs and their\n"
     "report) is `make demo`.\n",
     cmd_tour},
    {NULL, NULL, NULL, NULL},
};

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("fp8prof: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

int cli_number(const char *cmd, const char *opt, const char *v, double lo, double hi, int integer, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    /* decimal only (strtod also reads "0x10", "inf", "nan"); an integer is
     * digits alone (not "1e3" or "1.0"); a value strtod under- or overflows
     * ("1e-400") is not the number written */
    int plain = *v && strspn(v, integer ? "+-0123456789" : "+-0123456789.eE") == strlen(v);
    if (!plain || *end || errno == ERANGE || !(d >= lo && d <= hi) || (integer && d != (double)(long long)d))
        return cli_usage_error("%s: %s '%s' is not %s in %g..%g", cmd, opt, v,
                               integer ? "a whole number (digits only)" : "a decimal number", lo, hi);
    *out = d;
    return 0;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    return 0;
}

int cli_help(const char *name)
{
    for (const cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0) {
            fputs(c->usage, stdout);
            return 0;
        }
    return 2;
}

static void overview(FILE *out)
{
    fputs("fp8prof — profile the numerics of FP8 training\n\n"
          "usage: fp8prof COMMAND [ARGS...]\n"
          "       fp8prof COMMAND --help\n\ncommands:\n",
          out);
    for (const cli_command *c = cli_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
}

int main(int argc, char **argv)
{
    /* HDF5's exit handler closes whatever a damaged file left open and, when
     * it cannot, prints "infinite loop closing library" after our own clear
     * message; the process ends anyway, so skip it */
    H5dont_atexit();
    if (argc < 2) {
        overview(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        if (argc > 2)
            return cli_help(argv[2]) == 0 ? 0 : cli_usage_error("unknown command '%s'", argv[2]);
        overview(stdout);
        return 0;
    }
    for (const cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0) {
            if (cli_wants_help(argc - 1, argv + 1))
                return cli_help(c->name);
            int rc = c->run(argc - 1, argv + 1);
            if (fflush(stdout) != 0 && rc == 0) {
                perror("fp8prof: writing output");
                rc = 1;
            }
            return rc;
        }
    overview(stderr);
    return cli_usage_error("unknown command '%s'", argv[1]);
}
