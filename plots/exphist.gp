# exphist.gp — a tensor's |x| exponent histogram against each recipe's
# representable window after scaling: [log2 of the flush threshold, log2 of
# the overflow threshold] in tensor units.
# inputs: out, data (tsv: log2_lo count), windows (tsv: label lo hi level), ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "log2 |x|  (binade [2^k, 2^{k+1}))"
    set ylabel "values per binade"
    set y2label "representable window per recipe"
    set logscale y
    set y2range [0:1]
    unset y2tics
    set grid x
    set key below
    set style fill solid 0.6 border lc rgb "#444444"
    set boxwidth 0.9
    plot data using ($1 + 0.5):2 with boxes lc rgb "#4477aa" title "|x| per binade", \
         windows using 2:4:($3 - $2):(0):(column(0) + 1) axes x1y2 with vectors nohead lw 6 lc variable title "window (see labels)", \
         windows using 2:($4 + 0.03):1 axes x1y2 with labels left offset 0,0.3 noenhanced notitle
    unset output
}
