# claim.gp — the claim test per tensor: what current scaling gains over
# delayed at tensor granularity (x) against at block granularity (y), one
# point per tensor and run, coloured by role; above the diagonal the stale
# scale costs more per block than per tensor (the claim), on it alike.
# inputs: out, data (claim_tensors.tsv: role col 3, tensor cost col 9, block
# cost col 10), ttl, lo, hi
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 900,700 font ",10" } else { set terminal svg size 900,700 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "tensor cost: SQNR(current) - SQNR(delayed), one scale per tensor (dB)"
    set ylabel "block cost: SQNR(current) - SQNR(delayed), one scale per block (dB)"
    set xrange [lo:hi]
    set yrange [lo:hi]
    set size square
    set grid
    set key top left
    plot x with lines lc rgb "#777777" dt 2 title "block cost = tensor cost", \
         data using (strcol(3) eq "activation" ? $9 : 1/0):10 every ::1 with points pt 7 ps 1.1 lc rgb "#4477AA" title "activations", \
         data using (strcol(3) eq "weight" ? $9 : 1/0):10 every ::1 with points pt 5 ps 1.1 lc rgb "#228833" title "weights", \
         data using (strcol(3) eq "gradient" ? $9 : 1/0):10 every ::1 with points pt 9 ps 1.3 lc rgb "#EE6677" title "gradients"
    unset output
}
