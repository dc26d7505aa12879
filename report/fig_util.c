/*
 * fig_util.c — what every figure uses (figset.h): drawing a gnuplot script
 * as a separate process whose exit status is checked, a figure left out
 * with the reason, one colour per recipe across the report, data files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figset.h"
#include "plots.h"

void fig_draw(figset *F, const char *script, const char *name, const char *vars, const char *section,
              const char *caption)
{
    if (F->n == F->max) {
        F->dropped++;
        return;
    }
    char msg[1024];
    if (plot_render(F->c->outdir, script, name, vars, msg, (int)sizeof msg) != 0) {
        fprintf(stderr, "fp8prof: figure %s: %s\n", name, msg);
        F->failed++;
        return;
    }
    an_figure *f = &F->figs[F->n++];
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->caption, sizeof f->caption, "%s", caption);
    snprintf(f->section, sizeof f->section, "%s", section);
}

void fig_skip(figset *F, const char *section, const char *why)
{
    if (F->n == F->max) {
        F->dropped++;
        return;
    }
    an_figure *f = &F->figs[F->n++];
    f->name[0] = 0; /* not drawn: the report prints the reason instead */
    snprintf(f->caption, sizeof f->caption, "%s", why);
    snprintf(f->section, sizeof f->section, "%s", section);
}

unsigned fig_colour(figset *F, const char *label)
{
    /* Paul Tol's bright and muted qualitative schemes: distinct for common
     * colour-vision deficiencies, readable on white */
    static const unsigned pal[12] = {0x4477AA, 0xEE6677, 0x228833, 0xCCBB44, 0x66CCEE, 0xAA3377,
                                     0x332288, 0x117733, 0x882255, 0x999933, 0x44AA99, 0x777777};
    int i = 0;
    while (i < F->nlabel && strcmp(F->label[i], label) != 0)
        i++;
    if (i == F->nlabel && F->nlabel < FIG_MAX_COLOURS)
        snprintf(F->label[F->nlabel++], sizeof F->label[0], "%s", label);
    return pal[i % 12];
}

FILE *fig_data(const figset *F, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", F->c->outdir, name);
    return fopen(p, "w");
}

int fig_has_rows(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    int ch, lines = 0;
    while (f && lines < 2 && (ch = getc(f)) != EOF)
        lines += ch == '\n';
    if (f)
        fclose(f);
    return lines >= 2;
}
