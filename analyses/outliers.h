/*
 * outliers.h — one tensor's outlier measures (outliers analysis, report).
 */
#ifndef FP8_AN_OUTLIERS_H
#define FP8_AN_OUTLIERS_H

#include "analysis.h"

typedef struct {
    size_t steps, snapshots, nchan;
    double kurt_p50, kurt_first, kurt_last;    /* Pearson kurtosis over recorded steps */
    double maxrms_p50, maxrms_max, maxrms_last; /* amax / RMS                          */
    double chan_ratio;                         /* top channel amax / median, last snapshot */
    int chan[8];                               /* top channels, largest first          */
    double chan_persist[8];                    /* share of snapshots above 4x median   */
    int64_t chan_first[8];                     /* first such snapshot step             */
} an_outl;

/* Kurtosis and max/RMS of tensor t from its records (no snapshots). */
int an_tensor_outliers(const an_run *a, int t, an_outl *o);

#endif
