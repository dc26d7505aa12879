# blockscale.gp — how the per-block scales of a tensor spread: histogram of
# log2(scale_inv) over its blocks at one step, one colour per recipe.
# inputs: out, data (tsv: recipe log2_scale_inv blocks; blank lines between recipes), nrec, ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "log2 scale_inv (the block's dequantization multiplier)" noenhanced
    set ylabel "blocks"
    set grid
    set key below noenhanced
    set style fill transparent solid 0.5 border
    set boxwidth 0.8 absolute
    plot for [i=0:nrec-1] data index i using ($2 + 0.1 * i):3 with boxes title columnheader(1)
    unset output
}
