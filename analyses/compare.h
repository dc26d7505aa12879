/*
 * compare.h — what compare uses and lends: the series statistics and
 * verdicts of analyses/core, its notes (compare_notes.h) and the question
 * across runs (where.h).
 */
#ifndef FP8_AN_COMPARE_H
#define FP8_AN_COMPARE_H

#include "analysis.h"

#include "compare_notes.h"
#include "series.h"
#include "verdicts.h"
#include "where.h"

#endif
