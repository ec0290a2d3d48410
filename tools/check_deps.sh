#!/usr/bin/env bash
# Dependency audit: every Debian package that configuring, building, running or
# testing tmm touches must be installed by tools/setup.sh.
#
# It configures and builds a scratch copy of this tree twice under strace, the
# way tools/run.sh does (Release, no tests) and the way tools/test.sh does
# (tests on), runs the main job's commands and a few tests, and collects every
# file those processes opened, executed or looked at successfully. Each file
# outside the source and scratch trees is mapped to its package with dpkg -S.
# A package is accounted for when it is
#   - in setup.sh's list for that stage (--list for the main job, --list --test
#     for the tests), or installed with one of them (Depends and Pre-Depends,
#     recursively: apt installs those with it), or
#   - part of the Debian base system (Priority required or important, or Essential, and
#     what those depend on).
# Anything else fails the audit, named with a file that needs it. So does a
# file under /usr/local or /opt (installed by hand, outside any package).
# Files under $HOME, /tmp, /proc, /sys, /dev and /run are the user's and the
# system's, not dependencies.
#
#   tools/check_deps.sh                 the audit (about 2-3 minutes on 2 cores)
#   tools/check_deps.sh --setup FILE    take the package lists from another setup.sh
#   tools/check_deps.sh --self-test     the audit, then the same traces checked against
#                                       copies of setup.sh missing one package each:
#                                       each must fail and name that package
#   tools/check_deps.sh --record DIR COMMAND...
#                                       runs COMMAND (tools/test.sh, tools/fuzz.sh) under the
#                                       same trace, into DIR, and exits with its status
#   tools/check_deps.sh --test-traces DIR
#                                       the tests' stage from those recordings instead of a
#                                       scratch build of its own (CI: the suite it ran anyway,
#                                       every test of it, not a few)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
setup=tools/setup.sh
self_test=0
test_traces=
strace_args=(-f -qq -z --seccomp-bpf -s 4096 -e trace=%file,execve)
while [ $# -gt 0 ]; do
  case "$1" in
    --record)
      dir="${2:?--record needs a directory and a command}"; shift 2
      [ $# -gt 0 ] || { echo "check_deps.sh: --record needs a command after the directory" >&2; exit 2; }
      command -v strace >/dev/null || { echo "check_deps.sh: needs strace (tools/setup.sh --test installs it)" >&2; exit 2; }
      mkdir -p "$dir"
      exec strace "${strace_args[@]}" -o "$dir/test.$(basename "$1").$$.trace" "$@" ;;
    --test-traces)
      test_traces="${2:?--test-traces needs a directory}"; shift 2
      compgen -G "$test_traces/test.*.trace" >/dev/null ||
        { echo "check_deps.sh: no recordings (test.*.trace) in $test_traces: make them with --record" >&2; exit 2; } ;;
    --setup) setup="${2:?--setup needs a file}"; shift 2 ;;
    --self-test) self_test=1; shift ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check_deps.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for tool in strace dpkg-query apt-cache; do
  command -v "$tool" >/dev/null || { echo "check_deps.sh: needs $tool (tools/setup.sh --test installs it)" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMM_CACHE_DIR="$work/cache"
home="${HOME:-/nonexistent}"
[ "$home" != "/" ] || home=/nonexistent

# trace STAGE COMMAND...: appends the successful file system calls of the command and its children.
trace() {
  local stage="$1"; shift
  echo "check_deps.sh: [$stage, ${SECONDS}s] $*"
  strace "${strace_args[@]}" -o "$work/$stage.$RANDOM.trace" "$@" \
    > "$work/last.log" 2>&1 || { echo "check_deps.sh: failed: $*" >&2; tail -20 "$work/last.log" >&2; exit 1; }
}

# A scratch copy of the tracked tree, so the audit never touches the user's build/.
git ls-files -z --cached --others --exclude-standard | (cd "$src" && xargs -0 tar cf -) | (mkdir -p "$work/src" && tar xf - -C "$work/src")
s="$work/src" b="$work/build"

trace main cmake -S "$s" -B "$b-main" -DCMAKE_BUILD_TYPE=Release -DTMM_BUILD_TESTS=OFF
trace main cmake --build "$b-main" -j "$(nproc)"
trace main "$b-main/tmm" devices
trace main "$b-main/tmm" check
trace main "$b-main/tmm" train --d-model 16 --n-ctx 16 --layers 1 --batch 4 --steps 2 --eval-every 0 --quiet \
  --run-dir "$work/run"

if [ -n "$test_traces" ]; then
  echo "check_deps.sh: [test] the recordings in $test_traces: $(ls "$test_traces"/test.*.trace | xargs -n1 basename | tr '\n' ' ')"
  cp "$test_traces"/test.*.trace "$work/"
else
  trace test cmake -S "$s" -B "$b-test" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTMM_BUILD_TESTS=ON
  trace test cmake --build "$b-test" -j "$(nproc)"
  trace test ctest --test-dir "$b-test" --output-on-failure -R '^(test_runtime|test_torch_parity|install)$'
  trace test bash "$s/tools/fuzz.sh" --build-only
fi

# Files that programs read only because they are there: a directory of plug-ins or
# configuration snippets read whole. What such a file loads in turn (a plug-in's
# shared libraries, found with ldd) is not evidence either. Anything needed is
# still seen: a Vulkan layer in use loads its library, which is not in this list.
optional_files='^(/etc/ld\.so\.conf\.d/'\
'|/(etc|usr/share/locale)/locale\.alias$'\
'|/usr/lib/bfd-plugins/'\
'|/usr/share/drirc\.d/'\
'|/(usr/share|etc)/vulkan/(explicit|implicit)_layer\.d/.*\.json$'\
'|/usr/(local/)?lib/python3[^/]*/(dist|site)-packages/[^/]*\.pth$'\
'|/usr/lib/python3/dist-packages/[^/]*\.pth$'\
'|/usr/lib/python3/dist-packages/_distutils_hack/'\
'|/usr/local/cuda[^/]*/'\
'|/usr/local/bin/(nvcc|ptxas)$)'   # clang looks for a CUDA installation (and ptxas/nvcc on PATH) whenever it starts

# used STAGE: "package<TAB>file" for every file the stage used (the name it was used
# under and its target, both spellings of merged /usr), and "-<TAB>file" for files
# under /usr/local and /opt that no package owns.
used() {
  grep -ho '"/[^"]*"' "$work/$1".*.trace | tr -d '"' | sort -u |
    grep -vE "^(/proc|/sys|/dev|/run|/tmp|/var/tmp|$home|$work|$src)(/|$)" |
    while IFS= read -r f; do
      [ -f "$f" ] || continue   # directories belong to many packages; gone files to none
      printf '%s\n' "$(realpath -s -m "$f")" "$(realpath -e "$f")"
    done | sort -u > "$work/$1.all"
  grep -E "$optional_files" "$work/$1.all" > "$work/$1.skip" || true
  # shellcheck disable=SC2046
  { cat "$work/$1.skip"; ldd $(grep '\.so' "$work/$1.skip") 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'; } |
    while IFS= read -r f; do printf '%s\n' "$f" "$(realpath -e "$f")"; done | sort -u > "$work/$1.optional" || true
  grep -vxFf "$work/$1.optional" "$work/$1.all" > "$work/$1.files" || true
  # One pass over dpkg's file lists: /var/lib/dpkg/info/PKG[:ARCH].list names PKG's files.
  awk 'FNR == 1 && FILENAME != "-" { pkg = FILENAME; sub(/.*\//, "", pkg); sub(/(:[^:]*)?\.list$/, "", pkg) }
       FILENAME != "-" { if ($0 in owner) owner[$0] = owner[$0] "," pkg; else owner[$0] = pkg; next }
       { f = $0; alt1 = f; sub(/^\/usr/, "", alt1); alt2 = "/usr" f
         o = (f in owner) ? owner[f] : (alt1 in owner) ? owner[alt1] : (alt2 in owner) ? owner[alt2] : ""
         if (o != "") { n = split(o, ps, ","); for (i = 1; i <= n; i++) print ps[i] "\t" f }
         else if (f ~ /^\/(usr\/local|opt)\//) print "-\t" f }' \
    /var/lib/dpkg/info/*.list - < "$work/$1.files" | sort -u -t$'\t' -k1,1 > "$work/$1.pkgs"
}

# allowed SETUP_ARGS...: the packages setup.sh lists, with their dependency closure and the base system.
# The base system: Priority required or important, or Essential, with what those depend on (coreutils'
# cp, say, needs libattr1, which is Priority optional but on every Debian system).
base_system() {
  local base
  base=$(dpkg-query -W -f='${Package} ${Priority} ${Essential}\n' | awk '$2 == "required" || $2 == "important" || $3 == "yes" { print $1 }')
  echo "$base"
  # shellcheck disable=SC2086
  apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances $base 2>/dev/null | grep -v '^ ' | tr -d '<>' | sed 's/:.*//'
}
allowed() {
  local listed
  listed=$(bash "$setup" --list "$@") || { echo "check_deps.sh: $setup --list $* failed" >&2; exit 2; }
  { echo "$listed"
    # shellcheck disable=SC2086
    apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances $listed 2>/dev/null | grep -v '^ ' | tr -d '<>' | sed 's/:.*//'
    cat "$work/base"
  } | sort -u
}

# check STAGE SETUP_ARGS...: prints the packages the stage used that are not accounted for.
check() {
  local stage="$1"; shift
  allowed "$@" > "$work/allowed"
  awk -F'\t' 'NR == FNR { ok[$1] = 1; next } !($1 in ok)' "$work/allowed" "$work/$stage.pkgs"
}

base_system | sort -u > "$work/base"
used main
used test
report() { # SETUP_FILE: 0 when every stage is accounted for, else one line per missing package
  local out
  out=$({ setup="$1" check main | sed 's/^/the main job\t/'; setup="$1" check test --test | sed 's/^/the tests\t/'; } |
        sort -s -t$'\t' -k2,2 -u)
  [ -z "$out" ] && return 0
  while IFS=$'\t' read -r stage pkg file; do
    if [ "$pkg" = "-" ]; then
      echo "check_deps.sh: $file is used by $stage but belongs to no package (installed by hand?)"
    else
      echo "check_deps.sh: package $pkg is used by $stage ($file) but $1 does not install it"
    fi
  done <<< "$out"
  return 1
}

echo "check_deps.sh: main job used $(wc -l < "$work/main.pkgs") packages, tests $(wc -l < "$work/test.pkgs")"
if ! report "$setup"; then
  echo "check_deps.sh: FAILED: add the packages above to $setup" >&2
  exit 1
fi
echo "check_deps.sh: every package used is installed by $setup"

if [ "$self_test" -eq 1 ]; then
  # The audit must catch a missing package: the same traces, against setup.sh minus one package.
  fails=0
  for pkg in glslang-tools liblapacke-dev libmicrohttpd-dev libcriterion-dev python3-torch; do
    sed "s/\([( ]\)$pkg\([ )]\)/\1\2/" "$setup" > "$work/setup-minus.sh"
    if bash "$work/setup-minus.sh" --list --test | grep -qx "$pkg"; then
      echo "check_deps.sh: self-test could not remove $pkg from a copy of $setup" >&2; fails=1; continue
    fi
    if out=$(setup="$work/setup-minus.sh" report "$work/setup-minus.sh"); then
      echo "check_deps.sh: self-test FAILED: without $pkg the audit passed" >&2; fails=1
    elif ! grep -q "package $pkg is used" <<< "$out"; then
      echo "check_deps.sh: self-test FAILED: without $pkg the audit did not name it:" >&2; echo "$out" >&2; fails=1
    else
      echo "check_deps.sh: self-test: without $pkg the audit fails: $(grep "package $pkg is used" <<< "$out" | sed 's/^check_deps.sh: //')"
    fi
  done
  [ "$fails" -eq 0 ] || exit 1
  echo "check_deps.sh: self-test passed"
fi
