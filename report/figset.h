/*
 * figset.h — internal to the figures (figures.c, fig_util.c, fig_tensor.c,
 * fig_run.c, fig_answers.c): the set being drawn, one colour per recipe
 * across every figure, and the small helpers each figure uses.
 */
#ifndef FP8_AN_FIGSET_H
#define FP8_AN_FIGSET_H

#include <stdio.h>

#include "analysis.h"

#define FIG_MAX_COLOURS 64

typedef struct {
    an_ctx *c;
    an_figure *figs;
    int max, n, failed, dropped;
    /* recipe label -> colour, in order of first use (fig_colour) */
    char label[FIG_MAX_COLOURS][96];
    int nlabel;
} figset;

/* Render plots/<script>.gp into outdir/<name>.{png,svg,gp} with vars and
 * keep it for the report under section with caption. */
void fig_draw(figset *F, const char *script, const char *name, const char *vars, const char *section,
              const char *caption);

/* A figure left out because it would show nothing (all zero, no data):
 * the report says why, in one line, where the figure would have been. */
void fig_skip(figset *F, const char *section, const char *why);

/* The colour (0xRRGGBB) of a recipe's canonical label: the same in every
 * figure of the report (a colour-blind-safe palette of 12, then repeats). */
unsigned fig_colour(figset *F, const char *label);

/* outdir/name opened for writing (C locale numbers), NULL on failure. */
FILE *fig_data(const figset *F, const char *name);

/* 1 when outdir/name has a row below its header line. */
int fig_has_rows(const char *dir, const char *name);

/* the figures */
void fig_amax(figset *F, const an_run *a, int t);
void fig_exphist(figset *F, const an_run *a, int t);
void fig_blockscale(figset *F, const an_run *a, int t);
void fig_layers(figset *F, const an_run *a);
void fig_heat(figset *F, const an_run *a, int r, int underflow);
void fig_pareto(figset *F, const an_run *a);
void fig_loss(figset *F);
void fig_channels(figset *F);
void fig_effects(figset *F, int factor);
void fig_claim(figset *F);

#endif
