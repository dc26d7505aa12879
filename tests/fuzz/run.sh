#!/bin/sh
# run.sh BUILD SECONDS [TARGET ...] — each fuzz target (default: all) for
# SECONDS, from the seeds and the corpus kept from earlier runs; prints
# cases run and crashes per target.  Exit status 1 when a target found a
# crash (its input: BUILD/crash-*).
B=$1
S=${2:-60}
shift $(($# < 2 ? $# : 2))
targets=${*:-npy nvdlfw run ranks}
set -u
"$B/fuzz-seeds" "$B/seeds" || { echo "fuzz: cannot write the seeds"; exit 1; }
rc=0
for t in $targets; do
    mkdir -p "$B/corpus/$t"
    log="$B/fuzz_$t.log"
    # leaks inside HDF5 after damaged files are suppressed (lsan.supp); ours
    # are still reported, and open HDF5 ids abort the case.  A damaged file
    # can make HDF5 itself ask for an absurd size (2^62 bytes, read from its
    # metadata): malloc returns NULL for it, as it does outside ASan, and
    # HDF5 reports the file as unreadable; ASan's default would abort there.
    ASAN_OPTIONS="allocator_may_return_null=1" \
    LSAN_OPTIONS="suppressions=tests/fuzz/lsan.supp:print_suppressions=0" \
        "$B/fuzz_$t" -max_total_time="$S" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$B/crash-$t-" "$B/corpus/$t" "$B/seeds/$t" > "$log" 2>&1
    st=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    corp=$(ls "$B/corpus/$t" | wc -l)
    crashes=$(ls "$B"/crash-"$t"-* 2>/dev/null | wc -l)
    printf 'fuzz %-7s %8s cases in %ss, corpus %5d inputs, crashes %d, exit %d (log %s)\n' \
        "$t" "${runs:-?}" "$S" "$corp" "$crashes" "$st" "$log"
    [ "$st" -ne 0 ] && rc=1
done
exit $rc
