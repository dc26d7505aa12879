/*
 * train.h — the built-in training run: data with no download, the training
 * loop with its schedule, validation and probes (fp8prof train).
 */
#ifndef FP8_TRAIN_H
#define FP8_TRAIN_H

#include "model.h"

typedef struct {
    model_config model;
    long steps;
    float lr;                 /* peak learning rate                        */
    long warmup;              /* linear warm-up steps, then cosine to 10%  */
    float weight_decay;
    unsigned long seed;       /* the weights' initialisation               */
    unsigned long data_seed;  /* the batches' order (1): replicates that change
                                 only the initialisation keep it            */
    const char *recipe;       /* "fp32", "bf16" or a recipe spec            */
    const char *shadows[15];
    int nshadow;
    int smooth_swiglu, fp8_head; /* smooth_swiglu: a model_smooth */
    const char *const *data;  /* text files; NULL: fortunes, else licenses */
    int ndata;
    const char *out;          /* run file                                  */
    long val_every;           /* validation (and snapshots) every K steps  */
    long record_every;        /* probe statistics every N steps (10)       */
    long gemm_every;          /* GEMM output error every N steps (-1: = record_every; 0 off) */
    fp8_acc_model acc;        /* FP8 GEMM accumulator ({0, 0}: FP32, cblas_sgemm) */
    long snapshot_every;      /* snapshots of *.mlp.w2.input at steps k*K and k*K+1 (50) */
    long block_amax_every;    /* every tensor's 1x128-block amaxes at steps k*K and k*K+1 (10; 0: off) */
    int quiet;                /* no progress output                        */
    int mpi;                  /* 1: data-parallel over MPI_COMM_WORLD (MPI
                                 initialised by the caller): model.batch is
                                 the global batch, split across the ranks   */
} train_options;

train_options train_defaults(void);

/* Train; returns 0, 1 on failure (message printed), 130 if interrupted
 * (everything so far is flushed). */
int train_run(const train_options *o);

#endif
