/*
 * report_html.h — the report's Markdown (what the analyses write) as one
 * self-contained HTML page: anchors as GitHub makes them, sections after the
 * summary folded, long tables folded after their first rows, figures
 * embedded (SVG or PNG data URIs read from dir).
 */
#ifndef FP8_AN_REPORT_HTML_H
#define FP8_AN_REPORT_HTML_H

#include <stdio.h>

/* Write md as HTML to f; returns how many figures could not be embedded
 * (missing files). */
int an_report_html(const char *md, const char *dir, FILE *f);

#endif
