# gemm.gp — relative error of an emulated FP8 GEMM against K: the limited
# accumulator without promotion, with promotion to FP32 every 128 products,
# and float32 accumulation; solid: Frobenius, dashed: the largest element's.
# inputs: out, data (tsv: k model frobenius max, header line), ttl
set datafile separator "\t"
do for [k=1:2] {
    if (k == 1) { set terminal pngcairo size 1000,560 font ",10" } else { set terminal svg size 1000,560 dynamic font ",10" }
    set output out.(k == 1 ? ".png" : ".svg")
    set title ttl noenhanced
    set xlabel "K (products summed per output)"
    set ylabel "relative error (log scale)"
    set logscale xy
    set xrange [100:20000]
    set format y "10^{%T}"
    set grid
    set key below
    array M[3] = ["no promotion", "promote every 128", "float32"]
    array C[3] = ["#cc3311", "#0077bb", "#333333"]
    plot for [i=1:3] data using 1:(strcol(2) eq M[i] ? $3 : 1/0) every ::1 with linespoints lw 2 pt 7 lc rgb C[i] title M[i]." (Frobenius)", \
         for [i=1:3] data using 1:(strcol(2) eq M[i] ? $4 : 1/0) every ::1 with linespoints lw 1.5 dt 2 pt 6 lc rgb C[i] title M[i]." (largest)"
    unset output
}
