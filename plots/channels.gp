# channels.gp — amax of a tensor's top outlier channels over the snapshots,
# run A solid and (when given) run B dashed, against each run's median
# channel.  Each channel is named by its index.  Reads outliers_channels.tsv
# as written by the outliers analysis (run tensor step rank channel amax ratio).
# inputs: out, data, tensor, runa, runb ('' for one run), cha, chb (the
# channel index of ranks 0..3 in each run, space-separated; "-" none), ttl
set datafile separator "\t"
pick(r, q) = (strcol(1) eq r && strcol(2) eq tensor && strcol(4) eq q)
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "training step"
    set ylabel "channel amax (tensor units, log scale)"
    set logscale y
    set grid
    set key below noenhanced
    array C[4] = ["#4477AA", "#EE6677", "#228833", "#CCBB44"]
    if (runb eq "") {
        plot for [q=0:3] data using 3:(pick(runa, sprintf("%d", q)) ? $6 : 1/0) every ::1 with linespoints lw 2 pt 7 ps 0.5 lc rgb C[q+1] title sprintf("channel %s", word(cha, q + 1)), \
             data using 3:(pick(runa, "median") ? $6 : 1/0) every ::1 with lines lw 2 lc rgb "#000000" title "median channel"
    } else {
        plot for [q=0:3] data using 3:(pick(runa, sprintf("%d", q)) ? $6 : 1/0) every ::1 with linespoints lw 2 pt 7 ps 0.5 lc rgb C[q+1] title sprintf("%s channel %s", runa, word(cha, q + 1)), \
             data using 3:(pick(runa, "median") ? $6 : 1/0) every ::1 with lines lw 2 lc rgb "#000000" title runa." median channel", \
             for [q=0:3] data using 3:(pick(runb, sprintf("%d", q)) ? $6 : 1/0) every ::1 with linespoints lw 2 dt 2 pt 6 ps 0.5 lc rgb C[q+1] title sprintf("%s channel %s", runb, word(chb, q + 1)), \
             data using 3:(pick(runb, "median") ? $6 : 1/0) every ::1 with lines lw 2 dt 2 lc rgb "#000000" title runb." median channel"
    }
    unset output
}
