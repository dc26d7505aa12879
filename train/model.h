/*
 * model.h — the built-in Llama-style language model and its FP8 emulation.
 *
 * Decoder-only: byte embedding (V = 256), per layer RMSNorm -> causal
 * multi-head attention with RoPE -> residual, RMSNorm -> SwiGLU feed-forward
 * w2(silu(x w1) * (x w3)) -> residual; final RMSNorm and an (untied) output
 * head.  FP32 master weights.  Every linear layer's three GEMMs (forward,
 * input-gradient, weight-gradient) take their operands through the probe
 * API's record-and-apply call, so they are cast to FP8 by the active recipe
 * and recorded; the products are computed in FP32 (cblas_sgemm).
 */
#ifndef FP8_MODEL_H
#define FP8_MODEL_H

#include <stddef.h>

#include "fp8_gemm.h"
#include "fp8_probe.h"

/* The model reads bytes: its vocabulary is every byte value. */
#define MODEL_VOCAB 256

typedef struct {
    int layers, dim, heads, hidden, ctx, batch; /* hidden = 8/3 dim rounded to 16 */
    int vocab;                                  /* MODEL_VOCAB (model_create sets it) */
} model_config;

typedef enum { PREC_FP32 = 0, PREC_BF16, PREC_FP8 } model_precision;

/* Smooth SwiGLU (Fishman et al. 2024): off, its per-channel scale folded
 * into the down projection's weight before the weight's cast, or as the
 * paper writes it, undone on the dequantized activation (model.c). */
typedef enum { SMOOTH_OFF = 0, SMOOTH_FOLD, SMOOTH_PUBLISHED } model_smooth;

typedef struct model model;

/* Build a model with weights drawn from seed.  prec: fp32, bf16 (operands
 * rounded to bf16), or fp8 (active recipe spec + shadows, recorded in run;
 * run may be NULL for an unrecorded fp8 model only when recipe is given).
 * smooth_swiglu: a model_smooth.  fp8_head also casts the output head. */
model *model_create(const model_config *cfg, unsigned long seed, model_precision prec, const char *recipe,
                    const char *const *shadows, int nshadow, fp8_probe_run *run, int smooth_swiglu, int fp8_head);
void model_free(model *m);
/* Every `every` training steps (0: never; FP8 models with a run only),
 * record each linear layer's GEMM output error: the SQNR of its FP8 GEMM's
 * output (fprop, dgrad, wgrad) against the same GEMM on the unquantized
 * operands, as scalars "gemm_sqnr_db/<linear>/<gemm>" (docs/analyses.md). */
void model_set_gemm_error(model *m, long every);
/* Train with FP8 GEMMs whose products accumulate under acc (fp8_gemm.h:
 * acc_bits, promote, round) instead of FP32 (cblas_sgemm), in all three
 * GEMMs of every FP8 linear (fprop K = in features, dgrad K = out features,
 * wgrad K = tokens); NULL or {0, 0}: FP32.  FP8_EINVAL on a bad model or a
 * model without FP8 GEMMs.  Emulation is scalar: ~10^7 products a second. */
int model_set_accumulator(model *m, const fp8_acc_model *acc);

/* Forward over tokens[B*T] with targets[B*T]; returns the mean loss.  step
 * labels the probes' records.  With train = 0 no probe records (validation). */
float model_forward(model *m, const int *tokens, const int *targets, long step, int train);

/* Backward of the last forward (gradients zeroed first), then AdamW. */
void model_backward(model *m, long step);
void model_adamw(model *m, float lr, float beta1, float beta2, float eps, float weight_decay, long t);

/* Global gradient norm of the last backward. */
float model_grad_norm(const model *m);
/* The flat gradient array (every parameter's, model_num_params floats):
 * what data parallelism all-reduces between backward and the update. */
float *model_grads(model *m);
/* The flat parameter array (model_num_params floats, in the order of
 * model_grads): what a checkpoint or a finite-difference check reads. */
float *model_params(model *m);

size_t model_num_params(const model *m);
const model_config *model_cfg(const model *m);

/* Smooth SwiGLU's early warning, as scalars of step (after a forward):
 * per layer the cosine of the gate and up projections' rows of every hidden
 * channel (max, 99th percentile, mean, and of the channel with the largest
 * amax) and that amax over the median channel's (model.c). */
void model_record_swiglu(model *m, long step);

/* The down projection's input (SwiGLU output, before any smoothing) of
 * layer l from the last forward: [batch*ctx, hidden]. */
const float *model_swiglu_out(const model *m, int layer);

#endif
