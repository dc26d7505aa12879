# pareto.gp — the delayed-scaling replay: every setting's estimated share
# of values overflowing against the share flushed to zero; the Pareto front
# joined and labelled.  Reads replay_settings.tsv as written by replay.
# inputs: out, data (replay_settings.tsv), front (replay_front.tsv: run,
# overflow %, flushed %, label of the settings at that point), run, ttl
set datafile separator "\t"
sel(v) = (strcol(1) eq run) ? v : 1/0
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "values overflowing (% of elements, estimated; log scale)"
    set ylabel "values flushed to zero (% of elements, estimated)"
    set logscale x
    set format x "10^{%T}"
    set grid
    set key below
    plot data using (sel(100 * $8 + 1e-7)):(100 * $11) every ::1 with points pt 7 ps 1 lc rgb "#999999" title "setting", \
         data using (sel($14 > 0 ? 100 * $8 + 1e-7 : 1/0)):(100 * $11) every ::1 with points pt 7 ps 1.4 lc rgb "#cc3311" title "Pareto front", \
         front using (sel($2 + 1e-7)):3:4 every ::1 with labels left offset 0.8,0.5 font ",8" noenhanced notitle
    unset output
}
