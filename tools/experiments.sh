#!/usr/bin/env bash
# tmm experiment end to end (CI: .ci/run): the small presets of copy,
# efficiency, recall, index, retention and capacity on the device, each with a
# subset of the architectures so the whole takes a few minutes on lavapipe.
# Checks the outputs' structure (files, JSONL, summary fields, well-formed SVG
# with a title and axis labels) and sanity bounds (accuracies in [0, 1],
# finite losses, text loss decreasing), not the claims; and that an experiment
# stopped by SIGTERM continues when rerun, and that a finished one is reused;
# and a tiny learning-rate sweep (two rates, the TMM) stopped and continued.
#   tools/experiments.sh [BUILD_DIR]     (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
tmm="${1:-build}/tmm"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Two lanes side by side (a small run keeps about 1.4 of 2 cores busy): copy,
# recall and retention in one; efficiency, then index on its checkpoints, and
# capacity in the other. Each lane's lines are printed when it ends.
lane_a() {
  echo "experiments: copy (small; tmm, transformer)"
  "$tmm" experiment copy --archs tmm,transformer --out "$out" --quiet
  "$tmm" experiment copy --archs tmm,transformer --out "$out" --quiet | tee "$out/again.log"
  grep -q "4 runs (4 reused)" "$out/again.log" || { echo "FAIL: copy did not reuse its runs"; return 1; }

  echo "experiments: recall (small; tmm, transformer)"
  "$tmm" experiment recall --archs tmm,transformer --out "$out" --quiet

  reused_twice retention
}
lane_b() {
  echo "experiments: efficiency (small; tmm, hyena, mamba2), stopped by SIGTERM after 20 s, then continued"
  local rc=0
  timeout --preserve-status -s TERM 20 "$tmm" experiment efficiency --archs tmm,hyena,mamba2 --out "$out" --quiet || rc=$?
  [ "$rc" -eq 143 ] || [ "$rc" -eq 0 ] || { echo "FAIL: efficiency exited $rc under SIGTERM"; return 1; }
  "$tmm" experiment efficiency --archs tmm,hyena,mamba2 --out "$out" --quiet

  echo "experiments: index (small: E2's TMM, the Fredholm index of every checkpoint)"
  "$tmm" experiment index --out "$out" --quiet
  cp -r "$out/index" "$out/index-first"   # checked below as it was before capacity's autoencoders

  reused_twice capacity

  # the learning-rate sweep (lane b ends well before lane a: this costs no wall time)
  echo "experiments: efficiency --lr-grid 2.5e-4,5e-4 (small; tmm), stopped by SIGTERM after 8 s, then continued"
  rc=0
  timeout --preserve-status -s TERM 8 "$tmm" experiment efficiency --archs tmm --lr-grid 2.5e-4,5e-4 \
    --out "$out/sweep" --quiet || rc=$?
  [ "$rc" -eq 143 ] || [ "$rc" -eq 0 ] || { echo "FAIL: the sweep exited $rc under SIGTERM"; return 1; }
  "$tmm" experiment efficiency --archs tmm --lr-grid 2.5e-4,5e-4 --out "$out/sweep" --quiet
  "$tmm" experiment efficiency --archs tmm --lr-grid 2.5e-4,5e-4 --out "$out/sweep" --quiet | tee "$out/sweep.log"
  grep -q "3 runs (3 reused)" "$out/sweep.log" || { echo "FAIL: the sweep did not reuse its runs"; return 1; }
}
# reused_twice EXP: the small preset for the TMM, run twice (the second reuses everything)
reused_twice() {
  echo "experiments: $1 (small; tmm), run twice (the second reuses everything)"
  "$tmm" experiment "$1" --archs tmm --out "$out" --quiet
  "$tmm" experiment "$1" --archs tmm --out "$out" --quiet | tee "$out/again-$1.log"
  grep -Eq "([0-9]+) runs \(\1 reused\)" "$out/again-$1.log" || { echo "FAIL: $1 did not reuse its runs"; return 1; }
}
lane_a > "$out/lane-a.log" 2>&1 & a=$!
lane_b > "$out/lane-b.log" 2>&1 & b=$!
rc_a=0 rc_b=0
wait "$a" || rc_a=$?
wait "$b" || rc_b=$?
cat "$out/lane-a.log" "$out/lane-b.log"
[ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] || { echo "FAIL: an experiment lane failed (lines above)"; exit 1; }

python3 - "$out" <<'PY'
import json, math, os, sys, xml.etree.ElementTree as ET
root = sys.argv[1]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
for exp in ("copy", "efficiency", "recall", "index"):
    d = os.path.join(root, "index-first" if exp == "index" else exp)
    s = json.load(open(os.path.join(d, "summary.json")))
    for k in ("experiment", "claim", "preset", "seed", "device", "runs", "rule", "verdict"):
        if k not in s: fail(f"{exp}: summary.json has no {k}")
    if s["verdict"] not in ("held", "not held", "partly held", "not tested"): fail(f"{exp}: verdict {s['verdict']}")
    if not s["runs"]: fail(f"{exp}: no runs")
    for r in s["runs"]:
        if r["params"] <= 0 or r["steps"] <= 0 or r["seconds"] <= 0: fail(f"{exp} {r['label']}: {r}")
        if r["flops_per_token"] <= 0: fail(f"{exp} {r['label']}: FLOPs")
        pts = [json.loads(l) for l in open(os.path.join(d, r["dir"], "curve.jsonl"))]
        ev = [p for p in pts if "val_loss" in p]
        if not ev: fail(f"{exp} {r['label']}: no evaluation in curve.jsonl")
        steps = [p["step"] for p in pts]
        if steps != sorted(set(steps)): fail(f"{exp} {r['label']}: steps not increasing")
        for p in pts:
            if not all(math.isfinite(p[k]) for k in ("loss", "seconds")): fail(f"{exp}: {p}")
            if p["tokens"] <= 0 or p["seconds"] < 0: fail(f"{exp}: {p}")
        for p in ev:
            if not (0 <= p["accuracy"] <= 1) or not math.isfinite(p["val_loss"]): fail(f"{exp}: {p}")
        if exp == "efficiency" and not ev[-1]["val_loss"] < ev[0]["val_loss"]: fail(f"{r['label']}: loss did not fall")
        if exp == "efficiency" and not (r["tokens_per_s"] > 0 and r["memory_bytes"] > 0): fail(f"{r['label']}: {r}")
        if exp == "copy" and r["arch"] == "tmm" and not ev[-1]["accuracy"] > ev[0]["accuracy"]: fail("tmm did not learn")
    if exp == "recall":
        for k in ("keys", "values", "chance", "margin", "settings"):
            if k not in s: fail(f"recall: summary.json has no {k}")
        if len(s["settings"]) != 3: fail(f"recall: settings {s['settings']}")
        for st in s["settings"]:
            if set(st["accuracy"]) != {"tmm", "transformer"}: fail(f"recall: {st}")
            if not all(0 <= a <= 1 for a in st["accuracy"].values()): fail(f"recall: {st}")
            if st["verdict"] not in ("held", "not held"): fail(f"recall: {st}")
        few = min(s["settings"], key=lambda st: st["pairs"])
        if not few["accuracy"]["tmm"] > 2 * s["chance"]: fail(f"recall: tmm did not learn {few}")
        if not os.path.exists(os.path.join(d, "accuracy-pairs.svg")): fail("recall: no accuracy-pairs.svg")
    rep = open(os.path.join(d, "report.md")).read()
    for w in ("**Claim**", "**Setup**", "## Measured", "## Did the claim hold at this scale?"):
        if w not in rep: fail(f"{exp}: report.md lacks {w}")
    svgs = [f for f in os.listdir(d) if f.endswith(".svg")]
    if len(svgs) < 3: fail(f"{exp}: {svgs}")
    ns = "{http://www.w3.org/2000/svg}"
    for f in svgs:
        t = ET.parse(os.path.join(d, f)).getroot()
        if t.find(ns + "title") is None or not t.find(ns + "title").text: fail(f"{f}: no title")
        cls = {e.get("class"): (e.text or "") for e in t.iter(ns + "text") if e.get("class")}
        if not cls.get("x-label") or not cls.get("y-label") or "legend" not in cls: fail(f"{f}: axis labels or legend")
        if f"{exp}" in rep and f not in rep: fail(f"report.md does not link {f}")
s = json.load(open(os.path.join(root, "index-first", "summary.json")))
rows = [json.loads(l) for l in open(os.path.join(root, "index-first", "index.jsonl"))]
if [p["step"] for p in s["steps"]] != [0, 25, 50, 75, 100, 125, 150, 175, 200]: fail(f"index steps {s['steps']}")
for p in s["steps"]:
    bins = p["index_minus1"] + p["index_0"] + p["index_below_minus1"] + p["index_above_0"] + p["undefined"]
    if p["vectors"] != 8 or bins != 8: fail(f"index: {p}")
    if not p["min_abs_smallest"] >= 0: fail(f"index: {p}")
    if len([r for r in rows if r["step"] == p["step"]]) != p["vectors"]: fail(f"index.jsonl at step {p['step']}")
s = json.load(open(os.path.join(root, "sweep", "efficiency", "summary.json")))
sw = s["lr_sweep"]
if sw["grid"] != [2.5e-4, 5e-4] or [a["arch"] for a in sw["archs"]] != ["tmm"]: fail(f"lr_sweep: {sw}")
a = sw["archs"][0]
loss = a["held_out_loss"]
if len(loss) != 2 or not all(l is not None and math.isfinite(l) for l in loss): fail(f"lr_sweep losses: {a}")
if a["chosen_lr"] != sw["grid"][loss.index(min(loss))] or a["steps"] != 100: fail(f"lr_sweep choice: {a}")
if s["runs"][0]["lr"] != a["chosen_lr"]: fail(f"the comparison's rate {s['runs'][0]['lr']}, chosen {a['chosen_lr']}")
rep = open(os.path.join(root, "sweep", "efficiency", "report.md")).read()
if "## Learning-rate sweep" not in rep or "| tmm | 0.0005 |" not in rep: fail("report.md lacks the sweep's table")
print("experiments: outputs checked")
PY

python3 - "$out" <<'PY'
import json, math, os, sys, xml.etree.ElementTree as ET
root = sys.argv[1]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
for exp, kinds in (("retention", {"trained", "random"}), ("capacity", {"joint"})):
    d = os.path.join(root, exp)
    s = json.load(open(os.path.join(d, "summary.json")))
    for k in ("experiment", "claim", "preset", "seed", "device", "runs", "rule", "verdict", "autoencoders"):
        if k not in s: fail(f"{exp}: summary.json has no {k}")
    if s["verdict"] not in ("held", "not held", "partly held", "not tested"): fail(f"{exp}: verdict {s['verdict']}")
    ae = s["autoencoders"]
    if not ae or {a["encoder"] for a in ae} != kinds: fail(f"{exp}: autoencoders {ae}")
    for a in ae:
        if not (0 <= a["accuracy"] <= 1 and math.isfinite(a["loss"]) and a["steps"] > 0): fail(f"{exp}: {a}")
        if a["encoder_params"] <= 0 or a["decoder_params"] <= 0: fail(f"{exp}: {a}")
    if exp == "capacity" and len(ae) != 3: fail(f"capacity: {len(ae)} settings, want 3 (n 16, 32; d 32)")
    rep = open(os.path.join(d, "report.md")).read()
    for w in ("**Claim**", "**Setup**", "## Measured", "## Did the claim hold at this scale?"):
        if w not in rep: fail(f"{exp}: report.md lacks {w}")
    ns = "{http://www.w3.org/2000/svg}"
    for f in [f for f in os.listdir(d) if f.endswith(".svg")]:
        t = ET.parse(os.path.join(d, f)).getroot()
        if t.find(ns + "title") is None or not t.find(ns + "title").text: fail(f"{f}: no title")
        if f not in rep: fail(f"report.md does not link {f}")
print("experiments: retention and capacity outputs checked")
PY

echo "experiments: index again, now beside capacity's TMM autoencoders"
"$tmm" experiment index --out "$out" --quiet
python3 - "$out" <<'PY'
import json, os, sys
s = json.load(open(os.path.join(sys.argv[1], "index", "summary.json")))
ae = s["autoencoders"]
if len(ae) != 6 or sorted(a["source"].split(".")[-2] for a in ae) != ["decoder"] * 3 + ["encoder"] * 3:
    print("FAIL: index autoencoders", [a["source"] for a in ae]); sys.exit(1)
if "autoencoder models'" not in s["verdict_detail"]: print("FAIL: no comparison:", s["verdict_detail"]); sys.exit(1)
print("experiments: index compared with the autoencoders")
PY
