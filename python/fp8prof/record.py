"""Recording a training loop into a run file (the C probe API, fp8_probe.h).

    with fp8prof.Run("run.h5", meta={"model": "mine"}, every=1) as run:
        p = run.probe("layers.0.mlp.w1.input", "activation", 0, "hybrid:delayed", ["e4m3:current"])
        for step in range(steps):
            x_hat = p.apply(step, x)       # fake-quant + statistics (float32)
            p.record(step, g)              # statistics only (float32, float16, or bfloat16 bits)
            run.scalar("loss", step, loss)
            run.step_end(step)
"""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib, check


def _c_strings(items):
    arr = (ctypes.c_char_p * max(1, len(items)))()
    keep = [str(s).encode() for s in items]
    for i, s in enumerate(keep):
        arr[i] = s
    return arr, keep


class Probe:
    """One tensor's probe: its active recipe and shadows (see Run.probe)."""

    def __init__(self, run, handle, name):
        self._run, self._p, self.name = run, handle, name

    def _shape(self, x):
        if x.ndim == 0:
            return 1, 1
        cols = x.shape[-1]
        return (x.size // cols if cols else 0), cols

    def record(self, step, x, dtype=None):
        """Statistics of x at step under every recipe.  x: float32 (other
        floats are converted), float16 (passed as is), or uint16 bit
        patterns with dtype="bfloat16" (torch's bfloat16 viewed as int16)."""
        x = np.asarray(x)
        if dtype == "bfloat16" or x.dtype == np.float16:
            kind = _lib.DTYPE_BF16 if dtype == "bfloat16" else _lib.DTYPE_F16
            bits = np.ascontiguousarray(x).view(np.uint16)
            rows, cols = self._shape(bits)
            check(lib.fp8_probe_record_bits(self._p, int(step), bits.ctypes.data, kind, rows, cols),
                  "record " + self.name)
            return
        x = np.ascontiguousarray(x, dtype=np.float32)
        rows, cols = self._shape(x)
        check(lib.fp8_probe_record(self._p, int(step), x.ctypes.data, rows, cols), "record " + self.name)

    def apply(self, step, x, out=None):
        """The active recipe's quantize-dequantize of x (float32), with its
        statistics recorded; out may be x itself (in place)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if out is None:
            out = np.empty_like(x)
        rows, cols = self._shape(x)
        check(lib.fp8_probe_apply(self._p, int(step), x.ctypes.data, rows, cols, out.ctypes.data),
              "apply " + self.name)
        return out

    def cast(self, x):
        """The active recipe's cast of x with its current state, nothing
        recorded, the state untouched (evaluation)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        rows, cols = self._shape(x)
        check(lib.fp8_probe_cast(self._p, x.ctypes.data, rows, cols, out.ctypes.data), "cast " + self.name)
        return out


class Run:
    """A run file being written.  Options by name (probe options of
    fp8_probe.h): every, start, end, exp_hist, flush_steps, flush_seconds,
    snapshot_pattern, snapshot_every, snapshot_pairs, snapshot_codes,
    series, block_amax_every.  meta: /meta key/value pairs (docs/schema.md
    lists the keys the analyses read: recipe, seed, smooth_swiglu, steps)."""

    def __init__(self, path, meta=None, **options):
        self.path = str(path)
        self._opts = ctypes.create_string_buffer(lib.fp8_probe_options_size())
        lib.fp8_probe_defaults_into(self._opts)
        self._keep = []
        for k, v in options.items():
            if isinstance(v, bool):
                v = int(v)
            val = str(v).encode()
            self._keep.append(val)
            check(lib.fp8_probe_option_set(self._opts, k.encode(), val), "Run option")
        kv = []
        for k, v in (meta or {}).items():
            kv += [k, v]
        arr, keep = _c_strings(kv)
        self._h = lib.fp8_probe_open(self.path.encode(), self._opts, arr, len(kv) // 2)
        if not self._h:
            raise _lib.Error(self.path + ": " + _lib.last_error())
        self._probes = {}

    def probe(self, name, role, layer=-1, recipe=None, shadows=()):
        """Declare a probe on a named tensor: role (activation, weight,
        gradient, output, other), layer (-1 none), the active recipe (None:
        record the shadows only) and up to 15 shadow recipes."""
        arr, keep = _c_strings(list(shadows))
        h = lib.fp8_probe_declare(self._h, str(name).encode(), _lib.role_id(role), int(layer),
                                  None if recipe is None else str(recipe).encode(), arr, len(shadows))
        if not h:
            raise _lib.Error(_lib.last_error())
        p = Probe(self, h, name)
        self._probes[name] = p
        return p

    def scalar(self, name, step, value):
        check(lib.fp8_probe_scalar(self._h, str(name).encode(), int(step), float(value)), "scalar")

    def step_end(self, step):
        """End of a training step: delayed scaling's history moves on; flushes when due."""
        check(lib.fp8_probe_step_end(self._h, int(step)), "step_end")

    def training(self, on):
        """False: evaluation passes (record nothing, apply only casts)."""
        check(lib.fp8_probe_set_training(self._h, 1 if on else 0), "training")

    def flush(self):
        check(lib.fp8_probe_flush(self._h), "flush")

    @property
    def dropped(self):
        return int(lib.fp8_probe_dropped(self._h)) if self._h else 0

    def close(self):
        if self._h:
            h, self._h = self._h, None
            self._probes.clear()
            check(lib.fp8_probe_close(h), "close " + self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
