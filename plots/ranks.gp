# ranks.gp — rank x step map of one tensor's log2(amax): which ranks see
# the large values, and when.
# inputs: out, data (tsv: step rank log2amax, blank line between steps), ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "training step"
    set ylabel "rank"
    set cblabel "log2(amax)"
    set autoscale xfix
    set autoscale yfix
    set palette defined (0 "#313695", 1 "#74add1", 2 "#ffffbf", 3 "#f46d43", 4 "#a50026")
    plot data using 1:2:3 with image notitle
}
