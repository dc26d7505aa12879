# exphist.gp — a tensor's |x| exponent histogram (top) and, below it, one row
# per recipe: the window of |x| it represents after scaling, from the flush
# threshold to the overflow threshold (log2, tensor units).
# inputs: out, data (tsv: log2_lo count), windows (tsv: row label lo hi rgb),
# nw (rows), wt (the rows' names as a gnuplot tic list), xlo, xhi, ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,640 font ",10" } else { set terminal svg size 1000,640 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set multiplot title ttl noenhanced
    set lmargin at screen 0.30
    set rmargin at screen 0.97
    set xrange [xlo:xhi]
    set grid x
    # top: the histogram
    set tmargin at screen 0.90
    set bmargin at screen 0.50
    set ylabel "values per binade (log)"
    set logscale y
    set format x ""
    unset key
    set style fill solid 0.6 border lc rgb "#444444"
    set boxwidth 0.9
    plot data using ($1 + 0.5):2 with boxes lc rgb "#4477aa" notitle
    # bottom: one row per recipe, named on the left
    unset logscale y
    set tmargin at screen 0.47
    set bmargin at screen 0.10
    set format x "%g"
    set xlabel "log2 |x|   (binade [2^k, 2^{k+1}))"
    set ylabel ""
    set yrange [nw + 0.5:0.5]
    eval "set ytics ".wt." noenhanced"
    plot windows using 3:1:($4 - $3):(0):5 with vectors nohead lw 8 lc rgb variable notitle
    unset multiplot
    unset output
}
