#!/usr/bin/env bash
# demo.sh — make demo: eight comparable short training runs, two at a time,
# then the report over all of them.  Seven runs share the seed, data and
# batches and evaluate twelve shadow recipes (each pair that differs in one
# factor — format, timing, granularity, scale encoding — is compared); a
# second bf16 baseline with another seed measures the loss noise floor;
# Smooth SwiGLU runs in both variants (folded into w2, as published); one
# run is data parallel on two ranks (mpirun) with its delayed amaxes reduced
# over them, so the report has a section across ranks.
# usage: datasets/demo.sh FP8PROF OUTDIR [STEPS]
set -uo pipefail
exe=$1
out=$2
steps=${3:-250}
mkdir -p "$out"
rm -f "$out"/*.h5
start=$(date +%s)
# the factorial shadow set: each pair of these (or with the active recipe)
# that differs in one factor is compared (docs/analyses.md)
shadows=(--shadow e4m3:delayed --shadow e5m2:delayed --shadow e4m3:current --shadow e5m2:current
         --shadow e4m3:current:pow2 --shadow e4m3:rowwise --shadow e4m3:block=1x128:eps=0
         --shadow e4m3:block=128x128:eps=0 --shadow e4m3:block=1x128:ue8m0,eps=0 --shadow e5m2:block=1x128:eps=0
         --shadow mxfp8:rceil --shadow mxfp8:floor)
common=(--steps "$steps" --record-every 5 --val-every 50 --snapshot-every 50 --block-amax-every 10 "${shadows[@]}")
run() {
    local name=$1
    shift
    if "$exe" train "${common[@]}" "$@" -o "$out/$name.h5" >"$out/$name.log" 2>&1; then
        echo "  $name: $(tail -n 1 "$out/$name.log")"
    else
        echo "  $name: FAILED, see $out/$name.log" >&2
        return 1
    fi
}
run_dp() { # data parallel over 2 ranks: each trains on half of every batch
    local name=$1
    shift
    [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    if mpirun --oversubscribe -np 2 "$exe" train "${common[@]}" "$@" -o "$out/$name.h5" >"$out/$name.log" 2>&1; then
        echo "  $name: $(tail -n 1 "$out/$name.log")"
    else
        echo "  $name: FAILED, see $out/$name.log" >&2
        return 1
    fi
}
echo "make demo: 8 training runs of $steps steps (built-in Llama-style model, emulated FP8), two at a time"
fail=0
run bf16 --seed 1 --recipe bf16 & a=$!
run hybrid-delayed --seed 1 --recipe hybrid:delayed & b=$!
wait $a || fail=1
wait $b || fail=1
run e4m3-current --seed 1 --recipe e4m3:current & a=$!
run e4m3-block --seed 1 --recipe e4m3:block=1x128:weights=128x128 & b=$!
wait $a || fail=1
wait $b || fail=1
run hybrid-delayed-smooth --seed 1 --recipe hybrid:delayed --smooth-swiglu=fold & a=$!
run hybrid-delayed-smooth-published --seed 1 --recipe hybrid:delayed --smooth-swiglu=published & b=$!
wait $a || fail=1
wait $b || fail=1
run bf16-seed2 --seed 2 --recipe bf16 --shadow none --block-amax-every 0 & a=$! # --shadow none: the shadows above are dropped
run_dp hybrid-delayed-dp2 --seed 1 --recipe hybrid:delayed:reduce=dp & b=$!
wait $a || fail=1
wait $b || fail=1
[ $fail -eq 0 ] || { echo "make demo: a training run failed" >&2; exit 1; }
echo "make demo: training took $(($(date +%s) - start)) s; the report:"
"$exe" report "$out/bf16.h5" "$out/hybrid-delayed.h5" "$out/e4m3-current.h5" "$out/e4m3-block.h5" \
    "$out/hybrid-delayed-smooth.h5" "$out/hybrid-delayed-smooth-published.h5" "$out/bf16-seed2.h5" \
    "$out/hybrid-delayed-dp2.h5" -o "$out/report" >"$out/report.path" || exit 1
echo "make demo: $(($(date +%s) - start)) s in all. Open $(cat "$out/report.path")"
