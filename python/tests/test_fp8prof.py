"""The Python package against independent references and the C engine.

Run by `make test` (PYTHONPATH=python, FP8PROF=build/fp8prof, FP8PROF_LIB
the shared library of the same build).
"""
import json
import os
import subprocess
import unittest

import numpy as np

import fp8prof

FP8PROF = os.environ.get("FP8PROF", "build/fp8prof")
BUILD = os.path.dirname(FP8PROF) or "build"
TMP = os.path.join(BUILD, "t_py")
os.makedirs(TMP, exist_ok=True)


def table(fmt):
    """(codes, values) of every finite code of an 8-bit format, computed from
    its parameters (the OCP rules), not by the library."""
    p = [f for f in fp8prof.formats() if f["name"] == fmt][0]
    e, m, bias = p["ebits"], p["mbits"], p["bias"]
    codes, vals = [], []
    for c in range(1 << (e + m)):
        ef, mf = c >> m, c & ((1 << m) - 1)
        if ef == 0:
            v = mf / (1 << m) * 2.0 ** (1 - bias)
        else:
            v = (1 + mf / (1 << m)) * 2.0 ** (ef - bias)
        if v > p["max"]:
            continue  # Inf/NaN encodings
        codes.append(c)
        vals.append(v)
    return np.array(codes), np.array(vals), p


def reference_cast(x, fmt, scale=1.0):
    """Nearest-even, saturating: the value a correct cast of x * scale
    decodes to (NaN for NaN)."""
    codes, vals, p = table(fmt)
    with np.errstate(invalid="ignore", over="ignore"):
        y = (x * np.float32(scale)).astype(np.float64)  # the product in float32, as the library computes it
    a = np.abs(y)
    a = np.where(np.isinf(a), p["max"], a)
    i = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo, hi = vals[i - 1], vals[i]
    pick_hi = (hi - a < a - lo) | ((hi - a == a - lo) & (codes[i] % 2 == 0))
    r = np.where(pick_hi, hi, lo)
    r = np.where(a >= p["max"], p["max"], r)
    r = np.copysign(r, y)
    return np.where(np.isnan(y), np.nan, r)


def random_floats(n, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32).copy()
    # half of them near the formats' ranges, where rounding happens
    k = n // 2
    x[:k] = (rng.standard_normal(k) * np.exp2(rng.uniform(-20, 20, k))).astype(np.float32)
    return x


class TestCasts(unittest.TestCase):
    def test_against_reference_1e6(self):
        x = random_floats(10 ** 6, 7)
        for fmt in ("e4m3", "e5m2"):
            for scale in (1.0, 0.37):
                got = fp8prof.decode(fp8prof.cast(x, fmt, scale=scale), fmt).astype(np.float64)
                want = reference_cast(x, fmt, scale)
                same = (got == want) | (np.isnan(got) & np.isnan(want))
                self.assertTrue(same.all(), "%s scale %g: %d of 10^6 differ, first at x=%r: %r vs %r" % (
                    fmt, scale, (~same).sum(), x[~same][:1], got[~same][:1], want[~same][:1]))

    def test_equal_to_the_command_bit_for_bit(self):
        big = random_floats(10 ** 6, 11)  # 10^6 per format for the two FP8 formats, 10^5 for the other modes
        texts = {}
        for fmt, args, kw in (("e4m3", [], {}), ("e5m2", ["--scale", "2.5"], {"scale": 2.5}),
                              ("e4m3", ["--round", "zero"], {"round": "zero"}),
                              ("e5m2", ["--no-saturate"], {"saturate": False}),
                              ("e2m1", ["--round", "stochastic", "--seed", "9"], {"round": "stochastic", "seed": 9}),
                              ("e8m0", [], {})):
            n = 10 ** 6 if not args or args[0] == "--scale" else 10 ** 5
            x = big[:n]
            if n not in texts:
                texts[n] = "\n".join(float(v).hex() for v in x) + "\n"
            text = texts[n]
            out = subprocess.run([FP8PROF, "cast", fmt] + args, input=text, capture_output=True, text=True, check=True)
            cli = np.array([int(line.split()[1], 16) for line in out.stdout.splitlines()])
            py = fp8prof.cast(x, fmt, **kw).astype(np.int64)
            self.assertEqual(len(cli), len(py))
            # a NaN's sign does not survive the text the command reads: both a NaN code there
            nan = np.isnan(x)
            self.assertTrue((cli[~nan] == py[~nan]).all(), "%s %s: %d differ" % (fmt, args, (cli[~nan] != py[~nan]).sum()))
            f = [f for f in fp8prof.formats() if f["name"] == fmt][0]
            if f["has_nan"]:
                self.assertTrue(np.isnan(fp8prof.decode(py[nan], fmt)).all())
                self.assertTrue(np.isnan(fp8prof.decode(cli[nan], fmt)).all())
            else:  # a format without NaN: the same magnitude, the sign is the NaN's
                mag = (1 << (f["bits"] - 1)) - 1
                self.assertTrue(((cli[nan] & mag) == (py[nan] & mag)).all(), fmt)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "e9m9|format"):
            fp8prof.cast([1.0], "e9m9")
        with self.assertRaisesRegex(ValueError, "round"):
            fp8prof.cast([1.0], "e4m3", round="up")


class TestQuantize(unittest.TestCase):
    def test_equal_to_the_stats_command(self):
        rng = np.random.default_rng(3)
        x = (rng.standard_normal((16, 384)) * 3).astype(np.float32)
        x[0, 0] = 1e4
        path = os.path.join(TMP, "q.npy")
        np.save(path, x)
        for spec, role in (("e4m3:current", "activation"), ("mxfp8:floor", "activation"),
                           ("e4m3:block=1x128:ue8m0", "weight"), ("hybrid:delayed", "gradient")):
            out = subprocess.run([FP8PROF, "stats", "--recipe", spec, "--role", role, "--json", path],
                                 capture_output=True, text=True, check=True)
            c = json.loads(out.stdout)
            _, s = fp8prof.quantize(x, spec, role)
            self.assertEqual(s["format"], c["format"])
            for k, v in c.items():
                if k in ("file", "rows", "cols", "step", "recipe", "format"):
                    continue
                if k == "classes":
                    self.assertEqual(s["classes"], v)
                elif isinstance(v, list):
                    self.assertEqual(list(s[k]), v, k)
                elif isinstance(v, int):
                    self.assertEqual(s[k], v, "%s %s" % (spec, k))
                elif v is None:
                    self.assertFalse(np.isfinite(s[k]), k)
                else:
                    self.assertEqual(float("%.9g" % s[k]), v, "%s %s" % (spec, k))

    def test_delayed_state_carries(self):
        r = fp8prof.Recipe("e4m3:delayed:history=4")
        x = np.ones((1, 64), np.float32)
        _, s0 = r.quantize(x)
        r.step()
        _, s1 = r.quantize(x * 2)
        self.assertEqual(s0["scale"], 1.0)      # nothing in the history yet
        self.assertEqual(s1["scale"], 448.0)    # fp8 max / amax of step 0
        r.close()


class TestRecordAndRead(unittest.TestCase):
    def test_round_trip(self):
        path = os.path.join(TMP, "rec.h5")
        rng = np.random.default_rng(1)
        with fp8prof.Run(path, meta={"recipe": "e4m3:current", "seed": "1"}, every=1, flush_steps=2) as run:
            p = run.probe("layers.0.a.input", "activation", 0, "e4m3:current", ["e5m2:current"])
            g = run.probe("layers.0.a.grad_output", "gradient", 0, None, ["e5m2:current"])
            for s in range(6):
                x = rng.standard_normal((4, 128)).astype(np.float32)
                y = p.apply(s, x)
                want, _ = fp8prof.quantize(x, "e4m3:current")
                self.assertTrue(np.array_equal(y, want))
                g.record(s, x.astype(np.float16))                          # float16 as is
                run.scalar("loss", s, 2.0 - 0.1 * s)
                run.step_end(s)
            run.training(False)
            p.record(6, x)  # evaluation: nothing recorded
            run.training(True)
            with self.assertRaisesRegex(fp8prof.Error, "already declared"):
                run.probe("layers.0.a.input", "weight", 0, "e4m3:current")
        r = fp8prof.open_run(path)
        self.assertEqual(r.meta["recipe"], "e4m3:current")
        self.assertEqual(list(r.tensors["name"]), ["layers.0.a.input", "layers.0.a.grad_output"])
        self.assertEqual(list(r.tensors["role"]), ["activation", "gradient"])
        self.assertEqual(len(r.records), 6 * 2 + 6)  # active + shadow, shadow only
        self.assertEqual(int(r.records["step"].max()), 5)
        steps, vals = r.scalars("loss")
        self.assertEqual(list(steps), list(range(6)))
        self.assertAlmostEqual(vals[-1], 1.5)
        # the statistics stored equal the engine's on the same tensor
        inp = r.records[(r.records["tensor"] == 0) & (r.records["recipe"] == r.recipes.index("e4m3:current:eps=0"))]
        self.assertEqual(len(inp), 6)
        r.close()

    def test_background_records_equal_the_calling_threads(self):
        """background=True: each record is made by the run's own thread from
        a copy; the caller overwrites its array as soon as the call returns,
        and the records, step rows and scalars equal a run without it."""
        runs = []
        for bg in (False, True):
            path = os.path.join(TMP, "bg%d.h5" % bg)
            rng = np.random.default_rng(5)
            x = np.empty((32, 256), dtype=np.float32)
            with fp8prof.Run(path, every=2, flush_steps=3, background=bg) as run:
                p = run.probe("layers.0.mlp.input", "activation", 0, "hybrid:delayed",
                              ["e4m3:current", "mxfp8", "e4m3:block=1x128"])
                for s in range(9):
                    x[...] = rng.standard_normal(x.shape) * (1 + s)
                    p.record(s, x)
                    x[...] = np.nan  # the caller's buffer reused at once
                    run.scalar("loss", s, 1.0 / (1 + s))
                    run.step_end(s)
            r = fp8prof.open_run(path)
            runs.append((r.records.copy(), r.scalars("loss")))
            r.close()
        (ra, sa), (rb, sb) = runs
        self.assertEqual(len(ra), 5 * 4)
        for name in ra.dtype.names:  # field by field (the rows' padding is not data)
            self.assertTrue(np.array_equal(ra[name], rb[name], equal_nan=ra[name].dtype.kind == "f"), name)
        self.assertTrue(np.array_equal(sa[1], sb[1]))

    def test_bfloat16_bits(self):
        path = os.path.join(TMP, "bf.h5")
        x = np.linspace(-3, 3, 256, dtype=np.float32).reshape(2, 128)
        bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 by truncation
        with fp8prof.Run(path) as run:
            p = run.probe("t", "activation", -1, "e4m3:current")
            p.record(0, bits, dtype="bfloat16")
            run.step_end(0)
        r = fp8prof.open_run(path)
        back = (bits.astype(np.uint32) << 16).view(np.float32)
        self.assertEqual(r.records["amax"][0], float(np.abs(back).max()))
        r.close()


try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@unittest.skipIf(torch is None, "torch not installed (apt-get install python3-torch)")
class TestTorch(unittest.TestCase):
    def model(self):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128))

    def test_names_roles_and_eval(self):
        import fp8prof.torch as ft
        m = self.model()
        path = os.path.join(TMP, "torch_rec.h5")
        with ft.Profiler(m, path, recipe="hybrid:delayed", shadows=["e4m3:current"]) as prof:
            for s in range(3):
                x = torch.randn(8, 128)
                loss = m(x).pow(2).mean()
                loss.backward()
                prof.step(loss=loss.item())
            m.eval()
            with torch.no_grad():
                m(torch.randn(8, 128))  # evaluation: recorded nowhere
        r = fp8prof.open_run(path)
        want = {"0.input": "activation", "0.weight": "weight", "0.grad_output": "gradient",
                "2.input": "activation", "2.weight": "weight", "2.grad_output": "gradient"}
        self.assertEqual(dict(zip(r.tensors["name"], r.tensors["role"])), want)
        for t in range(len(r.tensors)):
            steps = sorted(set(r.records["step"][r.records["tensor"] == t]))
            self.assertEqual(steps, [0, 1, 2], r.tensors["name"][t])
        self.assertEqual(list(r.scalars("loss")[0]), [0, 1, 2])
        # record-only: the run computed in fp32; hybrid:delayed is a shadow, never active
        self.assertEqual(r.meta["recipe"], "fp32")
        self.assertEqual(r.meta["applied"], "no")
        self.assertEqual(r.meta["recorded_recipe"], "hybrid:delayed")
        self.assertEqual(int(r.records["active"].sum()), 0)
        self.assertIn("hybrid:delayed:history=1024,algo=max,margin=0", r.recipes)
        r.close()

    def test_apply_equals_the_engine(self):
        import fp8prof.torch as ft
        m = torch.nn.Linear(128, 64)
        x = torch.randn(16, 128)
        w0 = m.weight.detach().clone()
        path = os.path.join(TMP, "torch_apply.h5")
        with ft.Profiler(m, path, recipe="e4m3:current", shadows=(), apply=True) as prof:
            y = m(x)
            g = torch.randn_like(y)
            y.backward(g)
            prof.step()
        xq, _ = fp8prof.quantize(x.numpy(), "e4m3:current")
        wq, _ = fp8prof.quantize(w0.numpy(), "e4m3:current", "weight")
        gq, _ = fp8prof.quantize(g.numpy(), "e4m3:current", "gradient")
        want = torch.nn.functional.linear(torch.from_numpy(xq), torch.from_numpy(wq), m.bias)
        self.assertTrue(torch.equal(y, want))                               # forward on the casts
        self.assertTrue(torch.equal(m.weight.detach(), w0))                 # master weights untouched
        self.assertTrue(torch.allclose(m.weight.grad, torch.from_numpy(gq).t() @ torch.from_numpy(xq), atol=1e-5))
        r = fp8prof.open_run(path)
        self.assertEqual(sorted(r.tensors["name"]), ["linear.grad_output", "linear.input", "linear.weight"])
        self.assertEqual(len(r.records), 3)
        r.close()


@unittest.skipIf(torch is None, "torch not installed (apt-get install python3-torch)")
class TestTorchRun(unittest.TestCase):
    def test_real_training_run_reports(self):
        """datasets/torch_llama.py, record-only and apply, through fp8prof report unchanged."""
        here = os.path.dirname(os.path.abspath(__file__))
        script = os.path.join(here, "..", "..", "datasets", "torch_llama.py")
        for extra, name in (([], "tl_rec"), (["--apply"], "tl_apply")):
            run = os.path.join(TMP, name + ".h5")
            subprocess.run(["/usr/bin/python3", script, "-o", run, "--steps", "12", "--layers", "1", "--dim", "32",
                            "--ctx", "32", "--every", "2"] + extra, check=True, capture_output=True)
            r = fp8prof.open_run(run)
            names = set(r.tensors["name"])
            self.assertIn("layers.0.mlp.w2.grad_output", names)
            self.assertIn("lm_head.weight", names)
            self.assertEqual(len(names), 6 * 3)  # qkv, out, w1, w3, w2, lm_head
            self.assertEqual(r.meta["recipe"], "hybrid:delayed" if extra else "bf16")
            self.assertEqual(int((r.records["active"] == 1).sum() > 0), 1 if extra else 0)
            r.close()
            out = os.path.join(TMP, name + "_rep")
            rep = subprocess.run([FP8PROF, "report", run, "-o", out], capture_output=True, text=True)
            self.assertEqual(rep.returncode, 0, rep.stderr[-500:])
            with open(os.path.join(out, "report.md")) as f:
                md = f.read()
            self.assertIn("**(b) Would just-in-time or block scaling help, by how much?** Just-in-time scaling: ", md)


class TestInstall(unittest.TestCase):
    def test_pkg_config_program(self):
        dest = os.path.abspath(os.path.join(TMP, "install"))
        subprocess.run(["make", "-s", "install", "DESTDIR=" + dest, "PREFIX=/usr/local", "BUILD=" + BUILD],
                       check=True, capture_output=True)
        prog = os.path.join(TMP, "probe_prog.c")
        with open(prog, "w") as f:
            f.write('#include <fp8_probe.h>\n#include <stdio.h>\nint main(void) {\n'
                    '  fp8_probe_run *r = fp8_probe_open("%s/p.h5", NULL, NULL, 0);\n'
                    '  fp8_probe *p = fp8_probe_declare(r, "x", FP8_ROLE_ACTIVATION, 0, "e4m3:current", NULL, 0);\n'
                    '  float x[4] = {1, 2, 3, 500}, y[4];\n'
                    '  if (!p || fp8_probe_apply(p, 0, x, 1, 4, y)) return 1;\n'
                    '  fp8_probe_step_end(r, 0);\n  printf("%%g\\n", y[3]);\n  return fp8_probe_close(r);\n}\n'
                    % os.path.abspath(TMP))
        env = dict(os.environ, PKG_CONFIG_PATH=dest + "/usr/local/lib/pkgconfig", PKG_CONFIG_SYSROOT_DIR=dest)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fp8prof"], env=env, check=True,
                               capture_output=True, text=True).stdout.split()
        exe = os.path.join(TMP, "probe_prog")
        subprocess.run(["cc", prog, "-o", exe] + flags, check=True)
        out = subprocess.run([exe], env=dict(os.environ, LD_LIBRARY_PATH=dest + "/usr/local/lib"), check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual(out.strip(), "500")  # e4m3 current: amax maps to 448, back to 500 exactly
        # the installed Python package finds the installed library
        code = "import fp8prof, numpy; print(fp8prof.cast(numpy.array([300.0], numpy.float32), 'e4m3')[0])"
        pkg = [d for d, _, files in os.walk(dest) if d.endswith("/fp8prof") and "__init__.py" in files]
        self.assertEqual(len(pkg), 1)
        self.assertIn("/usr/local/lib/python3.", pkg[0])  # where Debian's python3 looks for /usr/local
        py = subprocess.run(["/usr/bin/python3", "-c", code], check=True, capture_output=True, text=True,
                            env={"PYTHONPATH": os.path.dirname(pkg[0]),
                                 "LD_LIBRARY_PATH": dest + "/usr/local/lib", "PATH": os.environ.get("PATH", "")})
        self.assertEqual(py.stdout.strip(), "121")
        subprocess.run(["make", "-s", "uninstall", "DESTDIR=" + dest, "PREFIX=/usr/local", "BUILD=" + BUILD],
                       check=True, capture_output=True)
        self.assertFalse(os.path.exists(dest + "/usr/local/lib/libfp8prof.so"))
        self.assertFalse(os.path.exists(dest + "/usr/local/include/fp8prof"))
        self.assertFalse(os.path.exists(pkg[0]))


if __name__ == "__main__":
    unittest.main()
