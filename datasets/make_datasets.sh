#!/usr/bin/env bash
# make datasets: the standard set of comparable runs (same seed, same data,
# same batches), then the long pair meant to grow SwiGLU outliers.
# usage: datasets/make_datasets.sh FP8PROF OUTDIR [--short]
set -euo pipefail
exe=$1
out=$2
mkdir -p "$out"
start=$(date +%s)
run() {
    local name=$1
    shift
    echo "== $name: fp8prof train $*"
    "$exe" train --seed 1 "$@" -o "$out/$name.h5" | tail -n 1
}
run bf16 --recipe bf16
run hybrid-delayed --recipe hybrid:delayed
run e4m3-current --recipe e4m3:current
run e4m3-block --recipe e4m3:block=1x128:weights=128x128
# MXFP8's scale rule, the only difference: OCP's floor against round-up (rceil)
run mxfp8-floor --recipe mxfp8:floor
run mxfp8-rceil --recipe mxfp8:rceil
run hybrid-delayed-smooth --recipe hybrid:delayed --smooth-swiglu=fold
run hybrid-delayed-smooth-published --recipe hybrid:delayed --smooth-swiglu=published
if [ "${3:-}" != "--short" ]; then
    # higher learning rate and weight decay: the regime where SwiGLU channels align
    run long-hybrid-delayed --recipe hybrid:delayed --steps 2000 --lr 6e-3 --weight-decay 0.1 --val-every 100
    run long-hybrid-delayed-smooth --recipe hybrid:delayed --smooth-swiglu=fold --steps 2000 --lr 6e-3 \
        --weight-decay 0.1 --val-every 100
    run long-hybrid-delayed-smooth-published --recipe hybrid:delayed --smooth-swiglu=published --steps 2000 \
        --lr 6e-3 --weight-decay 0.1 --val-every 100
fi
echo "make datasets: $(($(date +%s) - start)) s in all; runs in $out"
