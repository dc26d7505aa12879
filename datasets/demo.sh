#!/usr/bin/env bash
# demo.sh — make demo: ten short training runs of the built-in model, two
# at a time, then the report over all of them.  Chosen so that every claim
# the report makes can be tested on this data:
#  - every probed tensor is wider than 128 columns (dim 256, hidden 512), so
#    a 1x128 block is not a whole row;
#  - the delayed recipes use a history of 64 steps, shorter than the run
#    (250 steps), so delayed scaling is not a running max (TE's default,
#    1024, is replayed as a what-if and flagged);
#  - per-tensor and per-block recipes, delayed and current, on the same
#    tensors (the claim test), every format / timing / granularity /
#    encoding pair for every role, and in runs without smoothing Smooth
#    SwiGLU evaluated on the same down-projection tensors;
#  - three bf16 baseline replicates and two hybrid-delayed ones that change
#    only the initialisation seed (same batches: --data-seed 1), for the
#    loss's noise and the cross-run placebo;
#  - Smooth SwiGLU trained in both variants; one run data parallel on two
#    ranks with its delayed amaxes reduced over them.
# usage: datasets/demo.sh FP8PROF OUTDIR [STEPS]
set -uo pipefail
exe=$1
out=$2
steps=${3:-250}
mkdir -p "$out"
rm -f "$out"/*.h5
start=$(date +%s)
H=64 # the delayed history, shorter than the run
delayed="hybrid:delayed:history=$H"
shadows=(--shadow e4m3:delayed:history=$H --shadow e5m2:delayed:history=$H --shadow e4m3:current
         --shadow e5m2:current --shadow e4m3:current:pow2 --shadow e4m3:rowwise --shadow e4m3:block=1x128:eps=0
         --shadow e4m3:block=128x128:eps=0 --shadow e4m3:block=1x128:ue8m0,eps=0 --shadow e5m2:block=1x128:eps=0
         --shadow mxfp8:rceil --shadow mxfp8:floor
         --shadow e4m3:block=1x128:delayed,history=$H,eps=0,weights=128x128)
model=(--layers 2 --dim 256 --hidden 512 --heads 4 --ctx 64 --batch 8 --data-seed 1)
common=(--steps "$steps" "${model[@]}" --record-every 5 --val-every 50 --snapshot-every 50 --block-amax-every 10)
light=(--shadow none --block-amax-every 0) # replicates: the loss (and the active recipe's records) only
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
echo "make demo: 10 training runs of $steps steps (built-in Llama-style model, emulated FP8), two at a time"
fail=0
run bf16 --seed 1 --recipe bf16 "${shadows[@]}" & a=$!
run hybrid-delayed --seed 1 --recipe "$delayed" "${shadows[@]}" & b=$!
wait $a || fail=1
wait $b || fail=1
run e4m3-current --seed 1 --recipe e4m3:current "${shadows[@]}" & a=$!
run e4m3-block --seed 1 --recipe e4m3:block=1x128:weights=128x128 "${shadows[@]}" & b=$!
wait $a || fail=1
wait $b || fail=1
run hybrid-delayed-smooth --seed 1 --recipe "$delayed" --smooth-swiglu=fold "${shadows[@]}" & a=$!
run hybrid-delayed-smooth-published --seed 1 --recipe "$delayed" --smooth-swiglu=published "${shadows[@]}" & b=$!
wait $a || fail=1
wait $b || fail=1
run hybrid-delayed-seed2 --seed 2 --recipe "$delayed" "${light[@]}" & a=$!
run_dp hybrid-delayed-dp2 --seed 1 --recipe "$delayed:reduce=dp" "${shadows[@]}" & b=$!
wait $a || fail=1
wait $b || fail=1
run bf16-seed2 --seed 2 --recipe bf16 "${light[@]}" & a=$!
run bf16-seed3 --seed 3 --recipe bf16 "${light[@]}" & b=$!
wait $a || fail=1
wait $b || fail=1
[ $fail -eq 0 ] || { echo "make demo: a training run failed" >&2; exit 1; }
echo "make demo: training took $(($(date +%s) - start)) s; the report:"
"$exe" report "$out/bf16.h5" "$out/bf16-seed2.h5" "$out/bf16-seed3.h5" "$out/hybrid-delayed.h5" \
    "$out/hybrid-delayed-seed2.h5" "$out/e4m3-current.h5" "$out/e4m3-block.h5" "$out/hybrid-delayed-smooth.h5" \
    "$out/hybrid-delayed-smooth-published.h5" "$out/hybrid-delayed-dp2.h5" -o "$out/report" >"$out/report.path" || exit 1
# the findings, generated from summary.json (never typed by hand)
/usr/bin/python3 "$(dirname "$0")/findings.py" "$out/report/summary.json" "$out/report/findings.md" || exit 1
echo "make demo: $(($(date +%s) - start)) s in all. Findings: $out/report/findings.md. Open $(cat "$out/report.path")"
