"""The FP8 cast of per-tensor recipes as torch operations, on the tensor's
own device, bit for bit the library's (tests/…: against fp8prof.cast and
decode on 10^6 inputs per format and scale).

x_hat = Q(x * scale) * scale_inv in float32, Q rounding to the nearest
value of the format (ties to even), subnormals included, saturating at the
format's max (its default), NaN kept.  E4M3 (fn): 3 mantissa bits, smallest
normal exponent -6, max 448; E5M2: 2 bits, -14, 57344.  Current scaling's
scale is TransformerEngine's rule as the library computes it: amax (largest
finite |x|) floored at eps; 1 when that is 0; fp8_max / amax in float32,
FLT_MAX when that overflows; scale_inv = 1 / scale.
"""
import re

import numpy as np
import torch as _torch

FORMATS = {"e4m3": (3, -6, 448.0), "e5m2": (2, -14, 57344.0)}
FLT_MAX = 3.4028234663852886e38
_AS_IS = (_torch.float32, _torch.bfloat16, _torch.float16)  # the dtypes amax3 reads without converting
_OPT = re.compile(r"^(history|amax_history_len|algo|amax_compute_algo|margin|eps|epsilon|amax_floor|finite_amax)(=.*)?$")


def plan(spec, role):
    """(kind, format, eps) when torch can cast recipe `spec` for `role` bit
    for bit, else None (the library's path then): per-tensor delayed or
    current scaling of E4M3 / E5M2 (hybrid: E5M2 for gradients), nearest
    rounding, saturating, no pow2 / torchao / reduce= / smoothing."""
    parts = spec.split(":")
    head = parts[0]
    if head == "hybrid":
        head = "e5m2" if role == "gradient" else "e4m3"
    if head not in FORMATS or len(parts) < 2 or parts[1] not in ("delayed", "current", "tensorwise"):
        return None
    eps = 0.0
    for p in parts[2:]:
        for opt in p.split(","):
            if not opt:
                continue
            if not _OPT.match(opt):
                return None
            if opt.split("=")[0] in ("eps", "epsilon", "amax_floor"):
                eps = float(opt.split("=", 1)[1])
    return ("delayed" if parts[1] == "delayed" else "current", head, eps)


def amax3(t):
    """What a step without statistics needs of t, as a float32 triple on t's
    device (12 bytes when it crosses to the host; amax_host reads it): the
    largest finite |t| (negative when there is none), the minimum of |t|
    with NaN -> -1 and Inf -> -2 (-2: t held an Inf), and the largest |t|
    (NaN: t held a NaN; torch's max reductions propagate NaN).  Four passes
    over t and five kernels whatever it holds (|t|, the markers, their
    minimum and maximum, the plain maximum, the triple), where the flags'
    arithmetic on the device took seven more.  Another dtype than float32 /
    bfloat16 / float16 is converted to float32 first (a float64 beyond
    float32's range is an Inf, as the library sees it), and float16 on the
    CPU too."""
    a = t.detach().abs()
    if a.dtype not in _AS_IS or (a.dtype == _torch.float16 and a.device.type == "cpu"):
        a = a.to(_torch.float32)  # (torch's CPU reductions of float16 are slow, aminmax has none)
    if a.numel() == 0:
        return _torch.zeros(3, dtype=_torch.float32, device=a.device)
    lo, hi = _torch.aminmax(a.nan_to_num(nan=-1.0, posinf=-2.0))
    return _torch.stack([hi, lo, a.amax()]).to(_torch.float32)


def amax_of(a3):
    """The float32 amax (largest finite |x|, 0 when none) of an amax3 triple, on its device."""
    return a3[0].clamp_min(0)


def amax_host(rows):
    """(amax, inf, nan) of amax3 triples on the host (k x 3, one per
    micro-batch of a tensor): the largest finite |x| of them all (0 when
    none), whether any held an Inf, whether any held a NaN."""
    rows = np.asarray(rows, dtype=np.float32).reshape(-1, 3)
    return max(float(rows[:, 0].max()), 0.0), bool((rows[:, 1] == -2).any()), bool(np.isnan(rows[:, 2]).any())


def current_scale(amax, fmt, eps):
    """The library's current-scaling scale and scale_inv, float32 tensors."""
    fmax = _torch.tensor(FORMATS[fmt][2], dtype=_torch.float32, device=amax.device)
    a = _torch.maximum(amax.to(_torch.float32), _torch.tensor(eps, dtype=_torch.float32, device=amax.device))
    ok = (a > 0) & _torch.isfinite(a)
    s = _torch.where(ok, fmax / _torch.where(ok, a, _torch.ones_like(a)), _torch.ones_like(a))
    s = _torch.where(_torch.isinf(s), _torch.full_like(s, FLT_MAX), s)
    return s, _torch.ones_like(s) / s


def qdq(x, fmt, scale, scale_inv):
    """Q(x * scale) * scale_inv in float32 (see the module docstring)."""
    mbits, emin, fmax = FORMATS[fmt]
    v = x.to(_torch.float32) * scale
    _, e = _torch.frexp(v)  # |v| = m 2^e, m in [0.5, 1): floor(log2 |v|) = e - 1
    e = _torch.clamp(e - 1, min=emin).to(_torch.float32)
    step = _torch.exp2(e - mbits)  # a power of two: v / step and q * step are exact
    q = _torch.round(v / step) * step  # ties to even
    q = _torch.clamp(q, -fmax, fmax)  # saturating (Inf too); NaN stays NaN
    return q * scale_inv
