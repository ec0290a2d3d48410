#!/usr/bin/env python3
"""The report of a tools/gpu_check.sh run: reads OUT/logs (steps.tsv, machine.txt
and each step's output) and writes OUT/results.json and OUT/results.md.

    gpu_report.py OUT_DIR

results.json: {"machine", "device", "steps": [{name, group, status, rc, seconds,
timeout_s, command, result (the step's parsed output) or error (its last lines
of stderr)}], "summary"}. results.md: the same as tables, with tmm and PyTorch
side by side for each training shape. Exit status 1 when a step failed or timed
out, a step was skipped for want of time, or tmm picked a CPU device while a
discrete GPU was there; 0 otherwise.
"""
import json
import os
import re
import sys


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


FAST_PATHS = ("subgroup reductions", "tiled matmul", "cooperative-matrix matmul")


def parse_devices(text):
    """tmm devices: [{index, name, type, picked, fast_paths: {path: what tmm devices says}}]."""
    devs = []
    for line in text.splitlines():
        m = re.match(r"device (\d+): (.*?)(\s+<- tmm uses this one)?$", line)
        f = re.match(r"    (%s)\s+(.*)$" % "|".join(FAST_PATHS), line)
        if m:
            devs.append(dict(index=int(m.group(1)), name=m.group(2).strip(), type=None, picked=bool(m.group(3)),
                             fast_paths={}))
        elif devs and re.match(r"\s+type\s", line):
            devs[-1]["type"] = line.split(None, 1)[1].strip()
        elif devs and f:
            devs[-1]["fast_paths"][f.group(1)] = f.group(2).strip()
    return devs


def device_verdict(devs, nvidia_smi=""):
    picked = next((d for d in devs if d["picked"]), None)
    discrete = [d for d in devs if d["type"] == "discrete GPU"]
    if not devs:
        return picked, "fail", "no Vulkan device found"
    if nvidia_smi and "NVIDIA" in nvidia_smi.upper() and not discrete and "fail" not in nvidia_smi.lower():
        return picked, "fail", f"nvidia-smi sees a GPU ({nvidia_smi.strip(' ;')}) but Vulkan shows no discrete " \
                               f"GPU: the NVIDIA ICD was not found (logs/loader_debug.out; docs/gpu.md)"
    if picked is None:
        return picked, "fail", "tmm devices marked no device as the one it uses"
    if discrete and picked["type"] != "discrete GPU":
        return picked, "fail", f"tmm picks a {picked['type']} ({picked['name']}) while a discrete GPU is there " \
                               f"({discrete[0]['name']})"
    if not discrete:
        return picked, "ok", f"no discrete GPU here: tmm uses the {picked['type']} {picked['name']}"
    return picked, "ok", f"tmm uses the discrete GPU {picked['name']}"


def parse_json_out(text, lines=False):
    """A step's stdout as one JSON value, or (lines: torch_bench.py) as a list of JSON lines."""
    text = text.strip()
    if not text:
        return None
    if not lines:
        try:
            return json.loads(text)
        except ValueError:
            return None
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows or None


def parse_criterion(path):
    """Criterion's --json report: counts and the failing tests with their first message."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            rep = json.load(f)
    except (OSError, ValueError):
        return None
    failures = []
    for suite in rep.get("test_suites", []):
        for t in suite.get("tests", []):
            if t.get("status") not in ("PASSED", "SKIPPED"):
                msgs = t.get("messages") or []
                failures.append(dict(test=f"{suite.get('name')}/{t.get('name')}", status=t.get("status"),
                                     message=(msgs[0] if msgs else "")[:300]))
    return dict(passed=rep.get("passed", 0), failed=rep.get("failed", 0), errored=rep.get("errored", 0),
                skipped=rep.get("skipped", 0), failures=failures)


def tail_error(text, lines=3):
    keep = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(keep[-lines:])[:600]


def mismatch(m, t):
    """A note when PyTorch's model has another parameter count than tmm's (not the same model)."""
    tp = (t.get("model") or {}).get("params")
    return f" (PyTorch has {tp} parameters)" if tp and m.get("params") and tp != m.get("params") else ""


def fmt(x, digits=3):
    if x is None:
        return "—"
    if isinstance(x, float):
        if x >= 100:
            return f"{x:,.0f}"
        return f"{x:.{digits}g}"
    return str(x)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_report.py OUT_DIR")
    out = sys.argv[1]
    logs = os.path.join(out, "logs")
    machine = {}
    notes = []
    for line in read(os.path.join(logs, "machine.txt")).splitlines():
        k, _, v = line.partition(": ")
        if k == "note":
            notes.append(v)
        elif k:
            machine[k] = v
    machine["notes"] = notes

    steps = []
    for line in read(os.path.join(logs, "steps.tsv")).splitlines():
        f = line.split("\t")
        if len(f) < 7:
            continue
        st = dict(name=f[0], group=f[1], status=f[2], rc=int(f[3]) if f[3] else None, seconds=float(f[4] or 0),
                  timeout_s=int(f[5] or 0), command="\t".join(f[6:]))
        o, e = os.path.join(logs, f[0] + ".out"), os.path.join(logs, f[0] + ".err")
        if st["group"] in ("matmul", "mixer", "train", "generate", "torch"):
            st["result"] = parse_json_out(read(o), lines=st["group"] == "torch")
        elif st["group"] == "op_tests" and st["name"] != "op_list":
            st["result"] = parse_criterion(os.path.join(logs, f[0] + ".json"))
        elif st["group"] in ("check", "devices"):
            st["result"] = read(o).strip()[-2000:] or None
        if st["status"] not in ("ok", "skipped", "absent"):
            st["error"] = tail_error(read(e)) or tail_error(read(o))
        steps.append(st)

    devs = parse_devices(read(os.path.join(logs, "devices.out")))
    picked, verdict, why = device_verdict(devs, machine.get("nvidia_smi", ""))
    device = dict(devices=devs, picked=picked, verdict=verdict, note=why)
    loader = read(os.path.join(logs, "loader_debug.out"))
    if loader:
        device["loader_debug_tail"] = loader.strip().splitlines()[-40:]
    for st in steps:
        if st["name"] == "devices":
            st["result"] = devs
            if st["status"] == "ok" and verdict != "ok":
                st["status"], st["error"] = "fail", why

    counts = {}
    for st in steps:
        counts[st["status"]] = counts.get(st["status"], 0) + 1
    bad = [s["name"] for s in steps if s["status"] in ("fail", "timeout", "skipped")]
    summary = dict(counts=counts, problems=bad, ok=not bad and verdict == "ok",
                   seconds=float(machine.get("total_s", 0) or 0))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(tool="tools/gpu_check.sh", machine=machine, device=device, steps=steps, summary=summary),
                  f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(machine, device, steps, summary))
    return 0 if summary["ok"] else 1


def markdown(machine, device, steps, summary):
    by = {s["name"]: s for s in steps}
    md = []
    w = md.append
    picked = device["picked"] or {}
    w(f"# tmm GPU check ({machine.get('mode', '?')})\n")
    w(f"- device: **{picked.get('name', 'none')}** ({picked.get('type', '?')}): {device['note']}")
    for k, v in (picked.get("fast_paths") or {}).items():
        w(f"- fast path, {k}: {v}")
    for k in ("nvidia_smi", "os", "uname", "cpus", "tmm_version", "bundle", "layout", "validation_layer",
              "VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"):
        if machine.get(k):
            w(f"- {k.replace('_', ' ')}: {machine[k]}")
    for n in machine.get("notes", []):
        w(f"- note: {n}")
    c = summary["counts"]
    w(f"- steps: {', '.join(f'{v} {k}' for k, v in sorted(c.items()))} in {summary['seconds']:.0f} s"
      f"{'' if summary['ok'] else ': ' + ', '.join(summary['problems']) or ''}\n")

    w("## Steps\n")
    w("| step | status | s | note |")
    w("|---|---|---:|---|")
    for s in steps:
        note = s.get("error", "")
        r = s.get("result")
        if s["group"] == "op_tests" and isinstance(r, dict):
            note = f"{r['passed']} passed, {r['failed']} failed, {r['errored']} errored" + \
                   "".join(f"; {x['test']}: {x['message']}" for x in r["failures"][:3])
        if s["status"] in ("skipped", "absent"):
            note = note or ("the time budget was spent" if s["status"] == "skipped" else s["command"])
        w(f"| {s['name']} | {s['status']} | {s['seconds']:.1f} | {str(note).replace('|', '/')[:300]} |")
    w("")

    mm = (by.get("bench_matmul") or {}).get("result")
    if isinstance(mm, list) and mm:
        w("## Matmul (float32)\n")
        w("| variant | M×N×K | ms | GFLOP/s |")
        w("|---|---|---:|---:|")
        for r in mm:
            w(f"| {r.get('variant')} | {r.get('m')}×{r.get('n')}×{r.get('k')} | {fmt(r.get('ms'))} | "
              f"{fmt(r.get('gflops'))} |")
        w("")

    mix_rows = []
    for impl in ("auto", "fft", "attention"):
        r = (by.get(f"bench_mixer_{impl}") or {}).get("result")
        if isinstance(r, dict):
            for row in r.get("rows", []):
                mix_rows.append(dict(row, d=r.get("d"), batch=r.get("batch", 1)))
    if mix_rows:
        big = [r for r in mix_rows if r.get("n", 0) >= 4096] or mix_rows
        w(f"## Token mixing alone (d {mix_rows[0].get('d')}, batch {mix_rows[0].get('batch')}; "
          f"{'n ≥ 4096' if big is not mix_rows else 'every n'}; results.json has every n)\n")
        w("| impl | n | forward ms | forward+backward ms | tokens/s (fwd+bwd) |")
        w("|---|---:|---:|---:|---:|")
        for r in big:
            fb = r.get("fwd_bwd_ms")
            tps = r["n"] * r.get("batch", 1) / (fb / 1000) if fb else None
            w(f"| {r.get('impl')} | {r.get('n')} | {fmt(r.get('fwd_ms'))} | {fmt(fb)} | {fmt(tps)} |")
        w("")

    def key(m, batch):
        return (m.get("arch"), m.get("d_model"), m.get("n_ctx"), m.get("n_layers"), batch)

    torch_rows = {}
    torch_dev = None
    for s in steps:
        if s["group"] == "torch" and isinstance(s.get("result"), list):
            for r in s["result"]:
                if r.get("bench") == "torch_train":
                    torch_rows[key(r.get("model", {}), r.get("batch"))] = r
                    torch_dev = torch_dev or r.get("device")
    train = [s for s in steps if s["group"] == "train"]
    if train:
        tmm_dev = picked.get("name", "?")
        w(f"## Training steps: tmm on Vulkan ({tmm_dev}) and PyTorch ({torch_dev or 'not run'})\n")
        w("Forward, backward, clipping and AdamW on fixed random tokens, float32; tokens/s.\n")
        w("| step | model | shape (d, n, layers, heads, batch, vocab) | params | tmm tokens/s | tmm ms/step | "
          "PyTorch tokens/s | PyTorch ms/step | tmm / PyTorch |")
        w("|---|---|---|---:|---:|---:|---:|---:|---:|")
        seen = set()
        for s in train:
            r = s.get("result")
            if not isinstance(r, dict):
                w(f"| {s['name']} | — | — | — | {s['status']} | — | — | — | — |")
                continue
            m = r.get("model", {})
            k = key(m, r.get("batch"))
            seen.add(k)
            t = torch_rows.get(k, {})
            tt, pt = r.get("tokens_per_s"), t.get("tokens_per_s")
            w(f"| {s['name']} | {m.get('arch')} | {m.get('d_model')}, {m.get('n_ctx')}, {m.get('n_layers')}, "
              f"{m.get('heads')}, {r.get('batch')}, {m.get('vocab')} | {fmt(m.get('params'))} | {fmt(tt)} | "
              f"{fmt(r.get('ms_per_step'))} | {fmt(pt) if pt else t.get('error', '—')[:80]} | "
              f"{fmt(t.get('ms_per_step'))} | {fmt(tt / pt) if tt and pt else '—'}{mismatch(m, t)} |")
        for k, t in torch_rows.items():
            if k not in seen:
                m = t.get("model", {})
                w(f"| (PyTorch only) | {m.get('arch')} | {m.get('d_model')}, {m.get('n_ctx')}, {m.get('n_layers')}, "
                  f"{m.get('heads', '—')}, {t.get('batch')}, {m.get('vocab')} | {fmt(m.get('params'))} | — | — | "
                  f"{fmt(t.get('tokens_per_s')) if t.get('tokens_per_s') else t.get('error', '—')[:80]} | "
                  f"{fmt(t.get('ms_per_step'))} | — |")
        w("")

    gens = [(s, s.get("result")) for s in steps if s["group"] == "generate"]
    if any(isinstance(r, dict) for _, r in gens):
        w("## Generation (random weights)\n")
        w("| model | time to first token (prompt: ms) | position | cached ms/token | naive ms/token | speedup |")
        w("|---|---|---:|---:|---:|---:|")
        for s, r in gens:
            if not isinstance(r, dict):
                w(f"| {s['name']}: {s['status']} | — | — | — | — | — |")
                continue
            ttft = ", ".join(f"{x.get('prompt')}: {fmt(x.get('ms'))}" for x in r.get("first_token", []))
            for i, x in enumerate(r.get("decode", [])):
                w(f"| {r.get('model') if i == 0 else ''} | {ttft if i == 0 else ''} | {x.get('position')} | "
                  f"{fmt(x.get('cached_ms'))} | {fmt(x.get('naive_ms'))} | {fmt(x.get('speedup'))} |")
        w("")
    w("Every step's output: logs.tar.gz (logs/NAME.out, NAME.err; the op tests' Criterion reports "
      "logs/op_SUITE.json).")
    return "\n".join(md) + "\n"


if __name__ == "__main__":
    sys.exit(main())
