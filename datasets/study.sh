#!/usr/bin/env bash
# study.sh — make study: K replicates of each recipe (another initialisation
# seed, the same batches), then the loss's equivalence test over all of them.
# One seed per recipe cannot tell a recipe's cost from luck; K per arm can,
# down to the minimum detectable difference the loss section prints (and the
# number of replicates a given margin needs).  Only the loss is recorded
# (no shadows), so a run costs little more than training.
# usage: datasets/study.sh FP8PROF OUTDIR [K] [STEPS] [RECIPE ...]
#   defaults: K = 3, STEPS = 250, recipes bf16 hybrid:delayed:history=64 e4m3:current
#   (the model of make demo; the first recipe without FP8 is the baseline arm)
set -uo pipefail
exe=${1:?usage: study.sh FP8PROF OUTDIR [K] [STEPS] [RECIPE ...]}
out=${2:?usage: study.sh FP8PROF OUTDIR [K] [STEPS] [RECIPE ...]}
K=${3:-3}
steps=${4:-250}
shift $(($# < 4 ? $# : 4))
recipes=("$@")
[ ${#recipes[@]} -gt 0 ] || recipes=(bf16 hybrid:delayed:history=64 e4m3:current)
case $K in '' | *[!0-9]*) echo "study.sh: K '$K' is not a whole number" >&2; exit 2 ;; esac
case $steps in '' | *[!0-9]*) echo "study.sh: STEPS '$steps' is not a whole number" >&2; exit 2 ;; esac
[ "$K" -ge 2 ] || { echo "study.sh: K = $K: an arm needs at least 2 replicates to measure noise (3 or more to decide)" >&2; exit 2; }
mkdir -p "$out"
model=(--layers 2 --dim 256 --hidden 512 --heads 4 --ctx 64 --batch 8 --data-seed 1)
common=(--steps "$steps" "${model[@]}" --record-every 10 --val-every 50 --shadow none --block-amax-every 0)
start=$(date +%s)
runs=()
jobs_=()
fail=0
echo "make study: ${#recipes[@]} recipes x $K seeds, $steps steps each, two at a time"
for r in "${recipes[@]}"; do
    name=$(printf '%s' "$r" | tr -c 'A-Za-z0-9._-' '_')
    for s in $(seq 1 "$K"); do
        f="$out/$name-seed$s.h5"
        rm -f "$f"
        runs+=("$f")
        ( "$exe" train "${common[@]}" --recipe "$r" --seed "$s" -o "$f" >"$out/$name-seed$s.log" 2>&1 &&
              echo "  $name seed $s: $(tail -n 1 "$out/$name-seed$s.log")" ) ||
            { echo "  $name seed $s: FAILED, see $out/$name-seed$s.log" >&2; exit 1; } &
        jobs_+=($!)
        if [ ${#jobs_[@]} -ge 2 ]; then
            wait "${jobs_[0]}" || fail=1
            jobs_=("${jobs_[@]:1}")
        fi
    done
done
for j in "${jobs_[@]}"; do wait "$j" || fail=1; done
[ $fail -eq 0 ] || { echo "make study: a training run failed" >&2; exit 1; }
"$exe" loss "${runs[@]}" -o "$out/loss" >"$out/loss.md" || exit 1
echo "make study: $(($(date +%s) - start)) s. The loss section: $out/loss.md (data files in $out/loss/)"
