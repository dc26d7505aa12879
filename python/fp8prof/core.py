"""Formats, casts and the statistics engine (the C library's, through ctypes)."""
import ctypes

import numpy as np

from . import _check, _lib
from ._lib import lib, check

_ROUND = {"nearest": 0, "zero": 1, "stochastic": 2}


def _format(fmt):
    """The C descriptor of a format name (registry names or eXmY forms); the
    scratch buffer is kept alive beside it."""
    scratch = _lib.Format()
    p = lib.fp8_format_find(_check.text(fmt, "format").encode(), ctypes.byref(scratch))
    if not p:
        raise ValueError("fp8prof: " + _lib.last_error())
    return p, scratch


def formats():
    """Every built-in format as a dict: name, bits, ebits, mbits, bias, max,
    min_normal, min_subnormal, has_inf, has_nan, has_negzero, code_bytes."""
    n = ctypes.c_size_t()
    arr = lib.fp8_format_list(ctypes.byref(n))
    out = []
    for i in range(n.value):
        f = arr[i].contents
        out.append({"name": f.name.decode(), "bits": f.bits, "ebits": f.ebits, "mbits": f.mbits, "bias": f.bias,
                    "max": f.max, "min_normal": f.min_normal, "min_subnormal": f.min_subnormal,
                    "has_inf": bool(f.has_inf), "has_nan": bool(f.has_nan), "has_negzero": bool(f.has_negzero),
                    "code_bytes": f.code_bytes})
    return out


def _codes_dtype(code_bytes):
    return {1: np.uint8, 2: np.uint16, 4: np.uint32}[code_bytes]


def _f32(x):
    return _check.floats_in(x, "x")


def cast(x, fmt, round="nearest", saturate=True, scale=1.0, seed=0):
    """Codes of cast(x * scale) in fmt (uint8 for 8-bit formats, wider for
    wider ones), as the C library casts: rounding "nearest" (ties to even),
    "zero" or "stochastic" (keyed by seed and the element index); saturate
    False turns overflow into Inf (or NaN where the format has no Inf)."""
    if round not in _ROUND:
        raise ValueError("round must be one of %s" % ", ".join(_ROUND))
    seed = _check.uint(seed, "seed")
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError("scale %r is not a positive finite number" % (scale,))
    p, keep = _format(fmt)
    x = _f32(x)
    codes = np.empty(x.shape, dtype=_codes_dtype(p.contents.code_bytes))
    mode = _lib.CastMode(_ROUND[round], 0 if saturate else 1, seed, 0)
    check(lib.fp8_format_encode_array(p, ctypes.byref(mode), float(scale), x.ctypes.data, x.size,
                                      codes.ctypes.data, None), "cast")
    del keep
    return codes


def decode(codes, fmt, scale_inv=1.0):
    """float32 values of codes in fmt, times scale_inv."""
    p, keep = _format(fmt)
    c = np.asarray(codes)
    bits = p.contents.bits
    if c.dtype.kind not in "iuf" or c.dtype.kind == "f" and not np.all(np.isfinite(c) & (c == np.floor(c))):
        raise TypeError("decode: codes must be whole numbers (the format's code integers), not %s values" % c.dtype)
    if c.size and (c.min() < 0 or c.max() >= (1 << bits)):
        bad = c[(c < 0) | (c >= (1 << bits))].ravel()[:3]
        raise ValueError("decode: codes %s are outside 0..%d, the codes of %s" %
                         (", ".join(str(int(v)) for v in bad), (1 << bits) - 1, fmt))
    codes = np.ascontiguousarray(c, dtype=_codes_dtype(p.contents.code_bytes))
    out = np.empty(codes.shape, dtype=np.float32)
    check(lib.fp8_format_decode_array(p, float(scale_inv), codes.ctypes.data, codes.size, out.ctypes.data), "decode")
    del keep
    return out


_STATS_DTYPE = None


def stats_dtype():
    """numpy dtype of the C statistics record (fp8_stats)."""
    global _STATS_DTYPE
    if _STATS_DTYPE is None:
        _STATS_DTYPE = _lib.field_dtype(lib.fp8_stats_fields, lib.fp8_stats_size)
    return _STATS_DTYPE


def _stats_dict(buf):
    rec = np.frombuffer(buf, dtype=stats_dtype(), count=1)[0]
    out = {}
    for name in stats_dtype().names:
        v = rec[name]
        out[name] = v.copy() if isinstance(v, np.ndarray) else v.item()
    out["classes"] = {lib.fp8_class_name(i).decode(): int(c) for i, c in enumerate(out["classes"])}
    out["format"] = lib.fp8_stats_format_name(ctypes.addressof(buf)).decode()
    return out


class Recipe:
    """A recipe's state on one tensor: quantize() it step after step (delayed
    scaling keeps its history), step() at the end of each step."""

    def __init__(self, spec, role="activation"):
        self._st = None
        self._st = lib.fp8_recipe_state_new(_check.text(spec, "recipe").encode(), _check.text(role, "role").encode())
        if not self._st:
            raise ValueError("fp8prof: " + _lib.last_error())
        self.spec = spec

    def quantize(self, x):
        """(x_hat float32 of x's shape, statistics dict).  A 1-D tensor is one
        row; more dimensions: the last is the columns."""
        x = _f32(x)
        rows, cols = _check.shape2(x, "quantize: x")
        out = np.empty_like(x)
        buf = ctypes.create_string_buffer(lib.fp8_stats_size())
        check(lib.fp8_quantize(self._st, x.ctypes.data, rows, cols, out.ctypes.data, ctypes.addressof(buf)), "quantize")
        return out, _stats_dict(buf)

    def step(self):
        lib.fp8_recipe_state_step(self._st)

    def close(self):
        if self._st:
            lib.fp8_recipe_state_free(self._st)
            self._st = None

    def __del__(self):
        self.close()


def _shape2(x):
    if x.ndim == 0:
        return 1, 1
    cols = x.shape[-1]
    return (x.size // cols if cols else 0), cols


def quantize(x, recipe, role="activation"):
    """(x_hat, statistics) of x under recipe (a spec such as "e4m3:current"
    or "mxfp8"), one step of a fresh state; names of the statistics:
    docs/statistics.md."""
    r = Recipe(recipe, role)
    try:
        return r.quantize(x)
    finally:
        r.close()
