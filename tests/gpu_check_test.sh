#!/usr/bin/env bash
# tools/gpu_check.sh --quick on this build and the default device (lavapipe here), so
# that the GPU check cannot rot between GPU runs: every step passes, results.json and
# results.md hold what the steps printed (tmm and PyTorch side by side when a Python
# with torch is given), a step that cannot run is recorded rather than fatal, and bad
# usage fails with one line.
#   tests/gpu_check_test.sh BUILD_DIR [TORCH_PYTHON]
set -u
build="$(cd "$1" && pwd)" py="${2:-}"
src="$(cd "$(dirname "$0")/.." && pwd)"
. "$(dirname "$0")/lib.sh"
gc="$src/tools/gpu_check.sh"
torch=(--no-torch)
[ -z "$py" ] || torch=(--python "$py")

check "gpu_check.sh --quick" "$gc" --quick --tmm-dir "$build" "${torch[@]}" "$dir/res"
check "results written: those three files alone" bash -c 'for f in results.json results.md logs.tar.gz; do
  [ -s "$0/res/$f" ] || { echo "missing: $f"; exit 1; }; done; [ "$(ls -A "$0/res" | wc -l)" -eq 3 ] || ls -A "$0/res"' "$dir"
# every step ok, the device verdict ok, each kind of step parsed
check "results.json" python3 - "$dir/res/results.json" "$py" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
steps = {s["name"]: s for s in r["steps"]}
bad = [(s["name"], s["status"], s.get("error")) for s in r["steps"] if s["status"] != "ok"]
assert not bad, bad
assert r["summary"]["ok"] and r["device"]["verdict"] == "ok", r["summary"]
assert r["device"]["picked"]["name"], r["device"]
want = ["devices", "check", "check_validated", "op_list", "op_ops", "op_pack16", "bench_matmul",
        "bench_mixer_auto", "bench_mixer_fft", "bench_mixer_attention", "bench_train_paper512",
        "bench_generate_tmm", "bench_generate_transformer"]
want += ["bench_train_" + a for a in ("tmm", "transformer", "swa", "linear", "hyena", "mamba2")]
if sys.argv[2]:
    want += ["torch_check", "torch_train", "torch_train_paper512"]
missing = [w for w in want if w not in steps]
assert not missing, missing
assert steps["op_ops"]["result"]["passed"] == 4 and not steps["op_ops"]["result"]["failures"], steps["op_ops"]
assert {x["variant"] for x in steps["bench_matmul"]["result"]} >= {"register", "tiled"}
assert {x["impl"] for x in steps["bench_mixer_fft"]["result"]["rows"]} == {"fft"}
for a in ("tmm", "transformer", "swa", "linear", "hyena", "mamba2"):
    t = steps["bench_train_" + a]["result"]
    assert t["model"]["arch"] == a and t["tokens_per_s"] > 0, t
assert [x["position"] for x in steps["bench_generate_tmm"]["result"]["decode"]] == [1, 10, 40]
if sys.argv[2]:
    rows = steps["torch_train"]["result"]
    assert [x["arch"] for x in rows] == ["tmm", "transformer", "swa", "linear"], rows
    for x in rows:   # the same models: tmm's parameter counts
        t = steps["bench_train_" + x["arch"]]["result"]["model"]
        assert x["model"]["params"] == t["params"], (x["model"], t)
    assert all(c.get("ok") for c in steps["torch_check"]["result"]), steps["torch_check"]["result"]
print("ok")
EOF
check "results.md tables" bash -c 'for h in "## Steps" "## Matmul" "## Token mixing" "## Training steps" "## Generation"; do
  grep -q "^$h" "$0/res/results.md" || { echo "no $h"; exit 1; }; done
  [ -z "$1" ] || grep -q "^| bench_train_tmm | tmm | .* | [0-9.,]* |$" "$0/res/results.md" ||
    { grep "bench_train_tmm" "$0/res/results.md"; exit 1; }' "$dir" "$py"

# A step that cannot run is recorded, and the run still reports: an op-test binary that is not
# there, and a budget that runs out at once.
mkdir -p "$dir/fake/tests"
ln -s "$build/tmm" "$dir/fake/tmm"
expect_fail "missing op tests and a spent budget: recorded, exit 1" 1 "results.json" \
  "$gc" --quick --no-torch --tmm-dir "$dir/fake" --budget 1 "$dir/res2"
check "the failures are in results.json" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
st = {s["name"]: s["status"] for s in r["steps"]}
assert st["op_tests"] == "fail" and st["bench_generate_tmm"] == "skipped", st
assert not r["summary"]["ok"]' "$dir/res2/results.json"

expect_fail "no OUT_DIR" 2 "usage: tools/gpu_check.sh" "$gc" --quick
expect_fail "bad budget" 2 "--budget must be a whole number" "$gc" --budget soon "$dir/x"
expect_fail "unknown option" 2 "unknown option '--fast'" "$gc" --fast "$dir/x"
expect_fail "no tmm there" 2 "no tmm in" "$gc" --tmm-dir "$dir/fake/tests" "$dir/x"
finish
