# heatmap.gp — layer x step map of a percentage (overflow % or underflow %
# of the layer's elements under one recipe), like BioNeMo's FP8 analyzer.
# inputs: out, data (tsv: step layer value, blank line between steps), ttl,
# cblab, mode (0: all zero; 1: log colour scale, white = 0; 2: underflow in
# four discrete bands at BioNeMo's 0.5 / 2 / 4 % thresholds), cbmin, cbmax, cbt (the
# colour bar's tics, a gnuplot tic list)
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "training step"
    set ylabel "layer"
    set cblabel cblab noenhanced
    if (mode == 2) {
        # four discrete bands (fine / watch / act / a problem): each colour
        # constant over its band, the edges at the thresholds
        set palette defined (0 "#ffffff", 0.4999 "#ffffff", 0.5 "#fee391", 1.9999 "#fee391", 2 "#fe9929", \
                             3.9999 "#fe9929", 4 "#b30000", cbmax "#b30000")
        set cbrange [0:cbmax]
        eval "set cbtics ".cbt
    } else {
        if (mode == 1) {
            set palette defined (0 "#fff5eb", 1 "#fdae6b", 2 "#e6550d", 3 "#7f2704")
            set logscale cb
            set cbrange [cbmin:cbmax]
            eval "set cbtics ".cbt
        } else {
            set palette defined (0 "#ffffff", 1 "#ffffff")
            set cbrange [0:1]
            set cbtics ("0" 0)
        }
    }
    set ytics 1
    set autoscale xfix
    set autoscale yfix
    unset key
    # zeros stay white on the log scale (no colour for log 0)
    plot data using 1:2:(mode == 1 && $3 <= 0 ? 1/0 : $3) with image
    unset output
}
