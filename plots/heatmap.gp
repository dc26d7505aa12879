# heatmap.gp — layer x step map of a percentage (overflow % or underflow %
# of the layer's elements under one recipe), like BioNeMo's FP8 analyzer.
# Log colour scale (a step-0 burst must not hide the rest); white = 0.
# inputs: out, data (tsv: step layer value, blank line between steps), ttl, cblab,
# logcb (1: log colour scale; 0 when every value is 0)
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "training step"
    set ylabel "layer"
    set cblabel cblab
    set palette defined (0 "#ffffff", 1 "#fdd49e", 2 "#fc8d59", 3 "#d7301f", 4 "#7f0000")
    if (logcb) { set logscale cb; set format cb "10^{%T}"; set cbrange [*:*] } else { set cbrange [0:1] }
    set ytics 1
    set autoscale xfix
    set autoscale yfix
    unset key
    plot data using 1:2:3 with image
    unset output
}
