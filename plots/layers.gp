# layers.gp — per layer and tensor, the magnitudes a scale has to carry: a
# bar from log2 of the smallest non-zero |x| to log2 of the amax (medians over
# steps), forward tensors blue, gradients red, one row per tensor (layer by
# layer, named on the left); dashed: the unscaled ranges of E4M3 and E5M2.
# inputs: out, data (tsv: row lo amax grad label, header line), rows, xlo, xhi, ttl
set datafile separator "\t"
h = 160 + 16 * rows
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,h font ",9" } else { set terminal svg size 1000,h dynamic font ",9" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "log2 |x|  (tensor units, unscaled)"
    set yrange [rows - 0.5:-0.5]
    set xrange [xlo:xhi]
    set ytics noenhanced
    set grid x
    set key below
    set lmargin 24
    # the formats' unscaled ranges: E4M3 2^-9 .. 448, E5M2 2^-16 .. 57344
    set arrow 1 from -9, graph 0 to -9, graph 1 nohead dt 2 lw 1.5 lc rgb "#228833"
    set arrow 2 from log(448)/log(2), graph 0 to log(448)/log(2), graph 1 nohead dt 2 lw 1.5 lc rgb "#228833"
    set arrow 3 from -16, graph 0 to -16, graph 1 nohead dt 3 lw 1.5 lc rgb "#aa3377"
    set arrow 4 from log(57344)/log(2), graph 0 to log(57344)/log(2), graph 1 nohead dt 3 lw 1.5 lc rgb "#aa3377"
    set label 1 "E4M3" at -9, graph 1.01 center tc rgb "#228833"
    set label 2 "E5M2" at -16, graph 1.01 center tc rgb "#aa3377"
    plot data using ($4 == 0 ? $2 : 1/0):1:($3 - $2):(0):ytic(5) every ::1 with vectors nohead lw 5 lc rgb "#4477aa" title "forward (activations, weights)", \
         data using ($4 == 1 ? $2 : 1/0):1:($3 - $2):(0):ytic(5) every ::1 with vectors nohead lw 5 lc rgb "#ee6677" title "gradients", \
         data using 3:1 every ::1 with points pt 7 ps 0.5 lc rgb "#222222" title "amax", \
         NaN with lines dt 2 lw 1.5 lc rgb "#228833" title "E4M3 range", \
         NaN with lines dt 3 lw 1.5 lc rgb "#aa3377" title "E5M2 range"
    unset output
}
