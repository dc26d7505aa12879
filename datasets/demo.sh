#!/usr/bin/env bash
# demo.sh — make demo: five comparable short training runs (same seed, data
# and batches; every run also evaluates the same seven shadow recipes on its
# tensors), two at a time, then the report over all of them.
# usage: datasets/demo.sh FP8PROF OUTDIR [STEPS]
set -uo pipefail
exe=$1
out=$2
steps=${3:-250}
mkdir -p "$out"
rm -f "$out"/*.h5
start=$(date +%s)
common=(--seed 1 --steps "$steps" --record-every 2 --val-every 50 --snapshot-every 50
        --shadow hybrid:delayed --shadow e4m3:delayed --shadow hybrid:current --shadow e4m3:current --shadow e5m2:current
        --shadow e4m3:block=1x128 --shadow mxfp8)
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
echo "make demo: 5 training runs of $steps steps (built-in Llama-style model, emulated FP8), two at a time"
fail=0
run bf16 --recipe bf16 & a=$!
run hybrid-delayed --recipe hybrid:delayed & b=$!
wait $a || fail=1
wait $b || fail=1
run e4m3-current --recipe e4m3:current & a=$!
run e4m3-block --recipe e4m3:block=1x128:weights=128x128 & b=$!
wait $a || fail=1
wait $b || fail=1
run hybrid-delayed-smooth --recipe hybrid:delayed --smooth-swiglu || fail=1
[ $fail -eq 0 ] || { echo "make demo: a training run failed" >&2; exit 1; }
echo "make demo: training took $(($(date +%s) - start)) s; the report:"
"$exe" report "$out/bf16.h5" "$out/hybrid-delayed.h5" "$out/e4m3-current.h5" "$out/e4m3-block.h5" \
    "$out/hybrid-delayed-smooth.h5" -o "$out/report" >"$out/report.path" || exit 1
echo "make demo: $(($(date +%s) - start)) s in all. Open $(cat "$out/report.path")"
