#!/usr/bin/python3
"""torch_llama.py — a tiny Llama-style model trained in PyTorch on the data
the built-in trainer uses (Debian's fortunes as bytes, else the common
licenses; the first 90% trains), under fp8prof.torch.Profiler: every
nn.Linear's input, weight and grad_output recorded (and with --apply,
fake-quantized), so the run file goes through `fp8prof report` as is.

usage: datasets/torch_llama.py [-o RUN.h5] [--steps N] [--recipe SPEC]
         [--shadow SPEC ...] [--apply] [--layers L] [--dim D] [--seed S]
Names follow the built-in trainer's: layers.<i>.attn.qkv, layers.<i>.attn.out,
layers.<i>.mlp.w1|w2|w3 (SwiGLU), lm_head.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8prof.torch as fpt  # noqa: E402


def corpus():
    for d in ("/usr/share/games/fortunes", "/usr/share/common-licenses"):
        if not os.path.isdir(d):
            continue
        data = bytearray()
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.startswith(".") or name.endswith(".dat") or name.endswith(".u8") or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                data += f.read()
        if len(data) >= 100000:
            return bytes(data), d
    raise SystemExit("torch_llama: no text (install Debian's fortunes)")


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.g = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g


class Attention(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(D // self.heads)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        return self.out((att @ v).transpose(1, 2).reshape(B, T, D))


class MLP(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        hidden = (8 * dim // 3 + 15) // 16 * 16
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(torch.nn.Module):
    """Top-1 routed experts (each a SwiGLU MLP); an expert no token is routed
    to runs on an empty tensor, which the profiler skips."""

    def __init__(self, dim, experts):
        super().__init__()
        self.router = torch.nn.Linear(dim, experts, bias=False)
        self.experts = torch.nn.ModuleList(MLP(dim) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        gate = self.router(flat).softmax(-1)
        top = gate.argmax(-1)
        out = torch.zeros_like(flat)
        for e, mlp in enumerate(self.experts):
            sel = (top == e).nonzero().squeeze(-1)
            y = mlp(flat[sel]) * gate[sel, e].unsqueeze(-1)
            out = out.index_add(0, sel, y)
        return out.reshape(x.shape)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, experts=0):
        super().__init__()
        self.n1, self.attn, self.n2 = RMSNorm(dim), Attention(dim, heads), RMSNorm(dim)
        self.mlp = MoE(dim, experts) if experts else MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class Llama(torch.nn.Module):
    def __init__(self, layers, dim, heads, ctx, experts=0):
        super().__init__()
        self.emb = torch.nn.Embedding(256, dim)
        self.pos = torch.nn.Parameter(torch.zeros(ctx, dim))
        self.layers = torch.nn.ModuleList(Block(dim, heads, experts) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = torch.nn.Linear(dim, 256, bias=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos[: idx.shape[1]]
        for b in self.layers:
            x = b(x)
        return self.lm_head(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", default="torch_llama.h5")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--recipe", default="hybrid:delayed")
    ap.add_argument("--shadow", action="append", default=None)
    ap.add_argument("--apply", action="store_true", help="fake-quantize (default: record only)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--gemms", choices=("linear", "all"), default="linear",
                    help="all: attention's q k^T and att v too (every matrix product)")
    ap.add_argument("--experts", type=int, default=0, help="N > 0: a top-1 mixture of N experts for each MLP")
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step (gradient accumulation)")
    a = ap.parse_args()
    shadows = a.shadow if a.shadow is not None else ["e4m3:delayed", "e5m2:delayed", "e4m3:current", "e5m2:current",
                                                     "e4m3:block=1x128:eps=0"]
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    data, source = corpus()
    n = len(data) // 10 * 9
    train = torch.frombuffer(bytearray(data[:n]), dtype=torch.uint8).long()
    model = Llama(a.layers, a.dim, a.heads, a.ctx, a.experts)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    meta = {"source": "datasets/torch_llama.py", "seed": str(a.seed), "steps": str(a.steps), "data": source,
            "model": "layers %d dim %d heads %d ctx %d batch %d" % (a.layers, a.dim, a.heads, a.ctx, a.batch),
            "smooth_swiglu": "no", "accumulation": "fp32 (torch CPU)", "micro_batches": str(a.accum),
            "experts": str(a.experts)}
    if not a.apply:
        meta["recipe"] = "bf16"  # record only: the recipes are shadows of a high-precision run
    g = torch.Generator().manual_seed(a.seed)
    with fpt.Profiler(model, a.o, recipe=a.recipe, shadows=shadows, apply=a.apply, every=a.every, meta=meta,
                      gemms=a.gemms) as prof:
        for step in range(a.steps):
            lr = a.lr * min(1.0, (step + 1) / max(1, a.steps // 10))
            for grp in opt.param_groups:
                grp["lr"] = lr
            off = torch.randint(0, n - a.ctx - 1, (a.batch,), generator=g)
            x = torch.stack([train[o:o + a.ctx] for o in off.tolist()])
            y = torch.stack([train[o + 1:o + 1 + a.ctx] for o in off.tolist()])
            opt.zero_grad()
            loss = 0.0
            for xm, ym in zip(x.chunk(a.accum), y.chunk(a.accum)):
                part = F.cross_entropy(model(xm).reshape(-1, 256), ym.reshape(-1)) / a.accum
                part.backward()
                loss = loss + part.detach()
            opt.step()
            prof.step(loss=loss.item())
            if step % 50 == 0 or step == a.steps - 1:
                print("step %d loss %.4f" % (step, loss.item()), flush=True)
    print("run", a.o)


if __name__ == "__main__":
    main()
