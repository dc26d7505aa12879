/*
 * ranks.h — analyses across the ranks of a multi-rank run (fp8_ranks.h):
 * rank skew of each tensor's amax, what amax reduction costs each rank,
 * scales that differ inside a group whose recipe reduces over it (the
 * wrong-group bug), communicators whose members are not the declared
 * topology's.  Reads every rank's registries, metadata and every-step
 * series (/steps), never the records.  Definitions: docs/analyses.md.
 */
#ifndef FP8_ANALYSES_RANKS_H
#define FP8_ANALYSES_RANKS_H

#include <stdint.h>
#include <stdio.h>

#include "fp8_store.h"

typedef struct {
    int t, k;                 /* tensor, recipe (rank 0's ids)               */
    char group[24];           /* the recipe's reduce= group                   */
    int ninst;                /* instances of the group checked               */
    size_t steps, differ;     /* steps with every rank's scale; of them, steps
                                 where two ranks of one instance differ        */
    int64_t first_step;       /* first differing step (-1: none)              */
    int rank_a, rank_b;       /* two ranks that differ there                  */
    float scale_a, scale_b;
    double cost_mean, cost_max; /* binades: log2(group amax / rank amax) over
                                   (rank, step) with both positive and finite   */
} an_rank_scales;

typedef struct {
    int t;
    size_t steps;             /* steps with a positive finite amax on >= 2 ranks */
    double skew_median, skew_p95, skew_max; /* max/min amax over ranks, per step */
    int64_t skew_max_step;
    int top_rank;             /* the rank whose amax is the largest most often */
    double top_share;
} an_rank_skew;

typedef struct {
    char index_path[1024];
    int nranks, tp, dp, simulated;
    int ntensors, nrecipes;
    char (*tname)[FP8_NAME_MAX];
    char (*rspec)[FP8_SPEC_MAX];
    int64_t s0;
    size_t nsteps;
    float *amax;              /* [rank][tensor][step - s0], NaN: no row       */
    an_rank_skew *skew;       /* [ntensors]                                   */
    an_rank_scales *scales;   /* [nscales]: reducing (tensor, recipe) pairs   */
    size_t nscales;
    int nmember_bad;          /* ranks whose communicator is not the topology's */
    char member_msg[8][320];  /* the first few, said                            */
    size_t skipped_rows;      /* rows naming a tensor/recipe rank 0 lacks, or a
                                 step outside rank 0's range                     */
} an_ranks;

/* Load and analyse the multi-rank run whose index is at path: 0, or 1
 * with a message (fp8_error_message) naming the rank file and problem. */
int an_ranks_load(const char *path, an_ranks *out);
void an_ranks_free(an_ranks *r);

/* Plain text (the ranks command), JSON, and a Markdown section. */
void an_ranks_print(const an_ranks *r, FILE *f);
void an_ranks_json(const an_ranks *r, FILE *f);
void an_ranks_markdown(const an_ranks *r, const char *label, FILE *md);
/* Every tensor's skew and every reducing recipe's scale check as TSV (either may be NULL). */
void an_ranks_tsv(const an_ranks *r, FILE *skew, FILE *scales);
/* One line: ranks, skew per role, the scale verdict (for the report's findings). */
void an_ranks_summary(const an_ranks *r, char *out, size_t cap);

/* A rank x step heat map of log2(amax) of the first tensor matching
 * pattern (NULL: the first): TSV into dir/NAME.tsv and, with gnuplot,
 * dir/NAME.png and .svg.  0, or 1 with a message. */
int an_ranks_heatmap(const an_ranks *r, const char *pattern, const char *dir, const char *name);
/* The tensor with the largest median rank skew (-1: none). */
int an_ranks_most_skewed(const an_ranks *r);

/* Problems an expert would act on: differing scales or bad membership. */
static inline int an_ranks_bad(const an_ranks *r)
{
    int bad = r->nmember_bad > 0;
    for (size_t i = 0; i < r->nscales; i++)
        bad |= r->scales[i].differ > 0;
    return bad;
}

#endif
