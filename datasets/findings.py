#!/usr/bin/python3
"""findings.py SUMMARY_JSON [OUT.md] -- the demo's findings, generated.

Reads a report's summary.json (docs/analyses.md, "summary.json") and writes
one Markdown paragraph per question, every number taken from the file: the
claim per role, what current scaling and finer blocks buy (mean and median
step, by role), E4M3 against E5M2, Smooth SwiGLU on identical tensors, the
loss verdicts with their noise, overflow events by phase and the replay.
Nothing here is typed by hand, so it cannot go stale: `make demo` runs it.
"""
import json
import sys
from collections import defaultdict


def span(values, fmt="{:+.2f}"):
    v = [x for x in values if x is not None]
    if not v:
        return "n/a"
    lo, hi = fmt.format(min(v)), fmt.format(max(v))
    return lo if lo == hi else lo + ".." + hi


def runs_of(rows):
    return len({r["run"] for r in rows})


def where(j, out):
    rows = j.get("verdicts", [])
    cast = [r for r in rows if r.get("delayed_is_cast")]
    use, who = (cast, "in the runs that cast with delayed scaling") if cast else (rows, "under delayed shadows")
    if not use:
        return
    per = defaultdict(list)
    for r in use:
        per[r["tensor"]].append(r["overflow_events"])
    top = sorted(per.items(), key=lambda kv: -sum(kv[1]))[:3]
    counts = defaultdict(int)
    for r in use:
        counts[r["verdict"]] += 1
    out.append("- **Where per-tensor delayed scaling overflows** ({}, {} runs): most events on {}; verdicts per "
               "tensor and run: {}.".format(
                   who, len({r["run"] for r in use}),
                   ", ".join("`{}` ({} a run)".format(t, span(e, "{:.0f}")) for t, e in top),
                   ", ".join("{} {}".format(k, n) for k, n in sorted(counts.items()))))


def claims(j, out):
    by_role = defaultdict(list)
    for c in j.get("claims", []):
        by_role[c["role"]].append(c)
    if not by_role:
        out.append("- **Per-tensor delayed, per-block just-in-time**: not measured (no run carries the four "
                   "recipes).")
        return
    parts = []
    for role, cs in sorted(by_role.items()):
        verdicts = defaultdict(int)
        for c in cs:
            verdicts[c["verdict"]] += 1
        v = ", ".join("{} in {}".format(k, n) for k, n in sorted(verdicts.items()))
        parts.append("{}: {} of {} runs (block cost − tensor cost {} dB, median step {} dB; tensor cost {} dB, "
                     "block cost {} dB)".format(
                         role, v, len(cs), span(c["difference_db"] for c in cs),
                         span(c["median_step_db"] for c in cs),
                         span(c["tensor_cost"]["delta_sqnr_db"] for c in cs),
                         span(c["block_cost"]["delta_sqnr_db"] for c in cs)))
    out.append("- **Per-tensor delayed, per-block just-in-time** (identical tensors; what current scaling gains "
               "over delayed at block granularity beyond what it gains per tensor): " + "; ".join(parts) + ".")


def comparisons(j, out, factor, title, want=None):
    groups = defaultdict(list)
    for c in j.get("comparisons", []):
        if c["factor"] != factor or (want and not want(c)):
            continue
        groups[(c["role"], c["a_label"], c["b_label"])].append(c)
    if not groups:
        return
    parts = []
    for (role, a, b), cs in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
        above = sum(1 for c in cs if c["ci95"][0] is not None and c["ci95"][0] > 0)
        carried = sum(1 for c in cs if c.get("dominated_by_steps"))
        parts.append("{} {} → {}: {} dB (median step {}; interval above 0 in {} of {} runs{})".format(
            role, a, b, span(c["delta_sqnr_db"] for c in cs), span(c.get("median_step_db") for c in cs), above,
            len(cs), ", carried by three steps in {}".format(carried) if carried else ""))
    out.append("- **{}**: ".format(title) + "; ".join(parts[:6]) + (" (and {} more groups)".format(len(parts) - 6)
                                                                   if len(parts) > 6 else "") + ".")


def smooth(j, out):
    rows = [r for r in j.get("smooth_swiglu", []) if r.get("paired")]
    if not rows:
        return
    groups = defaultdict(list)
    for r in rows:
        level = "GEMM output" if "(GEMM output)" in r["tensor"] else r["tensor"].split(".")[-1]
        groups[(r.get("plain_scales", "?"), r["variant"], level)].append(r)
    parts = ["under {} scales, {} on the {}: {} dB (median step {}, {} tensors in {} runs)".format(
        sc, v, lvl, span(x["delta_sqnr_db"] for x in rs), span(x["median_step_db"] for x in rs), len(rs),
        runs_of(rs)) for (sc, v, lvl), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] != "per-tensor", kv[0]))]
    out.append("- **Smooth SwiGLU on identical tensors** (ΔSQNR smoothed − plain of the down projection): " +
               "; ".join(parts) + ".")


def loss(j, out):
    rows = [r for r in j.get("loss", []) if r["verdict"] != "baseline"]
    if not rows:
        return
    base = rows[0]["baseline"]
    verdicts = defaultdict(list)
    for r in rows:
        verdicts[r["verdict"]].append(r["run"])
    v = "; ".join("{}: {}".format(k, ", ".join(n)) for k, n in sorted(verdicts.items()))
    r0 = rows[0]
    noise = "{:.2f}%".format(r0["noise_sd_pct"]) if r0["noise_sd_pct"] is not None else "unmeasured (no replicates)"
    out.append("- **Loss** against `{}` ({} replicates; noise sd {}, df {}): {} (Δ {} %, minimum detectable "
               "{} % at the replicates given, margin ±{}%).".format(
                   base, r0["baseline_replicates"], noise, r0["noise_df"], v, span(r["rel_diff_pct"] for r in rows),
                   span((r["min_detectable_pct"] for r in rows), "{:.2f}"), r0["equivalence_margin_pct"]))


def phases(j, out):
    tot = defaultdict(lambda: [0, 0])
    for p in j.get("phases", []):
        tot[p["phase"]][0] += p["overflow_events"]
        tot[p["phase"]][1] += p["tensor_steps"]
    if not tot:
        return
    parts = ["{} {} of {} tensor-steps".format(ph, tot[ph][0], tot[ph][1]) for ph in ("lr_warmup", "early", "steady")
             if ph in tot]
    out.append("- **Overflow events by phase** (each run's cast recipe, all runs): " + "; ".join(parts) + ".")


def replay(j, out):
    rows = j.get("replay", [])
    if not rows:
        return
    te = [r["te_default"]["events"] for r in rows]
    second = [r["first_half_choice"]["events_second_half"] for r in rows]
    te2 = [r["first_half_choice"]["te_default_events_second_half"] for r in rows]
    out.append("- **Replay**: TE's default (history 1024, max, margin 0) overflows at {} tensor-steps per run; the "
               "setting chosen on each run's first half leaves {} in the second half, against {} for TE's "
               "default.".format(span(te, "{:.0f}"), span(second, "{:.0f}"), span(te2, "{:.0f}")))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: findings.py SUMMARY_JSON [OUT.md]")
    try:
        with open(sys.argv[1]) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("findings.py: {}: {}".format(sys.argv[1], e))
    if j.get("schema") != 2:
        sys.exit("findings.py: {}: summary.json schema {} (this script reads 2)".format(sys.argv[1], j.get("schema")))
    out = ["# What the demo found", "",
           "Generated by `datasets/findings.py` from `summary.json` of this report; definitions in "
           "docs/analyses.md. Ranges are over runs; intervals are 95% unless said.", ""]
    where(j, out)
    claims(j, out)
    comparisons(j, out, "timing", "Timing (delayed → current, tensor granularity)",
                lambda c: "block" not in c["a_label"] and "rowwise" not in c["a_label"])
    comparisons(j, out, "granularity", "Granularity (coarser → finer, current scaling)",
                lambda c: "current" in c["a_label"])
    comparisons(j, out, "format", "Format (E5M2 → E4M3)")
    smooth(j, out)
    loss(j, out)
    phases(j, out)
    replay(j, out)
    text = "\n".join(out) + "\n"
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
