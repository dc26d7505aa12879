/*
 * plots.h — the gnuplot side: scripts (the .gp files of plots/, embedded at build time)
 * are written next to their data files with the variables they need, then
 * gnuplot runs on them as a separate process whose exit status is checked.
 * Every script draws PNG (pngcairo) and SVG of the same figure.
 */
#ifndef FP8_PLOTS_H
#define FP8_PLOTS_H

typedef struct {
    const char *name, *text;
} plot_script;

extern const plot_script plot_scripts[]; /* ends with {0, 0} */

/* Write DIR/OUT.gp (the lines of vars, then script's text; vars are gnuplot
 * assignments such as "data='x.tsv'") and run `gnuplot OUT.gp` in DIR.
 * The script writes OUT.png and OUT.svg.  0 when gnuplot exits 0 and
 * OUT.png is a non-empty file; else 1 with the reason in msg. */
int plot_render(const char *dir, const char *script, const char *out, const char *vars, char *msg, int msglen);

/* 1 when PNG file path is a PNG whose header says width x height. */
int plot_png_size(const char *path, int *width, int *height);

/* A string as a single-quoted gnuplot literal (quotes doubled) into buf. */
const char *plot_quote(const char *s, char *buf, int n);

#endif
