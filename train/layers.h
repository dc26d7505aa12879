/*
 * layers.h — forward and backward of every layer of the built-in Llama-style
 * model (llm.c style: each *_forward beside its *_backward; arguments are
 * outputs, inputs, weights, sizes; backward functions ADD into gradients).
 * GEMMs go through OpenBLAS cblas_sgemm; accumulation is FP32.
 *
 * Shapes: N = B*T rows; C model width; H SwiGLU hidden width; V vocabulary;
 * NH heads of hs = C/NH channels; all row-major.
 */
#ifndef FP8_LAYERS_H
#define FP8_LAYERS_H

#include <stddef.h>

/* out[N,C] = wte[tokens[n], :] */
void embedding_forward(float *out, const int *tokens, const float *wte, size_t N, size_t C);
void embedding_backward(float *dwte, const float *dout, const int *tokens, size_t N, size_t C);

/* out = x / rms(x) * w, rms = sqrt(mean(x^2) + eps); rstd[N] saved */
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, size_t N, size_t C);
void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                      size_t N, size_t C);

/* out[N,OC] = inp[N,C] . w[OC,C]^T  (no bias, as Llama) */
void linear_forward(float *out, const float *inp, const float *w, size_t N, size_t C, size_t OC);
void linear_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, size_t N, size_t C,
                     size_t OC);

/* rotary position embedding, in place on x[B,T,NH,hs] (hs even), base 10000 */
void rope_forward(float *x, size_t B, size_t T, size_t NH, size_t hs);
void rope_backward(float *dx, size_t B, size_t T, size_t NH, size_t hs);

/* causal multi-head attention: q, k, v, out [B,T,C]; att [B,NH,T,T] probabilities
 * (on sgemm); the _ref versions are the plain loops they are tested against */
void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, size_t B, size_t T,
                       size_t C, size_t NH);
void attention_forward_ref(float *out, float *att, const float *q, const float *k, const float *v, size_t B,
                           size_t T, size_t C, size_t NH);
void attention_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                            const float *k, const float *v, size_t B, size_t T, size_t C, size_t NH);
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                        const float *k, const float *v, size_t B, size_t T, size_t C, size_t NH);

/* out = silu(g) * u, elementwise over n */
void swiglu_forward(float *out, const float *g, const float *u, size_t n);
void swiglu_backward(float *dg, float *du, const float *dout, const float *g, const float *u, size_t n);

/* mean cross-entropy of logits[N,V] against targets[N]; probs saved;
 * backward gives dlogits for d(mean loss) = 1 */
float crossentropy_forward(float *probs, const float *logits, const int *targets, size_t N, size_t V);
void crossentropy_backward(float *dlogits, const float *probs, const int *targets, size_t N, size_t V);

#endif
