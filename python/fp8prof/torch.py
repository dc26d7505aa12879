"""PyTorch hooks: record (and optionally apply) FP8 on a model's GEMMs.

    import fp8prof.torch
    with fp8prof.torch.Profiler(model, "run.h5", recipe="hybrid:delayed") as prof:
        for batch in data:
            for micro in batch.split(4):            # gradient accumulation is fine
                model(micro).loss.backward()
            opt.step(); opt.zero_grad()
            prof.step(loss=loss.item())             # one optimizer step

What is probed (docs/probes.md, "PyTorch"):
- gemms="linear" (default): every module of `modules` types (torch.nn.Linear),
  three tensors named after the module's qualified name: NAME.input
  (activation, rows x in_features), NAME.weight (weight, out x in as
  nn.Linear stores it), NAME.grad_output (gradient, rows x out_features).
- gemms="all": every matrix product run inside the model's forward, seen
  through torch's function mode: F.linear (nn.Linear included), torch.matmul
  and @, mm, bmm, addmm, baddbmm.  F.linear inside an nn.Linear keeps the
  names above; elsewhere a product is named after the module whose forward
  ran it, the op and its index in that forward: blocks.0.attn.matmul0.lhs,
  .rhs and .grad_output.  lhs: (..., M, K) as rows x K; rhs: (..., K, N) as
  N-major rows x K (the reduction dimension last, as for weights);
  grad_output: rows x N.  rhs is a weight when it is a Parameter, else an
  activation.  A product with an empty operand (an expert no token was
  routed to) records nothing.
- select: a regular expression; only names it matches (re.search) are
  probed (TransformerEngine's debug YAML selects by name pattern too).
The layer index is the first integer in the name ("layers.3.mlp.w1" -> 3).

Steps.  prof.step() marks an optimizer step.  Everything recorded between
two calls belongs to one step: micro-batches of gradient accumulation are
merged into one record per tensor (their rows concatenated: the amax is the
max over micro-batches, counts and error sums are summed — what one batch
holding them all gives), a weight is recorded once.  At steps without
statistics (every > 1) a probe needs only each tensor's amax: it is computed
with torch on the tensor's own device, the step's amaxes cross to the host
in one transfer at prof.step(), and no tensor is copied; whole tensors go to
the host only at statistics steps (and at every step for recipes that need
more than the amax: per-block delayed scaling — the claim test's
`e4m3:block=1x128:delayed` — and smoothed delayed recipes; FAST_SHADOWS
leaves the per-block one out).  prof.host_bytes counts the bytes copied.

apply=False records only: the recipe becomes the first shadow, nothing is
marked active, and /meta says recipe=fp32 (or bf16), applied=no and
recorded_recipe=<spec>.  apply=True also fake-quantizes the forward's
operands (input and weight; lhs and rhs) and the backward's grad_output
with the active recipe; gradients pass the casts straight through; master
weights are never modified.  Per-tensor delayed and current recipes of E4M3
/ E5M2 cast with torch on the tensor's device (torch_cast.py, bit for bit
the library's); other recipes copy the tensor to the host and cast there.
With gradient accumulation a current recipe casts each micro-batch with its
own scale, while the step's record holds their union (one scale).

logger: a callable logger(name, value, step) (TensorBoard's add_scalar, a
W&B log, print) given, at each statistics step and for every probed tensor
and recipe, "TENSOR/RECIPE/underflow_pct", "/overflow_pct", "/sqnr_db" and
"/scale_inv".

Evaluation passes (module.eval(), or torch.no_grad()) record nothing and
leave delayed scaling's history alone; with apply=True they still cast,
with the current scales.
"""
import re

import numpy as np
import torch as _torch
from torch.overrides import TorchFunctionMode

from . import _lib, torch_cast
from .record import Run

_LAYER = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")
_GEMMS = {"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm"}


def _layer_of(name):
    m = _LAYER.search(name)
    return int(m.group(1)) if m else -1


def _host(t):
    """(numpy array, dtype hint, the host tensor it views) of a 2-D tensor
    on the host, without converting bfloat16 or float16 in Python."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(np.uint16), "bfloat16", t
    if t.dtype == _torch.float16:
        return t.numpy(), None, t
    if t.dtype != _torch.float32:
        t = t.float()
    return t.numpy(), None, t


def _storage(t):
    """The address of t's storage, which its views share."""
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


_F32 = _torch.float32
_KINDS = {_torch.float32: _lib.DTYPE_F32, _torch.bfloat16: _lib.DTYPE_BF16, _torch.float16: _lib.DTYPE_F16}


def _flat(t):
    """t's elements C-contiguous (float32, bfloat16 or float16), in the
    order they lie in memory: a view when t is a permutation of a dense
    block (a transposed operand, attention's heads), else a copy.  For the
    amax alone, where the order of the elements does not matter."""
    t = t.detach()
    if t.dtype not in _KINDS:
        t = t.float()
    if not t.is_contiguous():
        if t.dim() > 1:
            order = sorted(range(t.dim()), key=lambda d: (t.stride(d), t.shape[d]), reverse=True)
            p = t.permute(order)
            t = p if p.is_contiguous() else t.contiguous()
        else:
            t = t.contiguous()
    return t


class _Slot:
    """One probe and what it has seen this step."""

    def __init__(self, prof, probe, name, role):
        self.prof, self.probe, self.name, self.role = prof, probe, name, role
        self.step, self.need, self.arrays, self.amaxes, self.seen = -1, False, [], [], False
        self.plan = None
        if prof.apply_recipe is not None:
            self.plan = torch_cast.plan(prof.apply_recipe, role)

    def begin(self):
        """Reset at the first call of a step; True when the step needs the tensor."""
        step = self.prof.step_no
        if self.step != step:
            self.step, self.arrays, self.amaxes, self.seen = step, [], [], False
            self.need = self.probe.needs_tensor(step)
            self.prof._pending.append(self)
        return self.need

    def keep(self, rows, src):
        """A statistics step: the rows of tensor src (2-D), to the host for the step's record."""
        arr, dt, h = _host(rows)
        if h.device == src.device and _storage(h) == _storage(src):
            # a view of the tensor: the step's record comes after it may change
            # (the optimizer updates weights before prof.step()); a copy made
            # on the way (a strided operand's rows, another dtype) is ours
            arr = arr.copy()
        self.arrays.append((arr, dt))
        if rows.device.type != "cpu" or self.prof.device_path:
            self.prof.host_bytes += arr.nbytes

    def flush(self, amax_rows):
        """At prof.step(): the step's amaxes (host rows), then its one record."""
        step = self.step
        if amax_rows is not None and len(amax_rows):
            m, inf, nan = torch_cast.amax_host(amax_rows)
            self.probe.note_amax(step, m, inf=inf, nan=nan)
        if not self.arrays:
            return
        arrs = [a for a, _ in self.arrays]
        dt = self.arrays[0][1]
        x = arrs[0] if len(arrs) == 1 else np.concatenate(arrs, axis=0)
        self.probe.record(step, x, dtype=dt)
        log = self.prof.logger
        if log is not None:
            for i, spec in enumerate(self.probe.recipes()):
                _, s = self.probe.last_stats(i)
                n = s["numel"] or 1
                base = "%s/%s/" % (self.name, spec)
                log(base + "underflow_pct", 100.0 * s["underflows"] / n, step)
                log(base + "overflow_pct", 100.0 * s["overflows"] / n, step)
                log(base + "sqnr_db", float(s["sqnr_db"]), step)
                log(base + "scale_inv", float(s["scale_inv"]), step)


def _observe(slot, t, rows, once=False):
    """Record-only: what slot's probe needs of tensor t this step."""
    if t is None or t.numel() == 0:
        return
    if slot.begin():
        if once and slot.seen:
            return
        slot.keep(rows(), t)
    elif not (once and slot.seen):
        if t.device.type == "cpu" and not slot.prof.device_path:
            # on the host already: the library's one-pass amax reads it in
            # place (faster than torch's several passes), in its memory order
            # (the step needs only the amax, and record-only probes have no
            # active recipe to cast): a transposed operand is not copied, only
            # one that is not a dense block (attention's q, k, v: slices of
            # one product)
            # (a dense float32 tensor, the usual one, as it is: _flat's
            # detach and checks cost a sixth of this call)
            f = t if t.dtype is _F32 and t.is_contiguous() else _flat(t)
            cols = f.shape[-1] if f.dim() else 1
            slot.probe._record_memory(slot.step, f.data_ptr(), _KINDS[f.dtype], f.numel() // cols, cols)
        else:
            slot.amaxes.append(torch_cast.amax3(t))
    slot.seen = True


def _fake(slot, x, rows, training, once=False):
    """apply=True: x fake-quantized by the slot's active recipe; what the
    step records noted (training)."""
    if x.numel() == 0:
        return x
    prof, probe = slot.prof, slot.probe
    plan = slot.plan
    need = slot.begin() if training else True
    if plan is not None and (x.device.type != "cpu" or prof.device_path) and not (training and need):
        # the tensor's own device: torch's cast, bit for bit the library's
        kind, fmt, eps = plan
        a3 = torch_cast.amax3(x)
        if kind == "delayed":
            s, si = probe.active_scale()
            s = _torch.tensor(s, dtype=_torch.float32, device=x.device)
            si = _torch.tensor(si, dtype=_torch.float32, device=x.device)
        else:
            s, si = torch_cast.current_scale(torch_cast.amax_of(a3), fmt, eps)
        if training and not (once and slot.seen):
            slot.amaxes.append(a3)
        slot.seen = True
        return torch_cast.qdq(x, fmt, s, si).to(x.dtype)
    arr = rows(x).detach().to("cpu", _torch.float32).contiguous().numpy()
    if x.device.type != "cpu" or x.dtype != _torch.float32 or prof.device_path:
        prof.host_bytes += arr.nbytes
    if not training:
        q = probe.cast(arr)
    elif need:
        q = probe.cast(arr)  # the cast the step applies; its record comes at prof.step()
        if not (once and slot.seen):
            slot.arrays.append((arr, None))
    else:
        q = probe.apply(slot.step, arr)  # (no record at this step: the state moves)
    slot.seen = True
    return _torch.from_numpy(q).to(device=x.device, dtype=x.dtype).reshape(x.shape)


class _Quant(_torch.autograd.Function):
    """Forward: the fake-quant of x; backward: straight through."""

    @staticmethod
    def forward(ctx, x, slot, training, rows, once):
        y = _fake(slot, x, rows, training, once)
        return y.clone() if y is x else y  # (a new tensor but for an empty x: no copy of the cast)

    @staticmethod
    def backward(ctx, g):
        return g, None, None, None, None


class _QuantGrad(_torch.autograd.Function):
    """Forward: identity; backward: the fake-quant of the incoming gradient."""

    @staticmethod
    def forward(ctx, y, slot):
        ctx.slot = slot
        return y.view_as(y)

    @staticmethod
    def backward(ctx, g):
        return _fake(ctx.slot, g, lambda t: t.reshape(-1, t.shape[-1]), True), None


class _Mode(TorchFunctionMode):
    """gemms="all": every matrix product inside the model's forward."""

    def __init__(self, prof):
        super().__init__()
        self.prof = prof

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in _GEMMS:
            return func(*args, **kwargs)
        return self.prof._gemm(func, name, args, kwargs)


class Profiler:
    """Probes on a model's GEMMs (see the module docstring).  recipe: the
    active recipe (None: record the shadows only); shadows: up to 15 more,
    evaluated on the same tensors (None: DEFAULT_SHADOWS); gemms: "linear"
    or "all"; modules: the module types of gemms="linear"; select: a name
    pattern; logger: logger(name, value, step); device_path: True sends CPU
    tensors down the GPU path too (amaxes and casts in torch; for tests and
    benches: on the CPU the library's own pass is faster); every and the other keyword
    options: Run's; meta: /meta pairs (recipe and applied are filled in)."""

    #: shadows that make format, timing, granularity, scale encoding and
    #: per-block delayed scaling comparable one factor at a time for every
    #: role (docs/analyses.md), gradients included
    DEFAULT_SHADOWS = ("e4m3:delayed", "e5m2:delayed", "e4m3:current", "e5m2:current", "e4m3:block=1x128:eps=0",
                       "e5m2:block=1x128:eps=0", "e4m3:block=1x128:ue8m0,eps=0", "e4m3:block=1x128:delayed,eps=0")
    #: the same without per-block delayed scaling, whose histories need every
    #: tensor at every step: with these the steps without statistics cost an
    #: amax on the device and nothing on the host
    FAST_SHADOWS = DEFAULT_SHADOWS[:-1]

    def __init__(self, model, path, recipe="hybrid:delayed", shadows=None, modules=(_torch.nn.Linear,), apply=False,
                 every=1, meta=None, gemms="linear", select=None, logger=None, device_path=False, **options):
        if apply and recipe is None:
            raise ValueError("apply=True needs an active recipe")
        if gemms not in ("linear", "all"):
            raise ValueError("gemms=%r is not 'linear' or 'all'" % (gemms,))
        if logger is not None and not callable(logger):
            raise TypeError("logger must be callable as logger(name, value, step)")
        meta = dict(meta or {})
        shadows = list(self.DEFAULT_SHADOWS if shadows is None else shadows)
        if not apply:
            # nothing is applied: the loop computes in the model's own precision,
            # and the recipe asked for is one more shadow (recorded first)
            dt = next((p.dtype for p in model.parameters()), _torch.float32)
            meta.setdefault("recipe", "bf16" if dt == _torch.bfloat16 else "fp32")
            if recipe is not None:
                meta.setdefault("recorded_recipe", recipe)
                if recipe not in shadows:
                    shadows.insert(0, recipe)
            recipe = None
        else:
            meta.setdefault("recipe", recipe)
        meta.setdefault("applied", "yes" if apply else "no")
        meta.setdefault("source", "fp8prof.torch.Profiler")
        self.run = Run(path, meta=meta, every=every, **options)
        self.recipe, self.shadows, self.apply, self.apply_recipe = recipe, shadows, apply, recipe if apply else None
        self.select = re.compile(select) if isinstance(select, str) else select
        self.logger = logger
        self.device_path = bool(device_path)  # True: CPU tensors take the device path too (tests, benches)
        self.step_no = 0
        self.host_bytes = 0
        self._pending = []
        self._slots = {}
        self._hooks = []
        self._saved = []
        self._stack = []  # (module path, {op: count}) of the forwards running
        self.names = []
        self._model = model
        if gemms == "linear":
            for qname, mod in model.named_modules():
                if isinstance(mod, modules) and self._selected(qname or type(mod).__name__.lower()):
                    self._wrap_linear(mod, qname or type(mod).__name__.lower())
        else:
            self._mode = _Mode(self)
            self._mod_type = modules
            for qname, mod in model.named_modules():
                self._hooks.append(mod.register_forward_pre_hook(self._push(qname)))
                self._hooks.append(mod.register_forward_hook(self._pop()))
            self._hooks.append(model.register_forward_pre_hook(self._enter_mode()))
            self._hooks.append(model.register_forward_hook(self._exit_mode()))

    # ---- probes --------------------------------------------------------------

    def _selected(self, name):
        return self.select is None or self.select.search(name) is not None

    def _slot(self, name, role):
        s = self._slots.get(name)
        if s is None:
            probe = self.run.probe(name, role, _layer_of(name), self.recipe, self.shadows)
            s = self._slots[name] = _Slot(self, probe, name, role)
            self.names.append(name)
        return s

    def _recording(self, mod=None):
        return (mod is None or mod.training) and _torch.is_grad_enabled()

    # ---- gemms="linear" ------------------------------------------------------

    def _wrap_linear(self, mod, qname):
        prof = self
        orig = mod.forward
        pin = self._slot(qname + ".input", "activation")
        pw = self._slot(qname + ".weight", "weight")
        pg = self._slot(qname + ".grad_output", "gradient")

        def forward(*args, **kwargs):
            x = args[0] if args else kwargs.get("input")
            if x is None or x.numel() == 0:  # no tokens routed here this step: nothing recorded
                return orig(*args, **kwargs)
            training = prof._recording(mod)
            if not prof.apply:
                if training:
                    _observe(pin, x, lambda: x.reshape(-1, x.shape[-1]))
                    _observe(pw, mod.weight, lambda: mod.weight, once=True)
                y = orig(*args, **kwargs)
                if training and y.requires_grad:
                    y.register_hook(lambda g: _observe(pg, g, lambda: g.reshape(-1, g.shape[-1])))
                return y
            xq = _Quant.apply(x, pin, training, lambda t: t.reshape(-1, t.shape[-1]), False)
            wq = _Quant.apply(mod.weight, pw, training, lambda t: t, True)
            y = _torch.nn.functional.linear(xq, wq, mod.bias)
            if training:
                y = _QuantGrad.apply(y, pg)
            return y

        mod.forward = forward
        self._saved.append((mod, orig))

    # ---- gemms="all" ---------------------------------------------------------

    def _push(self, qname):
        def hook(mod, args):
            self._stack.append((qname, mod, {}))
        return hook

    def _pop(self):
        def hook(mod, args, out):
            if self._stack:
                self._stack.pop()
        return hook

    def _enter_mode(self):
        def hook(mod, args):
            self._mode.__enter__()
        return hook

    def _exit_mode(self):
        def hook(mod, args, out):
            self._mode.__exit__(None, None, None)
        return hook

    def _gemm(self, func, op, args, kwargs):
        if not self._stack:
            return func(*args, **kwargs)
        path, mod, count = self._stack[-1]
        training = self._recording(mod)
        # the two operands (and where they sit in args)
        if op == "linear":
            ia, ib = 0, 1
        elif op in ("addmm", "baddbmm"):
            ia, ib = 1, 2
        elif op == "__rmatmul__":
            ia, ib = 1, 0
        else:
            ia, ib = 0, 1
        a = args[ia] if len(args) > ia else kwargs.get("input")
        b = args[ib] if len(args) > ib else kwargs.get("weight" if op == "linear" else "other")
        if not (isinstance(a, _torch.Tensor) and isinstance(b, _torch.Tensor)) or a.dim() < 1 or b.dim() < 1 or \
                not (training or self.apply):
            return func(*args, **kwargs)
        if op == "linear" and isinstance(mod, _torch.nn.Linear):
            base, names = path or type(mod).__name__.lower(), (".input", ".weight", ".grad_output")
        else:
            k = count.get(op, 0)
            count[op] = k + 1
            base = "%s%s%s%d" % (path, "." if path else "", op.strip("_"), k)
            names = (".lhs", ".rhs", ".grad_output")
        if not self._selected(base):
            return func(*args, **kwargs)
        if a.numel() == 0 or b.numel() == 0:
            return func(*args, **kwargs)  # an expert without tokens: nothing this step
        rb = "weight" if isinstance(b, _torch.nn.Parameter) else "activation"
        sa, sb = self._slot(base + names[0], "activation"), self._slot(base + names[1], rb)
        sg = self._slot(base + names[2], "gradient")
        K = a.shape[-1]
        rows_a = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
        if op == "linear":
            rows_b = lambda t: t  # noqa: E731  (out x in: K last already)
        else:
            rows_b = lambda t: t.transpose(-1, -2).reshape(-1, K) if t.dim() > 1 else t.reshape(1, -1)  # noqa: E731
        if self.apply:
            args = list(args)
            args[ia] = _Quant.apply(a, sa, training, rows_a, False)
            args[ib] = _Quant.apply(b, sb, training, rows_b, rb == "weight")
            y = func(*args, **kwargs)
            return _QuantGrad.apply(y, sg) if training else y
        _observe(sa, a, lambda: rows_a(a))
        _observe(sb, b, lambda: rows_b(b), once=rb == "weight")
        y = func(*args, **kwargs)
        if isinstance(y, _torch.Tensor) and y.requires_grad:
            y.register_hook(lambda g: _observe(sg, g, lambda: g.reshape(-1, g.shape[-1])))
        return y

    # ---- steps ---------------------------------------------------------------

    def _flush(self):
        """The pending step's amaxes (one transfer per device), then its
        merged records."""
        pending, self._pending = self._pending, []
        by_dev = {}
        for s in pending:
            for a in s.amaxes:
                by_dev.setdefault(a.device, []).append(a)
        host = {}
        for dev, lst in by_dev.items():
            h = _torch.stack(lst).cpu().numpy()
            self.host_bytes += h.nbytes
            host[dev] = iter(h)
        for s in pending:
            rows = np.array([next(host[a.device]) for a in s.amaxes]) if s.amaxes else None
            s.amaxes = []
            s.flush(rows)
            s.arrays = []

    def step(self, loss=None, **scalars):
        """End of an optimizer step: the step's amaxes (one transfer per
        device), its merged records, scalars (loss and any others); delayed
        scaling's history moves on, the step counter advances."""
        self._flush()
        if loss is not None:
            self.run.scalar("loss", self.step_no, float(loss))
        for k, v in scalars.items():
            self.run.scalar(k, self.step_no, float(v))
        self.run.step_end(self.step_no)
        self.step_no += 1

    def close(self):
        self._flush()  # a step left open: what it saw is not lost
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for mod, orig in self._saved:
            mod.forward = orig
        self._saved = []
        self.run.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
