# pareto.gp — the delayed-scaling replay: every setting's overflow events
# after warm-up (exact, x) against the share of values flushed to zero
# (y, bars from the rigorous lower to the upper bound); the settings no
# other one certainly beats in red, labelled.  Reads replay_settings.tsv
# and replay_front.tsv as written by replay.
# inputs: out, data (replay_settings.tsv), front (replay_front.tsv: run,
# events, flushed % lo, flushed % hi, label), run, ttl
set datafile separator "\t"
sel(v) = (strcol(1) eq run) ? v : 1/0
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "overflow events after warm-up (steps x tensors; log scale, 0 drawn at 0.5)"
    set ylabel "values flushed to zero (% of elements, bounds)"
    set logscale x
    set grid
    set key below
    plot data using (sel($7 > 0 ? $7 : 0.5)):(100 * ($14 + $15) / 2):(100 * $14):(100 * $15) every ::1 with yerrorbars pt 7 ps 0.8 lc rgb "#999999" title "setting", \
         data using (sel($18 > 0 ? ($7 > 0 ? $7 : 0.5) : 1/0)):(100 * ($14 + $15) / 2):(100 * $14):(100 * $15) every ::1 with yerrorbars pt 7 ps 1.2 lc rgb "#cc3311" title "not certainly beaten", \
         front using (sel($2 > 0 ? $2 : 0.5)):(($3 + $4) / 2):5 every ::1 with labels left offset 0.8,0.5 font ",8" noenhanced notitle
    unset output
}
