"""Where people train: the profiler on every GEMM, gradient accumulation,
the device path (amaxes only between statistics steps, the cast in torch),
the logger, and the bit-exact torch cast."""
import os
import re
import tempfile
import unittest

import numpy as np

import fp8prof

try:
    import torch
    import fp8prof.torch as ft
    from fp8prof import torch_cast as tc
except ImportError:  # pragma: no cover
    torch = None

TMP = tempfile.mkdtemp(prefix="fp8prof-torch-")


def _records(path):
    r = fp8prof.open_run(path)
    names = list(r.tensors["name"])
    out = {}
    for rec in r.records:
        key = (names[rec["tensor"]], r.recipes[rec["recipe"]], int(rec["step"]))
        out.setdefault(key, []).append(rec)
    r.close()
    return out


def _applied_outputs(lin, xs, path, recipe):
    """lin's forward outputs on xs (a backward and prof.step() after each)
    with apply=True under recipe on the device path, every=3: steps 1, 2, 4,
    5, ... cast with torch, 0, 3, ... (statistics steps) on the host."""
    ys = []
    with ft.Profiler(lin, path, recipe=recipe, shadows=[], apply=True, every=3, device_path=True) as p:
        for x in xs:
            y = lin(x)
            ys.append(y.detach().clone())
            y.sum().backward()
            p.step()
    return ys


@unittest.skipIf(torch is None, "torch not installed (apt-get install python3-torch)")
class TestTorchCast(unittest.TestCase):
    def test_bit_for_bit(self):
        """10^6 inputs per format and scale: magnitudes over the whole range,
        exact ties, subnormals, saturation, Inf, NaN, -0."""
        rng = np.random.default_rng(0)
        n = 10 ** 6
        for fmt in ("e4m3", "e5m2"):
            mb, emin, fmax = tc.FORMATS[fmt]
            for scale in (1.0, 2.0 ** -15, 0.7, 1234.5):
                x = (rng.standard_normal(n) * np.exp2(rng.uniform(emin - 14, np.log2(fmax) + 3, n))).astype(np.float32)
                k = rng.integers(0, 2 ** (mb + 1), n // 10)
                e = rng.integers(emin - mb - 1, int(np.log2(fmax)) + 1, n // 10)
                x[: n // 10] = ((2 ** mb + k + 0.5) * np.exp2(e - mb)).astype(np.float32)  # ties, scaled below
                x /= np.float32(scale)
                x[-5:] = [np.inf, -np.inf, np.nan, 0.0, -0.0]
                si = np.float32(1) / np.float32(scale)
                want = fp8prof.decode(fp8prof.cast(x, fmt, scale=scale), fmt, scale_inv=float(si))
                got = tc.qdq(torch.from_numpy(x), fmt, torch.tensor(scale, dtype=torch.float32),
                             torch.tensor(si)).numpy()
                same = (want.view(np.uint32) == got.view(np.uint32)) | (np.isnan(want) & np.isnan(got))
                self.assertEqual(int(same.sum()), n, "%s scale %g: %d differ" % (fmt, scale, n - int(same.sum())))

    def test_amax3(self):
        """amax3 (what torch computes on the tensor's device between
        statistics steps) and amax_host (its reading on the host) against
        numpy: the largest finite |x| to the bit and the Inf / NaN flags, for float32, bfloat16, float16 and
        float64 tensors holding Inf, -Inf, NaN, both, only non-finite values,
        -0, subnormals, and a float64 beyond float32's range (an Inf there)."""
        rng = np.random.default_rng(7)
        inf, nan = float("inf"), float("nan")
        cases = [rng.standard_normal(1000) * 3.0, np.array([-0.0, 0.0]), np.array([-0.0]),
                 np.array([1e-42, -3e-41, 0.0]), np.array([inf, 1.5, -2.5]), np.array([-inf, 0.25]),
                 np.array([nan, -7.0, 2.0]), np.array([nan, inf, -3.0]), np.array([-inf, nan, 1e-3, nan]),
                 np.array([nan, nan]), np.array([inf, -inf]), np.array([inf, nan]), np.array([5.0]),
                 np.array([1e39, -2.0]), np.array([-1e300, 3.0]), np.array([])]
        big = rng.standard_normal(4099)
        big[[17, 4000]] = [-inf, nan]
        big[1234] = -65000.0
        cases.append(big)
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
            for i, c in enumerate(cases):
                t = torch.from_numpy(c).to(dtype)
                with np.errstate(over="ignore"):  # (1e300 as float32: Inf, the point of that case)
                    ref = t.double().numpy() if dtype != torch.float64 else c.astype(np.float32).astype(np.float64)
                a = np.abs(ref)
                fin = a[np.isfinite(a)]
                want_m = np.float32(fin.max() if fin.size else 0.0)
                want_f = int(np.isinf(a).any()) + 2 * int(np.isnan(a).any())
                got = tc.amax3(t)
                self.assertEqual((got.dtype, tuple(got.shape)), (torch.float32, (3,)))
                m, has_inf, has_nan = tc.amax_host(got.numpy())
                self.assertEqual(int(has_inf) + 2 * int(has_nan), want_f, (dtype, i))
                self.assertEqual(np.float32(m).view(np.int32), np.array(want_m, dtype=np.float32).view(np.int32),
                                 (dtype, i))
                self.assertEqual(float(tc.amax_of(got)), float(want_m), (dtype, i))
                # a tensor's micro-batches: the largest amax, either's flags
                m2, inf2, nan2 = tc.amax_host(np.stack([got.numpy(), tc.amax3(torch.tensor([0.5])).numpy()]))
                self.assertEqual((m2, inf2, nan2), (max(float(want_m), 0.5), bool(want_f & 1), bool(want_f & 2)))
        # a 2-D, transposed and a 3-D tensor: their elements, whatever the layout
        x = torch.from_numpy(rng.standard_normal((64, 48)).astype(np.float32))
        x[5, 7] = -40.0
        for t in (x, x.t(), x.reshape(4, 16, 48)[:, ::2]):
            self.assertEqual(float(tc.amax_of(tc.amax3(t))), float(t.abs().max()))

    def test_plan(self):
        self.assertEqual(tc.plan("hybrid:delayed:history=64,algo=max,margin=0", "gradient"), ("delayed", "e5m2", 0.0))
        self.assertEqual(tc.plan("e4m3:current:eps=0.001", "activation"), ("current", "e4m3", 0.001))
        for spec in ("e4m3:current:pow2", "e4m3:block=1x128", "mxfp8", "e4m3:delayed:reduce=dp", "e4m3:current:smooth",
                     "e4m3:current:nosat", "e2m1:current"):
            self.assertIsNone(tc.plan(spec, "activation"), spec)


class _Attn(torch.nn.Module if torch else object):
    """qkv projection, q k^T, softmax, att v, out projection; an MoE of two
    experts of which expert 1 never gets a token."""

    def __init__(self, d=16):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.experts = torch.nn.ModuleList([torch.nn.Linear(d, d), torch.nn.Linear(d, d)])

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1)
        h = self.out(torch.matmul(att, v))
        routed = [h, h[:0]]  # expert 1: no tokens
        return sum(e(r).sum() for e, r in zip(self.experts, routed)) + h.sum()


@unittest.skipIf(torch is None, "torch not installed (apt-get install python3-torch)")
class TestProfilerGemms(unittest.TestCase):
    def test_every_gemm_named(self):
        torch.manual_seed(0)
        m = _Attn()
        x = torch.randn(2, 5, 16)
        path = os.path.join(TMP, "gemms.h5")
        with ft.Profiler(m, path, gemms="all", shadows=["e4m3:current"]) as prof:
            m(x).backward()
            prof.step()
        r = fp8prof.open_run(path)
        got = {(n, role) for n, role in zip(r.tensors["name"], r.tensors["role"])}
        r.close()
        want = set()
        for lin in ("qkv", "out", "experts.0"):
            want |= {(lin + ".input", "activation"), (lin + ".weight", "weight"), (lin + ".grad_output", "gradient")}
        for k in (0, 1):  # q @ k^T, then att @ v, inside the model's own forward
            want |= {("matmul%d.lhs" % k, "activation"), ("matmul%d.rhs" % k, "activation"),
                     ("matmul%d.grad_output" % k, "gradient")}
        self.assertEqual(got, want)  # expert 1 had no token: never declared
        recs = _records(path)
        rhs = recs[("matmul0.rhs", "e4m3:current:eps=0", 0)][0]
        self.assertEqual((int(rhs["rows"]), int(rhs["cols"])), (2 * 5, 16))  # k^T as N rows x K
        # select: a name pattern
        path2 = os.path.join(TMP, "gemms_sel.h5")
        with ft.Profiler(m, path2, gemms="all", shadows=[], select=r"^matmul") as prof:
            m(x).backward()
            prof.step()
        r = fp8prof.open_run(path2)
        self.assertEqual(sorted(r.tensors["name"]), sorted("matmul%d.%s" % (k, s) for k in (0, 1)
                                                           for s in ("lhs", "rhs", "grad_output")))
        r.close()

    def test_accumulation_is_one_batch(self):
        """Two micro-batches between prof.step() calls: one record per tensor,
        equal to one batch holding both."""
        torch.manual_seed(1)
        lin = torch.nn.Linear(32, 24)
        xs = [torch.randn(8, 32) * (1 + s) for s in range(3)]
        runs = {}
        for mode in ("micro", "whole"):
            path = os.path.join(TMP, "acc_%s.h5" % mode)
            with ft.Profiler(lin, path, recipe="hybrid:delayed", shadows=["e4m3:current", "e4m3:block=1x16:eps=0"]) as p:
                for x in xs:
                    if mode == "micro":
                        for part in x.split(4):
                            (lin(part) ** 2).sum().backward()
                    else:
                        (lin(x) ** 2).sum().backward()
                    p.step()
            runs[mode] = _records(path)
        self.assertEqual(set(runs["micro"]), set(runs["whole"]))
        for key, recs in runs["whole"].items():
            self.assertEqual(len(runs["micro"][key]), 1, key)  # merged: one record
            a, b = runs["micro"][key][0], recs[0]
            for f in ("rows", "amax", "overflows", "underflows", "sqnr_db", "scale", "numel"):
                self.assertEqual(a[f], b[f], (key, f))

    def test_amax_only_between_statistics(self):
        """every=5, the device path (torch amaxes, as on a GPU): between
        statistics steps only each tensor's amax is handed over (12 bytes a
        tensor), and the records equal the C path's; the same without the
        device path (the library reads CPU tensors in place, copies nothing)."""
        torch.manual_seed(2)
        lin = torch.nn.Linear(64, 32)
        for q in lin.parameters():
            q.requires_grad_(True)
        c = torch.randn(32)
        xs = [torch.randn(16, 64) * float(2 ** (0.4 * (s % 7))) for s in range(12)]
        xs[6][0, 0] = float("inf")
        path = os.path.join(TMP, "amax_dev.h5")
        per_step = []
        with ft.Profiler(lin, path, recipe="hybrid:delayed", shadows=list(ft.Profiler.FAST_SHADOWS), every=5,
                         device_path=True) as p:
            for x in xs:
                b0 = p.host_bytes
                (lin(x) * c).sum().backward()
                p.step()
                per_step.append(p.host_bytes - b0)
        # the same tensors through the probe API (the C path computes every amax)
        path2 = os.path.join(TMP, "amax_c.h5")
        shadows = ["hybrid:delayed"] + list(ft.Profiler.FAST_SHADOWS)
        with fp8prof.Run(path2, every=5) as run:
            pi = run.probe("input", "activation", -1, None, shadows)
            pw = run.probe("weight", "weight", -1, None, shadows)
            pg = run.probe("grad_output", "gradient", -1, None, shadows)
            W = lin.weight.detach().numpy()
            G = np.broadcast_to(c.numpy(), (16, 32)).astype(np.float32)
            for s, x in enumerate(xs):
                pi.record(s, x.numpy()), pw.record(s, W), pg.record(s, G)
                run.step_end(s)
        path3 = os.path.join(TMP, "amax_cpu.h5")
        with ft.Profiler(lin, path3, recipe="hybrid:delayed", shadows=list(ft.Profiler.FAST_SHADOWS), every=5) as p:
            for x in xs:
                (lin(x) * c).sum().backward()
                p.step()
            self.assertEqual(p.host_bytes, 0)
        a, b, a3 = _records(path), _records(path2), _records(path3)
        self.assertEqual(set(a), set(a3))
        for key in a:
            for f in ("amax", "scale", "overflows", "sqnr_db"):
                self.assertEqual(a[key][0][f], a3[key][0][f], (key, f))
        rename = {"input": "linear.input", "weight": "linear.weight", "grad_output": "linear.grad_output"}
        b = {(rename[k[0]], k[1], k[2]): v for k, v in b.items()}
        self.assertEqual(set(a), set(b))
        for key in a:
            for f in ("amax", "scale", "overflows", "underflows", "sqnr_db", "inf_count"):
                self.assertEqual(a[key][0][f], b[key][0][f], (key, f))
        for s, nbytes in enumerate(per_step):
            if s % 5:
                self.assertLessEqual(nbytes, 12 * 3, "step %d copied %d bytes" % (s, nbytes))
            else:
                self.assertGreater(nbytes, 16 * 64 * 4)

    def test_strided_operands_between_statistics(self):
        """gemms="all" on attention's operands, slices of one qkv product
        (q, k, v: not contiguous, k transposed), float32 and bfloat16:
        between statistics steps the CPU path reads each operand in its
        memory order (a copy when it is not one dense block), and the
        delayed recipes' scales at the statistics steps, which follow the
        amaxes of the steps between, equal the device path's (torch's
        amaxes of the operands as they are)."""
        class Attn(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = torch.nn.Linear(24, 72)

            def forward(self, x):
                B, T, _ = x.shape
                q, k, v = self.qkv(x).view(B, T, 3, 4, 6).permute(2, 0, 3, 1, 4)
                return ((q @ k.transpose(-1, -2)) @ v).transpose(1, 2).reshape(B, T, 24)

        shadows = ["e4m3:delayed:history=16,algo=max", "e5m2:delayed:history=16,algo=max", "e4m3:current"]
        for dtype in (torch.float32, torch.bfloat16):
            runs = []
            for device_path in (True, False):
                torch.manual_seed(4)
                m = Attn().to(dtype)
                gen = torch.Generator().manual_seed(5)
                # the largest tensors at the steps between statistics steps:
                # their amaxes decide the next statistics step's scales
                xs = [(torch.randn(2, 8, 24, generator=gen) * 4.0 ** (s % 4)).to(dtype) for s in range(9)]
                path = os.path.join(TMP, "strided_%s_%d.h5" % (str(dtype)[6:], device_path))
                with ft.Profiler(m, path, recipe=None, shadows=shadows, every=4, gemms="all",
                                 device_path=device_path) as p:
                    for x in xs:
                        m(x).float().pow(2).sum().backward()
                        p.step()
                runs.append(_records(path))
            a, b = runs
            self.assertEqual(set(a), set(b))
            names = {k[0] for k in a}
            for op in ("matmul0.lhs", "matmul0.rhs", "matmul1.rhs"):
                self.assertIn(op, names)
            delayed = [k for k in a if k[2] in (4, 8) and "delayed" in k[1]]
            self.assertEqual(len(delayed), 2 * 2 * len(names), sorted(delayed))
            for key in a:
                for f in ("amax", "scale", "overflows", "underflows", "sqnr_db"):
                    self.assertEqual(a[key][0][f], b[key][0][f], (dtype, key, f))
            # the scales did follow the steps between: step 4's e4m3 scale
            # is 448 / the amax of step 3 (x 4^3), not of step 0
            for op in ("matmul0.lhs", "matmul0.rhs", "matmul1.rhs"):
                k4 = (op, "e4m3:delayed:history=16,algo=max,margin=0", 4)
                self.assertLess(a[k4][0]["scale"], 448.0 / a[(op, k4[1], 0)][0]["amax"] / 16, k4)

    def test_half_tensors_between_statistics(self):
        """A float16 tensor (torch 1.13 has no float16 GEMM on the CPU, so the
        probe's read is called as a GEMM would call it) between statistics
        steps, read in place as 16-bit floats: the delayed scales of the
        statistics step, which follow those steps' amaxes, equal the ones of
        the same values recorded through Probe.record as float32."""
        shadows = ["e4m3:delayed:history=16,algo=max", "e5m2:delayed:history=16,algo=max"]
        gen = torch.Generator().manual_seed(8)
        xs = [(torch.randn(6, 10, generator=gen) * 4.0 ** s).half() for s in range(5)]
        xs[2] = xs[2].t()  # a transposed one, read in its memory order
        path = os.path.join(TMP, "half.h5")
        with ft.Profiler(torch.nn.Linear(2, 2), path, recipe=None, shadows=shadows, every=4) as p:
            slot = p._slot("t", "activation")
            for x in xs:
                ft._observe(slot, x, lambda x=x: x.reshape(-1, x.shape[-1]))
                p.step()
        path2 = os.path.join(TMP, "half_ref.h5")
        with fp8prof.Run(path2, every=4) as run:
            pr = run.probe("t", "activation", -1, None, shadows)
            for s, x in enumerate(xs):
                pr.record(s, x.float().contiguous().numpy())
                run.step_end(s)
        a, b = _records(path), _records(path2)
        self.assertEqual(set(a), set(b))
        self.assertEqual(len(a), 4)  # steps 0 and 4, two recipes
        for key in a:
            for f in ("amax", "scale", "overflows", "underflows", "sqnr_db"):
                self.assertEqual(a[key][0][f], b[key][0][f], (key, f))
        k4 = ("t", "e4m3:delayed:history=16,algo=max,margin=0", 4)
        self.assertEqual(a[k4][0]["scale"], np.float32(448.0) / np.float32(float(xs[3].abs().max())))

    def test_apply_on_device_equals_library(self):
        """apply=True with a per-tensor delayed recipe: torch's cast, the
        library's numbers (forward output against the C engine's casts)."""
        torch.manual_seed(3)
        lin = torch.nn.Linear(32, 16)
        xs = [torch.randn(8, 32) * (3.0 ** s) for s in range(4)]
        ys = _applied_outputs(lin, xs, os.path.join(TMP, "apply_dev.h5"), "e4m3:delayed:history=4")
        st = fp8prof.Recipe("e4m3:delayed:history=4")
        sw = fp8prof.Recipe("e4m3:delayed:history=4", "weight")
        w = lin.weight.detach().numpy()
        for x, y in zip(xs, ys):
            xq, _ = st.quantize(x.numpy())
            wq, _ = sw.quantize(w)
            want = torch.nn.functional.linear(torch.from_numpy(xq), torch.from_numpy(wq), lin.bias.detach())
            self.assertTrue(torch.equal(y, want))
            st.step(), sw.step()

    def test_statistics_step_keeps_what_the_gemm_saw(self):
        """A statistics step's record is made at prof.step(), after the
        optimizer has updated the weights in place: the weight's record holds
        the weight the GEMM used (its amax and numel), as do the input's and
        the gradient's, for a Linear and for a strided operand of gemms="all"."""
        torch.manual_seed(6)

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(16, 24)

            def forward(self, x):
                h = self.lin(x)                      # (4, 8, 24)
                a, b = h[..., :12], h[..., 12:]      # strided halves of one product
                return torch.matmul(a, b.transpose(-1, -2))

        m = M()
        opt = torch.optim.SGD(m.parameters(), lr=10.0)  # a large step: the weight's amax moves
        path = os.path.join(TMP, "keeps.h5")
        seen = []
        with ft.Profiler(m, path, recipe=None, shadows=["e4m3:current"], every=1, gemms="all") as p:
            for _ in range(3):
                x = torch.randn(4, 8, 16)
                w = m.lin.weight.detach().clone()
                h = torch.nn.functional.linear(x, w, m.lin.bias.detach())
                seen.append({"lin.weight": float(w.abs().max()), "lin.input": float(x.abs().max()),
                             "matmul0.lhs": float(h[..., :12].abs().max()),
                             "matmul0.rhs": float(h[..., 12:].abs().max())})
                opt.zero_grad()
                m(x).square().sum().backward()
                opt.step()                           # the weight changes before prof.step()
                p.step()
        recs = _records(path)
        for step, want in enumerate(seen):
            for name, amax in want.items():
                rec = recs[(name, "e4m3:current:eps=0", step)][0]
                self.assertEqual(float(np.float32(rec["amax"])), float(np.float32(amax)), (name, step))
        self.assertNotEqual(seen[0]["lin.weight"], seen[2]["lin.weight"])

    def test_apply_current_on_device_equals_library(self):
        """apply=True with per-tensor current scaling on the device path: each
        operand cast with the scale of its own amax as torch computes it
        (amax3, amax_of), the forward output equal to the library's casts —
        also for an input of zeros (scale 1), with an Inf or a NaN (their
        amax is the largest finite |x|) and with nothing finite (scale 1)."""
        torch.manual_seed(9)
        lin = torch.nn.Linear(16, 8)
        # steps 1, 2, 4, 5 cast with torch (_applied_outputs)
        xs = [torch.randn(4, 16) * 50.0, torch.zeros(4, 16), torch.randn(4, 16), torch.randn(4, 16),
              torch.full((4, 16), float("inf")), torch.randn(4, 16) * 1e-3]
        xs[2][1, 3] = float("inf")
        xs[5][0, 0] = float("nan")
        ys = _applied_outputs(lin, xs, os.path.join(TMP, "apply_cur.h5"), "e4m3:current")
        w = lin.weight.detach().numpy()
        wq, _ = fp8prof.Recipe("e4m3:current", "weight").quantize(w)
        for i, (x, y) in enumerate(zip(xs, ys)):
            xq, _ = fp8prof.Recipe("e4m3:current").quantize(x.numpy())
            want = torch.nn.functional.linear(torch.from_numpy(xq), torch.from_numpy(wq), lin.bias.detach())
            same = (y == want) | (torch.isnan(y) & torch.isnan(want))
            self.assertTrue(bool(same.all()), i)

    def test_logger(self):
        seen = []
        lin = torch.nn.Linear(8, 4)
        with ft.Profiler(lin, os.path.join(TMP, "log.h5"), shadows=["e4m3:current"], every=2,
                         logger=lambda n, v, s: seen.append((n, v, s))) as p:
            for _ in range(3):
                lin(torch.randn(4, 8)).sum().backward()
                p.step()
        names = {n for n, _, _ in seen}
        self.assertIn("linear.input/e4m3:current:eps=0/sqnr_db", names)
        self.assertIn("linear.grad_output/hybrid:delayed:history=1024,algo=max,margin=0/underflow_pct", names)
        self.assertEqual({s for _, _, s in seen}, {0, 2})  # statistics steps only
        self.assertTrue(all(re.match(r".*/(underflow_pct|overflow_pct|sqnr_db|scale_inv)$", n) for n in names))
        with self.assertRaises(TypeError):
            ft.Profiler(lin, os.path.join(TMP, "log2.h5"), logger=3)


@unittest.skipIf(torch is None, "torch not installed (apt-get install python3-torch)")
class TestTorchLlamaGemms(unittest.TestCase):
    def test_attention_and_experts(self):
        """datasets/torch_llama.py --gemms all --experts 3 --accum 2: the exact
        names and roles, and the run goes through fp8prof report."""
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        script = os.path.join(here, "..", "..", "datasets", "torch_llama.py")
        run = os.path.join(TMP, "tl_all.h5")
        subprocess.run(["/usr/bin/python3", script, "-o", run, "--steps", "4", "--layers", "1", "--dim", "32",
                        "--ctx", "16", "--every", "2", "--gemms", "all", "--experts", "3", "--accum", "2"],
                       check=True, capture_output=True)
        r = fp8prof.open_run(run)
        got = set(zip(r.tensors["name"], r.tensors["role"]))
        r.close()
        want = set()
        linears = ["layers.0.attn.qkv", "layers.0.attn.out", "layers.0.mlp.router", "lm_head"]
        linears += ["layers.0.mlp.experts.%d.%s" % (e, w) for e in range(3) for w in ("w1", "w2", "w3")]
        for lin in linears:
            want |= {(lin + ".input", "activation"), (lin + ".weight", "weight"), (lin + ".grad_output", "gradient")}
        for k in (0, 1):
            b = "layers.0.attn.matmul%d" % k
            want |= {(b + ".lhs", "activation"), (b + ".rhs", "activation"), (b + ".grad_output", "gradient")}
        # an expert that no token reached in any step is never declared: the set is within want
        self.assertTrue(got <= want, got - want)
        self.assertTrue({n for n, _ in want if "experts" not in n} <= {n for n, _ in got})
        fp8 = os.environ.get("FP8PROF", os.path.join(here, "..", "..", "build", "fp8prof"))
        rep = subprocess.run([fp8, "report", run, "-o", os.path.join(TMP, "tl_all_rep")], capture_output=True, text=True)
        self.assertEqual(rep.returncode, 0, rep.stderr[-500:])


if __name__ == "__main__":
    unittest.main()
