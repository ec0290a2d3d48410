#!/usr/bin/env python3
"""PyTorch reference of tmm's models, written from docs/model.md (the TMM)
and docs/baselines.md (transformer, swa, linear attention, Hyena, Mamba 2).

    torch_ref.py IN.safetensors OUT.safetensors

IN holds the model's config in __metadata__ (arch, vocab, d_model, n_ctx,
n_layers, heads, expansion, kernel, expanded, frozen, window, state; arch,
window and state may be missing for a TMM), every parameter under tmm's names, and a
batch: "batch.tokens" and "batch.targets" (int32 [B, n]; a negative target
is not scored). OUT gets "logits" [B, n, V], "loss" [1] and "grad.<name>" for
every parameter that trains, all float64: the model runs in float64 so that
it serves as ground truth.

Independent of tmm's code: the Toeplitz layer is an explicit lower-triangular
matrix per group and tap (tmm never builds one), softmax attention and
linear attention are explicit masked n x n matrices (tmm computes neither:
it streams keys, and runs linear attention in chunks), Hyena's long
convolution is an explicit n x n causal Toeplitz matrix per channel and its
short convolution torch's padded conv1d, Mamba 2 is the recurrence over t on
[B, heads, P, N] states with torch's conv1d, and the rest is
torch.nn.functional.
"""
import json
import math
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


def rms_norm(x, g, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g


def rope(x, heads):
    """Rotate-half RoPE, base 10000, on [B, n, d] with `heads` heads."""
    B, n, d = x.shape
    dh = d // heads
    x = x.reshape(B, n, heads, dh)
    t = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(dh // 2, dtype=torch.float64)[None, :]
    angle = t * 10000.0 ** (-2.0 * i / dh)  # [n, dh/2]
    cos, sin = torch.cos(angle)[None, :, None, :], torch.sin(angle)[None, :, None, :]
    a, b = x[..., : dh // 2], x[..., dh // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).reshape(B, n, d)


def split_heads(x, heads):
    B, n, d = x.shape
    return x.reshape(B, n, heads, d // heads).transpose(1, 2)  # [B, H, n, dh]


def softmax_attention(q, k, v, heads, window):
    n = q.shape[1]
    q, k, v = (split_heads(z, heads) for z in (q, k, v))
    scores = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5)
    t = torch.arange(n)[:, None]
    s = torch.arange(n)[None, :]
    allowed = s <= t
    if window:
        allowed &= s > t - window
    scores = scores.masked_fill(~allowed, float("-inf"))
    o = torch.softmax(scores, dim=-1) @ v
    return o.transpose(1, 2).reshape(q.shape[0], n, -1)


def linear_attention(q, k, v, heads):
    n = q.shape[1]
    phi = lambda z: F.elu(z) + 1
    q, k, v = (split_heads(z, heads) for z in (q, k, v))
    a = (phi(q) @ phi(k).transpose(-1, -2)) * torch.tril(torch.ones(n, n, dtype=q.dtype))
    o = (a @ v) / (a.sum(-1, keepdim=True) + 1e-6)
    return o.transpose(1, 2).reshape(q.shape[0], n, -1)


def baseline_block(cfg, p, b, h):
    """Pre-norm block of the transformer family: attention, then SwiGLU."""
    x = rms_norm(h, p[b + "attn_norm.weight"])
    q, k, v = (F.linear(x, p[b + f"attn.{z}.weight"]) for z in "qkv")
    if cfg["arch"] == "linear":
        o = linear_attention(q, k, v, cfg["heads"])
    else:
        o = softmax_attention(rope(q, cfg["heads"]), rope(k, cfg["heads"]), v, cfg["heads"], cfg["window"])
    h = h + F.linear(o, p[b + "attn.o.weight"])
    x = rms_norm(h, p[b + "mlp_norm.weight"])
    gate, up = F.linear(x, p[b + "mlp.gate_up.weight"]).chunk(2, dim=-1)
    return h + F.linear(F.silu(gate) * up, p[b + "mlp.down.weight"])


def hyena_filter(p, b, n, d):
    """The implicit long filter hf [n, d] (docs/baselines.md section 4)."""
    f64 = torch.float64
    t = torch.arange(n, dtype=f64)
    tt = t / (n - 1) if n > 1 else torch.zeros(n, dtype=f64)   # torch.linspace(0, 1, n)
    angle = 2 * math.pi * 1e-4 * t / n
    z = torch.stack([tt, torch.cos(angle), -torch.sin(angle)], dim=-1)    # [n, 3], fixed
    a = z
    for k in (1, 2, 3):
        f = b + f"hyena.filter.fc{k}."
        a = torch.sin(p[b + f"hyena.filter.omega{k}"] * F.linear(a, p[f + "weight"], p[f + "bias"]))
    hf = F.linear(a, p[b + "hyena.filter.fc4.weight"])                   # [n, d]
    delta = torch.linspace(math.log(0.01) / 1.5, math.log(0.01) / 0.3, d, dtype=f64)
    return hf * torch.exp(-tt[:, None] * delta.abs()[None, :])


def hyena_op(cfg, p, b, x):
    """Order-2 HyenaOp on x [B, n, d]."""
    B, n, d = x.shape
    u = F.linear(x, p[b + "hyena.in_proj.weight"], p[b + "hyena.in_proj.bias"])      # [B, n, 3d]
    # depthwise causal conv, kernel 3: pad 2 on both sides, keep the first n outputs
    w3 = p[b + "hyena.short_conv.weight"].unsqueeze(1)                              # [3d, 1, 3]
    u = F.conv1d(u.transpose(1, 2), w3, p[b + "hyena.short_conv.bias"], padding=2, groups=3 * d)[..., :n]
    x0, x1, v = u.transpose(1, 2).split(d, dim=-1)
    v = v * x1
    hf = hyena_filter(p, b, n, d)
    lag = torch.arange(n)[:, None] - torch.arange(n)[None, :]                      # t - s
    T = torch.where(lag >= 0, hf[lag.clamp(min=0)].permute(2, 0, 1), torch.zeros((), dtype=x.dtype))  # [d, n, n]
    v = torch.einsum("cts,bsc->btc", T, v) + p[b + "hyena.D"] * v
    return F.linear(v * x0, p[b + "hyena.out_proj.weight"], p[b + "hyena.out_proj.bias"])


def hyena_block(cfg, p, b, h):
    """Hyena's block: LayerNorm, HyenaOp, then LayerNorm and the GELU MLP."""
    d = cfg["d_model"]
    x = F.layer_norm(h, (d,), p[b + "ln1.weight"], p[b + "ln1.bias"], eps=1e-5)
    h = h + hyena_op(cfg, p, b, x)
    x = F.layer_norm(h, (d,), p[b + "ln2.weight"], p[b + "ln2.bias"], eps=1e-5)
    x = F.gelu(F.linear(x, p[b + "mlp.fc1.weight"], p[b + "mlp.fc1.bias"]))      # exact erf GELU
    return h + F.linear(x, p[b + "mlp.fc2.weight"], p[b + "mlp.fc2.bias"])


def mamba2_mixer(cfg, p, b, x):
    """Mamba2Mixer on x [B, n, d] as the plain recurrence over t."""
    Bsz, n, d = x.shape
    di, nh, N = 2 * d, cfg["heads"], cfg["state"]
    P = di // nh
    z, xBC, dtr = F.linear(x, p[b + "mamba.in_proj.weight"]).split([di, di + 2 * N, nh], dim=-1)
    w4 = p[b + "mamba.conv1d.weight"].unsqueeze(1)                                 # [di + 2N, 1, 4]
    xBC = F.conv1d(xBC.transpose(1, 2), w4, p[b + "mamba.conv1d.bias"], padding=3, groups=di + 2 * N)[..., :n]
    xs, Bt, Ct = F.silu(xBC.transpose(1, 2)).split([di, N, N], dim=-1)
    r = dtr + p[b + "mamba.dt_bias"]
    dt = torch.logaddexp(r, torch.zeros_like(r))                                  # softplus, no threshold
    A = -torch.exp(p[b + "mamba.A_log"])
    S = torch.zeros(Bsz, nh, P, N, dtype=x.dtype)
    ys = []
    for t in range(n):
        xh = xs[:, t].reshape(Bsz, nh, P)
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]
        S = decay * S + dt[:, t, :, None, None] * xh[..., None] * Bt[:, t, None, None, :]
        y = torch.einsum("bhpn,bn->bhp", S, Ct[:, t]) + p[b + "mamba.D"][None, :, None] * xh
        ys.append(y.reshape(Bsz, di))
    y = torch.stack(ys, dim=1)
    y = rms_norm(y * F.silu(z), p[b + "mamba.norm.weight"], eps=1e-5)
    return F.linear(y, p[b + "mamba.out_proj.weight"])


def mamba2_block(cfg, p, b, h):
    """Mamba 2's block: RMSNorm (eps 1e-5) and the mixer; no MLP."""
    return h + mamba2_mixer(cfg, p, b, rms_norm(h, p[b + "norm.weight"], eps=1e-5))


def tmm_block(cfg, p, b, h):
    """The TMM's block: the MLP, then Toeplitz mixing."""
    heads, expanded, d = cfg["heads"], cfg["expanded"], cfg["d_model"]
    groups = heads if heads else 1
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
    return h + x


def forward(cfg, p, tokens, targets):
    h = p["embed.weight"][tokens.long()]
    block = {"tmm": tmm_block, "hyena": hyena_block, "mamba2": mamba2_block}.get(cfg["arch"], baseline_block)
    for l in range(cfg["n_layers"]):
        h = block(cfg, p, f"blocks.{l}.", h)
    if cfg["arch"] == "mamba2":
        h = rms_norm(h, p["final_norm.weight"], eps=1e-5)
    elif cfg["arch"] not in ("tmm", "hyena"):
        h = rms_norm(h, p["final_norm.weight"])
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
    cfg["arch"] = meta.get("arch", "tmm")
    cfg["window"] = int(meta.get("window", "0"))
    cfg["state"] = int(meta.get("state", "0"))
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
