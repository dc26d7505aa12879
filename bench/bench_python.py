#!/usr/bin/python3
"""bench_python.py — `make bench` section python: what the Python package
adds to a recorded tensor, next to the C call measured in the same process
(ctypes straight into fp8_probe_record, no wrapper): 2^20 float32 elements,
1 active + 3 shadow recipes, best of 5 rounds of 20 records each.
Target: the package within 10% of the C call."""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8prof  # noqa: E402
from fp8prof._lib import lib  # noqa: E402


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    x = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    path = os.path.join(build, "bench_python.h5")
    run = fp8prof.Run(path, flush_steps=1000000, flush_seconds=1e9)
    p = run.probe("x", "activation", 0, "e4m3:delayed", ["e4m3:current", "e5m2:current", "e4m3:block=1x128"])
    rounds, per = 5, 20
    best_c = best_py = float("inf")
    step = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(per):
            lib.fp8_probe_record(p._p, step, x.ctypes.data, 1024, 1024)
            step += 1
        best_c = min(best_c, (time.perf_counter() - t0) / per)
        t0 = time.perf_counter()
        for _ in range(per):
            p.record(step, x)
            step += 1
        best_py = min(best_py, (time.perf_counter() - t0) / per)
    run.close()
    os.remove(path)
    over = best_py / best_c - 1
    print("python: fp8prof.Probe.record of 2^20 float32, 1 active + 3 shadows (best of %d x %d)" % (rounds, per))
    print("  C call through ctypes          %8.2f ms  (%.3f Gelem/s)" % (1e3 * best_c, 2 ** 20 / best_c / 1e9))
    print("  Probe.record (the package)     %8.2f ms  (%.3f Gelem/s)" % (1e3 * best_py, 2 ** 20 / best_py / 1e9))
    print("target python_overhead: %+.1f %% (goal within 10 %%) %s" % (100 * over, "met" if over <= 0.10 else "MISSED"))


if __name__ == "__main__":
    main()
