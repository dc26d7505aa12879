# pareto.gp — the delayed-scaling replay of one run: every setting's
# overflow events after warm-up (exact, x, log scale, 0 drawn at 0.5) against
# the share of values flushed to zero (y, bars from the rigorous lower to the
# upper bound); the settings no other one certainly beats in red (some
# labelled), TE's default (1024/max/0) as a black square.
# inputs: out, data (tsv: events mid lo hi front te label), ttl, xmax, ylo, yhi
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,600 font ",10" } else { set terminal svg size 1000,600 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "overflow events after warm-up (tensor-steps; log scale, 0 drawn at 0.5)"
    set ylabel "values flushed to zero (% of elements, bounds)"
    set logscale x
    set xrange [0.3:xmax]
    set yrange [ylo:yhi]
    set grid
    set key below
    plot data using 1:2:3:4 every ::1 with yerrorbars pt 7 ps 0.8 lc rgb "#999999" title "setting", \
         data using ($5 > 0 ? $1 : 1/0):2:3:4 every ::1 with yerrorbars pt 7 ps 1.2 lc rgb "#cc3311" title "no other setting certainly better", \
         data using ($5 > 0 && strcol(7) ne "-" ? $1 : 1/0):2:7 every ::1 with labels rotate by 35 left offset 0.6,0.6 font ",8" noenhanced notitle, \
         data using ($6 > 0 ? $1 : 1/0):2 every ::1 with points pt 5 ps 1.8 lc rgb "#000000" title "TE default 1024/max/0"
    unset output
}
