# loss.gp — loss of several runs (smoothed, top) and their relative
# difference to the baseline arm's mean curve (smoothed, bottom; only with two
# runs or more) with the replicates' 95% band when the baseline has
# replicates.  Reads loss_curves.tsv and loss_diff.tsv as written by the loss
# analysis (column 7: the band, NaN without replicates).
# inputs: out, curves, diffs, runs (space-separated labels, baseline first), ttl
set datafile separator "\t"
n = words(runs)
# seven colours that stay apart for common colour-vision deficiencies
# (Paul Tol's bright scheme), then the same seven dashed, so no two runs
# share a line
array pal[7] = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#555555"]
do for [i=1:7] { set linetype i lc rgb pal[i] lw 2 }
do for [i=8:14] { set linetype i lc rgb pal[i - 7] lw 2 dt 2 }
do for [i=15:21] { set linetype i lc rgb pal[i - 14] lw 2 dt 3 }
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,700 font ",10" } else { set terminal svg size 1000,700 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    if (n > 1) { set multiplot layout 2,1 title ttl noenhanced } else { set title ttl noenhanced }
    set grid
    set key outside right top noenhanced
    set xlabel "training step"
    set ylabel "training loss (nats/token, smoothed)"
    plot for [i=1:n] curves using 2:(strcol(1) eq word(runs, i) ? $4 : 1/0) every ::1 with lines lw 2 lc i title word(runs, i)
    if (n > 1) {
        set ylabel "relative difference to baseline (%, smoothed)"
        set style fill transparent solid 0.2 noborder
        plot diffs using 3:(strcol(1) eq word(runs, 2) && $7 == $7 ? -100 * $7 : 1/0):(100 * $7) every ::1 with filledcurves lc rgb "#888888" title "replicate spread (95%)", \
             for [i=2:n] diffs using 3:(strcol(1) eq word(runs, i) ? 100 * $6 : 1/0) every ::1 with lines lw 2 lc i title word(runs, i), \
             0 with lines lc rgb "#000000" dt 2 notitle
        unset multiplot
    }
    unset output
}
