"""Recording a training loop into a run file (the C probe API, fp8_probe.h).

    with fp8prof.Run("run.h5", meta={"model": "mine"}, every=1) as run:
        p = run.probe("layers.0.mlp.w1.input", "activation", 0, "hybrid:delayed", ["e4m3:current"])
        for step in range(steps):
            x_hat = p.apply(step, x)       # fake-quant + statistics (float32)
            p.record(step, g)              # statistics only (float32, float16, or bfloat16 bits)
            run.scalar("loss", step, loss)
            run.step_end(step)

Every array is checked before C sees it (dtype, shape, layout, writability:
_check.py); a probe of a closed run raises instead of reaching freed memory,
and Run.close() waits for the calls other threads have in flight.
"""
import ctypes
import threading

import numpy as np

from . import _check, _lib
from ._lib import lib, check


def _c_strings(items, what):
    arr = (ctypes.c_char_p * max(1, len(items)))()
    keep = [_check.text(s, what).encode() for s in items]
    for i, s in enumerate(keep):
        arr[i] = s
    return arr, keep


class Probe:
    """One tensor's probe: its active recipe and shadows (see Run.probe)."""

    def __init__(self, run, handle, name):
        self._run, self._p, self.name = run, handle, name

    def _call(self, what, fn, *args):
        """fn(handle, *args) while the run is open; the run cannot close
        until the call returns."""
        self._run._enter(what, self.name)
        try:
            check(fn(self._p, *args), what + " " + self.name)
        finally:
            self._run._leave()

    def record(self, step, x, dtype=None):
        """Statistics of x at step under every recipe.  x: float32 (other
        real dtypes are converted), float16 (passed as is), or the raw bits
        of 16-bit floats as uint16/int16 with dtype="bfloat16" or "float16"
        (torch's bfloat16 viewed as int16)."""
        step = _check.step(step)
        x = np.asarray(x)
        if dtype is not None and dtype not in ("bfloat16", "float16"):
            raise ValueError("record %s: dtype %r is not None, 'bfloat16' or 'float16'" % (self.name, dtype))
        if dtype is None and x.dtype in (np.uint16, np.int16):
            raise TypeError("record %s: a %s array: pass dtype='bfloat16' or 'float16' to record it as 16-bit float "
                            "bits (or convert it to float32)" % (self.name, x.dtype))
        if dtype is not None and x.dtype not in (np.uint16, np.int16) and not (dtype == "float16" and
                                                                              x.dtype == np.float16):
            raise TypeError("record %s: dtype=%r needs the raw 16-bit patterns as uint16/int16 (torch: "
                            "t.view(torch.int16).numpy()), not a %s array" % (self.name, dtype, x.dtype))
        if dtype is not None or x.dtype == np.float16:
            kind = _lib.DTYPE_BF16 if dtype == "bfloat16" else _lib.DTYPE_F16
            bits = np.ascontiguousarray(x).view(np.uint16)
            rows, cols = _check.shape2(bits, "record %s: x" % self.name)
            self._record_memory(step, bits.ctypes.data, kind, rows, cols)
            return
        x = _check.floats_in(x, "record %s: x" % self.name)
        rows, cols = _check.shape2(x, "record %s: x" % self.name)
        self._record_memory(step, x.ctypes.data, _lib.DTYPE_F32, rows, cols)

    def _record_memory(self, step, ptr, kind, rows, cols):
        """The C call behind record(), for memory the caller has checked
        itself (record's arrays; the torch binding's C-contiguous float32 /
        16-bit tensors, alive for the call): ptr to rows x cols elements of
        kind (_lib.DTYPE_*); step is checked here, the pointer and shape by
        C (NULL, 0 or an overflowing shape)."""
        step = _check.step(step)
        if kind == _lib.DTYPE_F32:
            self._call("record", lib.fp8_probe_record, step, ptr, rows, cols)
        else:
            self._call("record", lib.fp8_probe_record_bits, step, ptr, kind, rows, cols)

    def apply(self, step, x, out=None):
        """The active recipe's quantize-dequantize of x (float32), with its
        statistics recorded.  out: None (a new array), or a float32,
        C-contiguous, writable array of x's shape — x itself for in place
        (x must then be such an array)."""
        step = _check.step(step)
        inplace = out is not None and out is x
        if inplace:
            xin = _check.floats_out(x, x, "apply %s: x (in place, out=x)" % self.name)
        else:
            xin = _check.floats_in(x, "apply %s: x" % self.name)
        rows, cols = _check.shape2(xin, "apply %s: x" % self.name)
        if out is None:
            out = np.empty_like(xin)
        elif not inplace:
            _check.floats_out(out, xin, "apply %s: out" % self.name)
        self._call("apply", lib.fp8_probe_apply, step, xin.ctypes.data, rows, cols, out.ctypes.data)
        return out

    def cast(self, x):
        """The active recipe's cast of x with its current state, nothing
        recorded, the state untouched (evaluation)."""
        x = _check.floats_in(x, "cast %s: x" % self.name)
        rows, cols = _check.shape2(x, "cast %s: x" % self.name)
        out = np.empty_like(x)
        self._call("cast", lib.fp8_probe_cast, x.ctypes.data, rows, cols, out.ctypes.data)
        return out


    def needs_tensor(self, step):
        """True when step needs the tensor itself (statistics, snapshot, block
        amaxes, per-block or smoothed delayed recipes); False when note_amax
        is all the step needs (fp8_probe_needs_tensor)."""
        step = _check.step(step)
        self._run._enter("needs_tensor", self.name)
        try:
            r = lib.fp8_probe_needs_tensor(self._p, step)
        finally:
            self._run._leave()
        if r < 0:
            check(r, "needs_tensor " + self.name)
        return bool(r)

    def note_amax(self, step, amax, inf=False, nan=False):
        """A step that needs no tensor: its amax (largest finite |x|) and
        whether it held an Inf / a NaN (fp8_probe_note_amax)."""
        step = _check.step(step)
        self._call("note_amax", lib.fp8_probe_note_amax, step, float(amax), (1 if inf else 0) | (2 if nan else 0))

    def active_scale(self):
        """(scale, scale_inv) of the active per-tensor delayed recipe now."""
        s, si = ctypes.c_float(), ctypes.c_float()
        self._call("active_scale", lib.fp8_probe_active_scale, ctypes.byref(s), ctypes.byref(si))
        return s.value, si.value

    def recipes(self):
        """The probe's recipes' canonical specs, the active one first when it has one."""
        arr = (ctypes.c_char_p * 16)()
        self._run._enter("recipes", self.name)
        try:
            n = lib.fp8_probe_recipes(self._p, arr, 16)
        finally:
            self._run._leave()
        if n < 0:
            check(n, "recipes " + self.name)
        return [arr[i].decode() for i in range(n)]

    def last_stats(self, i):
        """(step, statistics dict) of recipe i at the last statistics step."""
        from .core import _stats_dict
        buf = ctypes.create_string_buffer(lib.fp8_stats_size())
        st = ctypes.c_int64()
        self._call("last_stats", lib.fp8_probe_last_stats, i, ctypes.byref(st), buf)
        return st.value, _stats_dict(buf)


class Run:
    """A run file being written.  Options by name (probe options of
    fp8_probe.h): every, start, end, exp_hist, flush_steps, flush_seconds,
    snapshot_pattern, snapshot_every, snapshot_pairs, snapshot_codes,
    series, block_amax_every, threads, background, background_mb.  meta:
    /meta key/value pairs
    (docs/schema.md lists the keys the analyses read: recipe, applied,
    seed, smooth_swiglu, steps)."""

    def __init__(self, path, meta=None, **options):
        self.path = _check.text(path, "path")
        self._cv = threading.Condition()
        self._active = 0
        self._h = None
        self._opts = ctypes.create_string_buffer(lib.fp8_probe_options_size())
        lib.fp8_probe_defaults_into(self._opts)
        self._keep = []
        for k, v in options.items():
            if isinstance(v, bool):
                v = int(v)
            val = _check.text(v, "option %s" % k).encode()
            self._keep.append(val)
            check(lib.fp8_probe_option_set(self._opts, _check.text(k, "option name").encode(), val), "Run option")
        kv = []
        for k, v in (meta or {}).items():
            kv += [k, v]
        arr, keep = _c_strings(kv, "meta")
        h = lib.fp8_probe_open(self.path.encode(), self._opts, arr, len(kv) // 2)
        if not h:
            raise _lib.Error(self.path + ": " + _lib.last_error())
        self._h = h
        self._probes = {}

    def _enter(self, what, name=None):
        """A call begins (what, and the probe's name: the message, made
        only when the run is closed)."""
        with self._cv:
            if self._h is None:
                what = what if name is None else "%s %s" % (what, name)
                raise _lib.Error("%s: the run %s is closed" % (what, self.path))
            self._active += 1

    def _leave(self):
        with self._cv:
            self._active -= 1
            if self._active == 0:
                self._cv.notify_all()

    def _run_call(self, what, fn, *args):
        self._enter(what)
        try:
            return check(fn(self._h, *args), what)
        finally:
            self._leave()

    def probe(self, name, role, layer=-1, recipe=None, shadows=()):
        """Declare a probe on a named tensor: role (activation, weight,
        gradient, output, other), layer (-1 none), the active recipe (None:
        record the shadows only) and up to 15 shadow recipes."""
        shadows = list(shadows)
        arr, keep = _c_strings(shadows, "shadow recipe")
        name = _check.text(name, "tensor name")
        spec = None if recipe is None else _check.text(recipe, "recipe").encode()
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -1 <= int(layer) <= 1 << 20:
            raise ValueError("probe %s: layer %r is not -1 or 0..2^20" % (name, layer))
        self._enter("probe " + name)
        try:
            h = lib.fp8_probe_declare(self._h, name.encode(), _lib.role_id(role), int(layer), spec, arr, len(shadows))
        finally:
            self._leave()
        if not h:
            raise _lib.Error(_lib.last_error())
        p = Probe(self, h, name)
        self._probes[name] = p
        return p

    def scalar(self, name, step, value):
        self._run_call("scalar", lib.fp8_probe_scalar, _check.text(name, "scalar name").encode(), _check.step(step),
                       float(value))

    def step_end(self, step):
        """End of a training step: delayed scaling's history moves on; flushes when due."""
        self._run_call("step_end", lib.fp8_probe_step_end, _check.step(step))

    def training(self, on):
        """False: evaluation passes (record nothing, apply only casts)."""
        self._run_call("training", lib.fp8_probe_set_training, 1 if on else 0)

    def flush(self):
        self._run_call("flush", lib.fp8_probe_flush)

    @property
    def dropped(self):
        with self._cv:
            return int(lib.fp8_probe_dropped(self._h)) if self._h else 0

    def close(self):
        """Flush and close the file.  Calls other threads have in flight
        finish first; later calls on the run or its probes raise."""
        with self._cv:
            if self._h is None:
                return
            h, self._h = self._h, None  # new calls are refused from here on
            while self._active:
                self._cv.wait()
        self._probes.clear()
        check(lib.fp8_probe_close(h), "close " + self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
