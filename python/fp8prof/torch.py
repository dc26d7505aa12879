"""PyTorch hooks: record (and optionally apply) FP8 on a model's linear layers.

    import fp8prof.torch
    with fp8prof.torch.Profiler(model, "run.h5", recipe="hybrid:delayed",
                                shadows=["e4m3:current", "e4m3:block=1x128"]) as prof:
        for batch in data:
            loss = model(batch).loss; loss.backward(); opt.step(); opt.zero_grad()
            prof.step(loss=loss.item())

Per matched module (torch.nn.Linear by default) three tensors are probed,
named after the module's qualified name: NAME.input (role activation, the
input as rows x in_features), NAME.weight (role weight, out_features x
in_features as nn.Linear stores it) and NAME.grad_output (role gradient,
rows x out_features); the layer index is the first integer in the name
("layers.3.mlp.w1" -> 3).  Blocks of 1xK recipes therefore run along
in_features for input and weight (the fprop GEMM's reduction dimension) and
along out_features for grad_output (dgrad's).

apply=False records only (a forward wrapper and full backward hooks): the
recipe is then recorded as the first shadow, nothing is marked active, and
/meta says recipe=fp32 (or bf16, the model's parameter dtype) and
applied=no, so the analyses never mistake the run for an FP8 run.
apply=True also fake-quantizes: the forward computes
linear(Q(input), Q(weight), bias) with the active recipe's casts (E4M3 for
both under hybrid), and the backward quantizes grad_output (E5M2 under
hybrid) before it flows on; gradients pass the casts straight through, and
the master weights are never modified.

A batch with no tokens (an expert of a mixture-of-experts layer that no
token was routed to) records nothing for that call and passes through.
The input may be given by position or as input= (nn.Linear's name).

Evaluation passes (module.eval(), or torch.no_grad()) record nothing and
leave delayed scaling's history alone; with apply=True they still cast, with
the current scales.  CUDA tensors are copied to the host for the statistics
(the cost of a device-to-host copy of each probed tensor per step).
"""
import re

import numpy as np
import torch as _torch

from .record import Run

_LAYER = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


def _layer_of(name):
    m = _LAYER.search(name)
    return int(m.group(1)) if m else -1


def _host(t):
    """(numpy array, dtype hint) of a tensor on the host, without converting
    bfloat16 or float16 in Python."""
    t = t.detach()
    if t.is_cuda:
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(np.uint16), "bfloat16"
    if t.dtype == _torch.float16:
        return t.numpy(), None
    if t.dtype != _torch.float32:
        t = t.float()
    return t.numpy(), None


def _rows(t, cols):
    return t.reshape(-1, cols)


class _Quant(_torch.autograd.Function):
    """Forward: the probe's fake-quant of x (recorded when training);
    backward: straight through."""

    @staticmethod
    def forward(ctx, x, probe, step, training, cols):
        if x.numel() == 0:  # no tokens: nothing to cast or record
            return x.clone()
        arr = _rows(x, cols).detach().to("cpu", _torch.float32).contiguous().numpy()
        q = probe.apply(step, arr) if training else probe.cast(arr)
        return _torch.from_numpy(q).to(device=x.device, dtype=x.dtype).reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        return g, None, None, None, None


class _QuantGrad(_torch.autograd.Function):
    """Forward: identity; backward: the probe's fake-quant of the incoming
    gradient (recorded)."""

    @staticmethod
    def forward(ctx, y, probe, prof, cols):
        ctx.probe, ctx.prof, ctx.cols = probe, prof, cols
        return y.view_as(y)

    @staticmethod
    def backward(ctx, g):
        if g.numel() == 0:
            return g, None, None, None
        arr = _rows(g, ctx.cols).detach().to("cpu", _torch.float32).contiguous().numpy()
        q = ctx.probe.apply(ctx.prof.step_no, arr)
        return _torch.from_numpy(q).to(device=g.device, dtype=g.dtype).reshape(g.shape), None, None, None


class Profiler:
    """Probes on every module of `modules` types in `model` (see the module
    docstring).  recipe: the active recipe (None: record the shadows only);
    shadows: up to 15 more, evaluated on the same tensors (None: the
    DEFAULT_SHADOWS); every and the other keyword options: Run's; meta:
    /meta pairs (recipe and applied are filled in)."""

    #: shadows that make format, timing, granularity, scale encoding and
    #: per-block delayed scaling comparable one factor at a time for every
    #: role (docs/analyses.md), gradients included
    DEFAULT_SHADOWS = ("e4m3:delayed", "e5m2:delayed", "e4m3:current", "e5m2:current", "e4m3:block=1x128:eps=0",
                       "e5m2:block=1x128:eps=0", "e4m3:block=1x128:ue8m0,eps=0", "e4m3:block=1x128:delayed,eps=0")

    def __init__(self, model, path, recipe="hybrid:delayed", shadows=None, modules=(_torch.nn.Linear,), apply=False,
                 every=1, meta=None, **options):
        if apply and recipe is None:
            raise ValueError("apply=True needs an active recipe")
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
        self.step_no = 0
        self.apply = apply
        self._hooks = []
        self._saved = []
        self.names = []
        for qname, mod in model.named_modules():
            if not isinstance(mod, modules):
                continue
            qname = qname or type(mod).__name__.lower()  # the model itself is a matched module
            layer = _layer_of(qname)
            pin = self.run.probe(qname + ".input", "activation", layer, recipe, shadows)
            pw = self.run.probe(qname + ".weight", "weight", layer, recipe, shadows)
            pg = self.run.probe(qname + ".grad_output", "gradient", layer, recipe, shadows)
            self.names += [qname + ".input", qname + ".weight", qname + ".grad_output"]
            self._wrap(mod, pin, pw, pg, apply)
            if not apply:
                self._hooks.append(mod.register_full_backward_hook(self._back_hook(mod, pg)))

    def _recording(self, mod):
        return mod.training and _torch.is_grad_enabled()

    def _record_inputs(self, m, x, pin, pw):
        if not self._recording(m) or x is None or x.numel() == 0:
            return
        arr, dt = _host(_rows(x, x.shape[-1]))
        pin.record(self.step_no, arr, dtype=dt)
        warr, wdt = _host(m.weight)
        pw.record(self.step_no, warr, dtype=wdt)

    def _back_hook(self, mod, pg):
        def hook(m, grad_input, grad_output):
            g = grad_output[0]
            if g is None or not m.training or g.numel() == 0:
                return None
            arr, dt = _host(_rows(g, g.shape[-1]))
            pg.record(self.step_no, arr, dtype=dt)
            return None
        return hook

    def _wrap(self, mod, pin, pw, pg, apply):
        prof = self
        orig = mod.forward

        def forward(*args, **kwargs):
            x = args[0] if args else kwargs.get("input")
            if not apply or x is None:
                prof._record_inputs(mod, x, pin, pw)
                return orig(*args, **kwargs)
            if x.numel() == 0:  # no tokens routed here this step: nothing recorded
                return orig(*args, **kwargs)
            training = prof._recording(mod)
            xq = _Quant.apply(x, pin, prof.step_no, training, mod.in_features)
            wq = _Quant.apply(mod.weight, pw, prof.step_no, training, mod.in_features)
            y = _torch.nn.functional.linear(xq, wq, mod.bias)
            if training:
                y = _QuantGrad.apply(y, pg, prof, mod.out_features)
            return y

        mod.forward = forward
        self._saved.append((mod, orig))

    def step(self, loss=None, **scalars):
        """End of a training step: scalars recorded (loss and any others),
        delayed scaling's history moves on, the step counter advances."""
        if loss is not None:
            self.run.scalar("loss", self.step_no, float(loss))
        for k, v in scalars.items():
            self.run.scalar(k, self.step_no, float(v))
        self.run.step_end(self.step_no)
        self.step_no += 1

    def close(self):
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
