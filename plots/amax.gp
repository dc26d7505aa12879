# amax.gp — one tensor's amax per step against the range of the delayed
# scale it was cast with: above `over` a value overflows, at or below
# `under` it flushes to zero; overflow events are marked, warm-up steps grey.
# inputs: out, data (tsv: step amax over under event warmup), ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "training step"
    set ylabel "|x| (tensor units, log scale)"
    set logscale y
    set format y "10^{%T}"
    set grid
    set key inside left top opaque box
    set style fill transparent solid 0.15 noborder
    plot data using 1:4:3 every ::1 with filledcurves lc rgb "#4477aa" title "representable range (delayed scale)", \
         data using 1:2 every ::1 with linespoints lw 2 pt 7 ps 0.4 lc rgb "#222222" title "amax", \
         data using 1:($6 > 0 ? $2 : 1/0) every ::1 with points pt 7 ps 1.2 lc rgb "#aaaaaa" title "warm-up", \
         data using 1:($5 > 0 ? $2 : 1/0) every ::1 with points pt 9 ps 1.6 lc rgb "#cc3311" title "overflow event"
    unset output
}
