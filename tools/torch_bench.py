#!/usr/bin/env python3
"""Training speed of tmm's models in PyTorch, on the shapes `tmm bench train` uses.

    torch_bench.py [--archs tmm,transformer,swa,linear] [--preset paper-512]
                   [--d-model D --n-ctx N --layers L --heads H --expansion E --batch B]
                   [--vocab V]
                   [--window W] [--steps S] [--warmup W] [--device auto|cuda|cpu]
                   [--dtype float32|bfloat16]
    torch_bench.py --check

Prints one JSON line per architecture: tokens/s and ms per training step
(forward, backward, gradient clipping at 1.0 and AdamW, as `tmm bench train`
times them), on fixed random tokens, after --warmup untimed steps. A case
that fails (out of memory, say) prints a line with "error" and the others
still run; the exit status is 1 when any failed.

The models are tools/torch_ref.py's, which the parity test checks against
tmm (docs/model.md, docs/baselines.md): the same parameters, names, blocks
and loss. Only the token mixing is swapped for fast forms (tmm's own
choices in PyTorch terms): the Toeplitz layer by FFT (torch.fft, zero-padded
to 2n), softmax attention by scaled_dot_product_attention (causal; the
sliding window as a boolean mask), linear attention in chunks of 64 with the
state carried between chunks, and RoPE from a cached float32 table. --check
compares each swapped op with torch_ref's explicit form in float64 on small
shapes and exits 1 on a mismatch. Hyena and Mamba 2 are not here.

Defaults as `tmm bench train`'s: d 64, n 128, 2 layers, MLP expansion 2, batch
16, vocab 16. The paper-512 preset: d 512, n 512, 16 layers, 4 heads, expansion 4,
batch 32 (assets/presets/paper-512.json); the shape flags override it.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402  the reference model, reused with its mixing ops swapped

ARCHS = ("tmm", "transformer", "swa", "linear")
PRESETS = {"paper-512": dict(d_model=512, n_ctx=512, layers=16, heads=4, expansion=4, batch=32)}
DEFAULTS = dict(d_model=64, n_ctx=128, layers=2, heads=0, expansion=2, batch=16)   # tmm bench train's


# ---- the fast forms of the mixing ops ------------------------------------------

def toeplitz_fft(u, w, beta, groups):
    """torch_ref.toeplitz by FFT: each group's filter w[g, a] (K taps) convolved
    causally along n with its channels (tap a reading channel c-(K-1)+a of the
    group, zeros below the group's first), plus beta[g]. u: [B, n, d]."""
    B, n, d = u.shape
    G, K, _ = w.shape
    per = d // G
    N = 2 * n
    ug = u.reshape(B, n, G, per)
    if K > 1:
        ug = F.pad(ug, (K - 1, 0))                                           # zeros below each group
    spec = torch.fft.rfft(ug.permute(0, 2, 3, 1), n=N)                       # [B, G, per+K-1, N/2+1]
    wf = torch.fft.rfft(w, n=N)                                              # [G, K, N/2+1]
    acc = None
    for a in range(K):
        term = spec[:, :, a:a + per] * wf[None, :, a, None, :]
        acc = term if acc is None else acc + term
    y = torch.fft.irfft(acc, n=N)[..., :n]                                    # [B, G, per, n]
    y = y + beta[None, :, None, :]
    return y.permute(0, 3, 1, 2).reshape(B, n, d)


_rope_cache = {}


def rope_fast(x, heads):
    """torch_ref.rope with its cos/sin table computed once per shape, in x's dtype."""
    B, n, d = x.shape
    dh = d // heads
    key = (n, dh, x.device, x.dtype)
    if key not in _rope_cache:
        t = torch.arange(n, dtype=torch.float64)[:, None]
        i = torch.arange(dh // 2, dtype=torch.float64)[None, :]
        angle = t * 10000.0 ** (-2.0 * i / dh)
        _rope_cache[key] = (torch.cos(angle)[None, :, None, :].to(x.device, x.dtype),
                            torch.sin(angle)[None, :, None, :].to(x.device, x.dtype))
    cos, sin = _rope_cache[key]
    x = x.reshape(B, n, heads, dh)
    a, b = x[..., : dh // 2], x[..., dh // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).reshape(B, n, d)


_mask_cache = {}


HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")   # torch >= 2.0 (Debian 12 has 1.13)


def sdpa_attention(q, k, v, heads, window):
    """torch_ref.softmax_attention through scaled_dot_product_attention (before
    torch 2.0: masked softmax(q k^T / sqrt(dh)) v, written out)."""
    B, n, _ = q.shape
    q, k, v = (torch_ref.split_heads(z, heads) for z in (q, k, v))
    mask = None
    if (window and window < n) or not HAVE_SDPA:
        key = (n, window if window and window < n else 0, q.device)
        if key not in _mask_cache:
            t = torch.arange(n, device=q.device)[:, None]
            s = torch.arange(n, device=q.device)[None, :]
            _mask_cache[key] = (s <= t) & (s > t - key[1]) if key[1] else s <= t
        mask = _mask_cache[key]
    if not HAVE_SDPA:
        scores = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
        o = torch.softmax(scores, dim=-1) @ v
    elif mask is not None:
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).reshape(B, n, -1)


def linear_attention_chunked(q, k, v, heads, chunk=64):
    """torch_ref.linear_attention in chunks: inside a chunk the masked quadratic
    form, across chunks the state S = sum phi(k) v^T and z = sum phi(k) carried
    (docs/baselines.md section 3)."""
    B, n, _ = q.shape
    q, k, v = (torch_ref.split_heads(z, heads) for z in (q, k, v))            # [B, H, n, dh]
    q, k = F.elu(q) + 1, F.elu(k) + 1
    pad = -n % chunk
    if pad:
        q, k, v = (F.pad(z, (0, 0, 0, pad)) for z in (q, k, v))                # zero keys add nothing
    Hh, dh = q.shape[1], q.shape[-1]
    c = q.shape[2] // chunk
    q, k, v = (z.reshape(B, Hh, c, chunk, dh) for z in (q, k, v))
    kv = k.transpose(-1, -2) @ v                                              # [B, H, c, dh, dh]
    S = torch.cumsum(kv, dim=2) - kv                                          # the chunks before
    z = torch.cumsum(k.sum(3), dim=2) - k.sum(3)                              # [B, H, c, dh]
    mask = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool, device=q.device))
    a = (q @ k.transpose(-1, -2)).masked_fill(~mask, 0)                      # [B, H, c, chunk, chunk]
    num = q @ S + a @ v
    den = (q * z[:, :, :, None, :]).sum(-1, keepdim=True) + a.sum(-1, keepdim=True)
    o = (num / (den + 1e-6)).reshape(B, Hh, c * chunk, dh)[:, :, :n]
    return o.transpose(1, 2).reshape(B, n, -1)


def use_fast_ops():
    torch_ref.toeplitz = toeplitz_fft
    torch_ref.rope = rope_fast
    torch_ref.softmax_attention = sdpa_attention
    torch_ref.linear_attention = linear_attention_chunked


# ---- parameters under tmm's names -------------------------------------------------

def make_params(cfg, device, dtype, seed=1):
    """Every parameter of cfg's model, named and shaped as tmm (and torch_ref) name
    them, initialized as docs/model.md and docs/baselines.md say."""
    g = torch.Generator().manual_seed(seed)
    d, n, V, e = cfg["d_model"], cfg["n_ctx"], cfg["vocab"], cfg["expansion"] * cfg["d_model"]
    p = {}

    def normal(shape, std):
        return torch.randn(shape, generator=g, dtype=torch.float32) * std

    def kaiming(out_f, in_f):
        return normal((out_f, in_f), math.sqrt(2.0 / in_f))

    if cfg["arch"] == "tmm":
        G = cfg["heads"] if cfg["heads"] else 1
        p["embed.weight"] = normal((V, d), 1.0)
        for l in range(cfg["n_layers"]):
            b = f"blocks.{l}."
            for ln in ("ln1", "ln2"):
                p[b + ln + ".weight"], p[b + ln + ".bias"] = torch.ones(d), torch.zeros(d)
            p[b + "mlp.fc1.weight"], p[b + "mlp.fc1.bias"] = kaiming(e, d), torch.zeros(e)
            p[b + "mlp.fc2.weight"], p[b + "mlp.fc2.bias"] = kaiming(d, e), torch.zeros(d)
            if cfg["heads"]:
                for z in ("in", "out"):
                    p[b + f"mix.{z}.weight"], p[b + f"mix.{z}.bias"] = kaiming(d, d), torch.zeros(d)
            p[b + "mix.w"] = normal((G, cfg["kernel"], n), math.sqrt(2.0 / n))
            p[b + "mix.beta"] = torch.zeros(G, n)
            if cfg["expanded"]:
                p[b + "mix.w2"] = normal((G, cfg["kernel"], n), math.sqrt(2.0 / n))
                p[b + "mix.beta2"] = torch.zeros(G, n)
        p["lm_head.weight"] = kaiming(V, d)
    else:
        p["embed.weight"] = normal((V, d), 0.02)
        for l in range(cfg["n_layers"]):
            b = f"blocks.{l}."
            p[b + "attn_norm.weight"], p[b + "mlp_norm.weight"] = torch.ones(d), torch.ones(d)
            for z in "qkvo":
                p[b + f"attn.{z}.weight"] = normal((d, d), 0.02)
            p[b + "mlp.gate_up.weight"] = normal((2 * e, d), 0.02)
            p[b + "mlp.down.weight"] = normal((d, e), 0.02)
        p["final_norm.weight"] = torch.ones(d)
        p["lm_head.weight"] = normal((V, d), 0.02)
    return {k: t.to(device=device, dtype=dtype).requires_grad_(True) for k, t in p.items()}


# ---- one case ------------------------------------------------------------------------

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_case(arch, a, device, dtype):
    heads = a.heads
    if arch != "tmm" and not heads:
        heads = max(1, a.d_model // 64)   # tmm's rule for the attention family: heads of 64 channels
    cfg = dict(arch=arch, vocab=a.vocab, d_model=a.d_model, n_ctx=a.n_ctx, n_layers=a.layers,
               heads=heads, expansion=a.expansion, kernel=1, expanded=False,
               window=a.window if arch == "swa" else 0, state=0)
    if cfg["heads"] and a.d_model % cfg["heads"]:
        raise ValueError(f"--d-model {a.d_model} does not split into {cfg['heads']} heads")
    params = make_params(cfg, device, dtype)
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, a.vocab, (a.batch, a.n_ctx), generator=g, dtype=torch.int32).to(device)
    targets = torch.randint(0, a.vocab, (a.batch, a.n_ctx), generator=g, dtype=torch.int32).to(device)
    opt = torch.optim.AdamW(params.values(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    plist = list(params.values())

    def train_step():
        opt.zero_grad(set_to_none=True)
        _, loss = torch_ref.forward(cfg, params, tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(plist, 1.0)
        opt.step()
        return loss

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(a.warmup):
        train_step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = train_step()
    sync(device)
    secs = time.perf_counter() - t0
    row = dict(bench="torch_train", arch=arch, device=device_name(device), dtype=str(dtype).replace("torch.", ""),
               model=dict(arch=arch, vocab=a.vocab, d_model=a.d_model, n_ctx=a.n_ctx, n_layers=a.layers,
                          heads=cfg["heads"], expansion=a.expansion, window=cfg["window"] or None,
                          params=sum(t.numel() for t in plist)),
               batch=a.batch, steps=a.steps, warmup=a.warmup,
               tokens_per_s=a.batch * a.n_ctx * a.steps / secs, ms_per_step=1000.0 * secs / a.steps,
               loss=float(loss.detach()), torch=torch.__version__,
               mixing={"tmm": "torch.fft (2n)", "transformer": "sdpa causal" if HAVE_SDPA else "explicit softmax",
                       "swa": "sdpa banded mask" if HAVE_SDPA else "explicit softmax, banded mask",
                       "linear": "chunked, 64"}[arch])
    if device.type == "cuda":
        row["peak_bytes"] = torch.cuda.max_memory_allocated(device)
        row["tf32"] = torch.backends.cuda.matmul.allow_tf32
    else:
        row["threads"] = torch.get_num_threads()
    return row


def device_name(device):
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return "cpu"


# ---- --check: the fast ops against torch_ref's explicit ones --------------------------

def check():
    f64 = torch.float64
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g, dtype=f64)  # noqa: E731
    ref_toeplitz, ref_attn, ref_lin, ref_rope = (torch_ref.toeplitz, torch_ref.softmax_attention,
                                                 torch_ref.linear_attention, torch_ref.rope)
    cases = []
    for (B, n, d, G, K) in ((2, 13, 8, 1, 1), (2, 17, 12, 4, 1), (1, 9, 8, 2, 3)):
        u, w, beta = r(B, n, d), r(G, K, n), r(G, n)
        cases.append((f"toeplitz B{B} n{n} d{d} G{G} K{K}", toeplitz_fft(u, w, beta, G), ref_toeplitz(u, w, beta, G)))
    for (n, H, W) in ((13, 2, 0), (13, 2, 4), (70, 4, 0)):
        q, k, v = r(2, n, 16), r(2, n, 16), r(2, n, 16)
        cases.append((f"attention n{n} H{H} window {W}", sdpa_attention(q, k, v, H, W), ref_attn(q, k, v, H, W)))
        if not W:
            cases.append((f"linear attention n{n} H{H}", linear_attention_chunked(q, k, v, H, chunk=8),
                          ref_lin(q, k, v, H)))
    x = r(2, 11, 16)
    cases.append(("rope n11 H2", rope_fast(x, 2), ref_rope(x, 2)))
    bad = 0
    for name, got, want in cases:
        err = float((got - want).abs().max())
        ok = err <= 1e-9 * max(1.0, float(want.abs().max()))
        bad += not ok
        print(json.dumps(dict(check=name, max_abs_err=err, ok=ok)))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    ap.add_argument("--archs", default="tmm", help="comma-separated, of " + ", ".join(ARCHS) + " (default tmm)")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="start from a preset's shape")
    for flag in ("d-model", "n-ctx", "layers", "heads", "expansion", "batch"):
        ap.add_argument("--" + flag, type=int, help=f"default: the preset's, else {DEFAULTS[flag.replace('-', '_')]}")
    ap.add_argument("--vocab", type=int, default=16, help="default 16, as tmm bench train")
    ap.add_argument("--window", type=int, default=128, help="swa's window (default 128)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    ap.add_argument("--device", default="auto", help="auto (cuda when available), cuda, cuda:N or cpu")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="default float32, as tmm")
    ap.add_argument("--check", action="store_true", help="compare the fast ops with torch_ref's and exit")
    a = ap.parse_args()
    if a.check:
        return check()
    shape = dict(DEFAULTS, **(PRESETS[a.preset] if a.preset else {}))
    for k in shape:
        if getattr(a, k) is None:
            setattr(a, k, shape[k])
    for k in ("d_model", "n_ctx", "layers", "expansion", "batch", "vocab", "steps", "window"):
        if getattr(a, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be at least 1")
    if a.heads < 0 or a.warmup < 0:
        ap.error("--heads and --warmup must not be negative")
    archs = [s for s in a.archs.split(",") if s]
    for s in archs:
        if s not in ARCHS:
            ap.error(f"unknown architecture '{s}' (torch_bench has {', '.join(ARCHS)})")
    if a.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(a.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            ap.error("--device cuda, but torch sees no CUDA device")
    dtype = getattr(torch, a.dtype)
    use_fast_ops()
    status = 0
    for arch in archs:
        try:
            row = bench_case(arch, a, device, dtype)
        except Exception as e:  # one failed case (out of memory, say) must not hide the others
            status = 1
            row = dict(bench="torch_train", arch=arch, device=device_name(device), error=f"{type(e).__name__}: {e}"[:500],
                       model=dict(arch=arch, vocab=a.vocab, d_model=a.d_model, n_ctx=a.n_ctx, n_layers=a.layers),
                       batch=a.batch)
        print(json.dumps(row), flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return status


if __name__ == "__main__":
    sys.exit(main())
