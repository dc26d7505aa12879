# effects.gp — one factor's comparisons across the runs: per comparison
# (role, from -> to; one row each) and run, the mean ΔSQNR over steps with
# its 95% interval (horizontal bars) and the median step (open circle).
# inputs: out, data (tsv: row, label, run, mean, lo, hi, median), rows,
# ttl, xlo, xhi, h (pixel height), lm (left margin, characters), yt (the
# row labels, a gnuplot ytics list)
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1200,h font ",10" } else { set terminal svg size 1200,h dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "ΔSQNR (dB): mean over steps with its 95% interval, and the median step (o)" noenhanced
    set xrange [xlo:xhi]
    set yrange [rows + 0.5:0.5]
    eval "set ytics scale 0 font ',9' ".yt
    set grid xtics
    set lmargin lm
    set key below
    plot data using 4:($1 + 0.02 * $3):5:6 every ::1 with xerrorbars pt 7 ps 0.9 lc rgb "#4477AA" title "mean [95% CI], one per run", \
         data using 7:($1 + 0.02 * $3) every ::1 with points pt 6 ps 1.0 lc rgb "#EE6677" title "median step", \
         0 with lines lc rgb "#000000" dt 2 notitle
    unset output
}
