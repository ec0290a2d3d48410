#!/usr/bin/env python3
"""PyTorch reference of the Toeplitz MLP Mixer, written from docs/model.md.

    torch_ref.py IN.safetensors OUT.safetensors

IN holds the model's config in __metadata__ (vocab, d_model, n_ctx, n_layers,
heads, expansion, kernel, expanded, frozen), every parameter under tmm's
names, and a batch: "batch.tokens" and "batch.targets" (int32 [B, n]; a
negative target is not scored). OUT gets "logits" [B, n, V], "loss" [1] and
"grad.<name>" for every parameter that trains, all float64: the model runs
in float64 so that it serves as ground truth.

Independent of tmm's code: the Toeplitz layer is an explicit lower-triangular
matrix per group and tap (tmm never builds one), and the rest is torch.nn.
"""
import json
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32}
NAMES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + hlen])
    meta = header.pop("__metadata__", {})
    data = blob[8 + hlen :]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]) if info["shape"] else t.reshape(())
    return meta, tensors


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def toeplitz(u, w, beta, groups):
    """Causal Toeplitz mixing along the sequence.

    u: [B, n, d]; w: [G, K, n]; beta: [G, n]. Channel c belongs to group
    c // (d / G); with K taps, channel c mixes channels c-K+1 .. c of its own
    group, tap a reading channel c-(K-1)+a through its own filter w[g, a].
    As in the paper's reference, each group (head) is its own module that
    zero-pads its own channels: channels below the group's first are zero.
    """
    B, n, d = u.shape
    G, K, _ = w.shape
    idx = torch.arange(n)
    lag = idx[:, None] - idx[None, :]                       # t - s
    causal = lag >= 0
    y = torch.zeros_like(u)
    per = d // G
    for g in range(G):
        cs = slice(g * per, (g + 1) * per)
        padded = F.pad(u[:, :, cs], (K - 1, 0))              # the group alone, zeros in front
        for a in range(K):
            T = torch.where(causal, w[g, a][lag.clamp(min=0)], torch.zeros((), dtype=u.dtype))  # [n, n]
            src = padded[:, :, a : a + per]                  # u[b, s, c-(K-1)+a] within the group
            y[:, :, cs] = y[:, :, cs] + torch.einsum("ts,bsc->btc", T, src)
        y[:, :, cs] = y[:, :, cs] + beta[g][None, :, None]
    return y


def forward(cfg, p, tokens, targets):
    L, heads, expanded = cfg["n_layers"], cfg["heads"], cfg["expanded"]
    groups = heads if heads else 1
    d = cfg["d_model"]
    h = p["embed.weight"][tokens.long()]
    for l in range(L):
        b = f"blocks.{l}."
        x = F.layer_norm(h, (d,), p[b + "ln1.weight"], p[b + "ln1.bias"], eps=1e-5)
        x = F.linear(F.silu(F.linear(x, p[b + "mlp.fc1.weight"], p[b + "mlp.fc1.bias"])),
                     p[b + "mlp.fc2.weight"], p[b + "mlp.fc2.bias"])
        h = h + x
        x = F.layer_norm(h, (d,), p[b + "ln2.weight"], p[b + "ln2.bias"], eps=1e-5)
        if heads:
            x = F.linear(x, p[b + "mix.in.weight"], p[b + "mix.in.bias"])
        x = toeplitz(x, p[b + "mix.w"], p[b + "mix.beta"], groups)
        if expanded:
            x = toeplitz(F.silu(x), p[b + "mix.w2"], p[b + "mix.beta2"], groups)
        if heads:
            x = F.linear(x, p[b + "mix.out.weight"], p[b + "mix.out.bias"])
        h = h + x
    logits = F.linear(h, p["lm_head.weight"])
    t = targets.long().clone()
    t[t < 0] = -100
    if (t >= 0).any():
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1), ignore_index=-100)
    else:
        loss = logits.sum() * 0.0
    return logits, loss


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: torch_ref.py IN.safetensors OUT.safetensors")
    meta, tensors = read_safetensors(sys.argv[1])
    cfg = {k: int(meta[k]) for k in ("vocab", "d_model", "n_ctx", "n_layers", "heads", "expansion", "kernel")}
    cfg["expanded"] = meta["expanded"] == "1"
    frozen = meta["frozen"] == "1"
    tokens, targets = tensors.pop("batch.tokens"), tensors.pop("batch.targets")
    params = {}
    for name, t in tensors.items():
        trains = not (frozen and (".mix.w" in name or ".mix.beta" in name))
        params[name] = t.to(torch.float64).requires_grad_(trains)
    logits, loss = forward(cfg, params, tokens, targets)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    for name, t in params.items():
        if t.requires_grad:
            out["grad." + name] = t.grad
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
