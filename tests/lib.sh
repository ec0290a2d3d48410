# Shared by the shell tests (sourced): a scratch directory, pass/fail
# counters, and the two kinds of check. Every command's output is kept in
# $dir/all.log, so a test can look through all of it at the end (for
# validation-layer messages, say).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0

check() { # NAME COMMAND...: must succeed
  local name="$1"; shift
  if "$@" > "$dir/out" 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name"; sed 's/^/    /' "$dir/out" | tail -20
  fi
  cat "$dir/out" >> "$dir/all.log"
}

expect_fail() { # NAME STATUS WORDS COMMAND...: exits with STATUS within 60 s (no hang) and prints WORDS
  local name="$1" want="$2" words="$3"; shift 3
  timeout 60 "$@" > "$dir/out" 2>&1
  local rc=$?
  cat "$dir/out" >> "$dir/all.log"
  if [ "$rc" -eq "$want" ] && grep -q -- "$words" "$dir/out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name (exit $rc, want $want with '$words')"; sed 's/^/    /' "$dir/out" | tail -5
  fi
}

finish() { # the closing line, and the exit status
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
