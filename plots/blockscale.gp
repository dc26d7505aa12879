# blockscale.gp — how the per-block scales of a tensor spread: histogram of
# log2(scale_inv) over its blocks at one step, one colour per recipe.
# inputs: out, data (one block per recipe: a line "label", then rows
# log2_scale_inv<TAB>blocks<TAB>rgb; two blank lines between), nrec, ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "log2 scale_inv (the block's dequantization multiplier)" noenhanced
    set ylabel "blocks"
    set grid
    set key below noenhanced
    set style fill solid 0.7 border lc rgb "#333333"
    set boxwidth 0.9 / nrec absolute
    # the recipes' bars side by side within each binade, one colour each
    plot for [i=0:nrec-1] data index i using ($1 - 0.45 + (i + 0.5) * 0.9 / nrec):2:3 with boxes lc rgb variable title columnheader(1)
    unset output
}
