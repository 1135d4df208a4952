#!/usr/bin/env bash
# Builds the Python kwop plugin in this folder into a WebAssembly component.
#
#   ./build.sh [OUT]         (default: dist/plugin.wasm)
#   ./build.sh bindings      writes the generated `wit_world` package to bindings/ (typed stubs
#                            with the WIT's docs, for your editor; not needed to build)
#
# The module is src/app.py (class WitWorld); the WIT is wit/v0.2/ in this folder (kwop's own guests
# use the repository's wit/v0.2/); a folder with only wit/reconciler.wit (made by an older `kwop
# plugin new`) still builds against that 0.1 WIT. The toolchain (componentize-py, pinned by requirements.txt) is installed
# once into a venv in a shared cache, ~/.cache/kwop/toolchains/python-<hash of requirements.txt>
# (KWOP_TOOLCHAINS moves it). Does nothing when OUT is newer than every input. Needs python3
# (>= 3.9, with venv). On failure it prints one line (the full tool output is in dist/build.log).
# This script is shared by `kwop plugin new --lang python` and kwop's own guest-foo/python.
set -euo pipefail

here="${KWOP_PLUGIN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
mode=build
if [ "${1:-}" = bindings ]; then mode=bindings; shift; fi
out="${1:-$here/dist/plugin.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
log="$here/dist/build.log"
python="${PYTHON:-python3}"
toolchains="${KWOP_TOOLCHAINS:-${XDG_CACHE_HOME:-$HOME/.cache}/kwop/toolchains}"

fail() {
  echo "build.sh: build failed: $*" >&2
  exit 1
}

if [ -d "$here/wit" ]; then witroot="$here/wit"; else witroot="$(cd "$here/../../wit" 2>/dev/null && pwd)" || fail "no wit/ folder in $here"; fi
if [ -f "$witroot/v0.2/reconciler.wit" ]; then wit="$witroot/v0.2"; else wit="$witroot"; fi
[ -f "$wit/reconciler.wit" ] || fail "no reconciler.wit in $wit"

command -v "$python" >/dev/null 2>&1 || fail "$python is not installed"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null \
  || fail "$("$python" --version 2>&1) is too old (need >= 3.9)"
[ -f "$here/requirements.txt" ] || fail "no requirements.txt in $here (it pins the toolchain)"
mkdir -p "$here/dist" "$(dirname "$out")"

# Toolchain: one venv per distinct requirements.txt, in the shared cache.
key="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16])' "$here/requirements.txt")"
venv="$toolchains/python-$key"
if [ ! -x "$venv/bin/componentize-py" ] || [ ! -f "$venv/.complete" ]; then
  echo "build.sh: installing the Python toolchain into $venv (pip, once)..." >&2
  mkdir -p "$toolchains"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >"$log" 2>&1 \
      || fail "cannot create a venv with $python (on Debian/Ubuntu: apt install python3-venv): $(tail -n1 "$log") (log: $log)"
  fi
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$here/requirements.txt" \
    >"$log" 2>&1 \
    || fail "pip install failed: $(grep -m1 -E '^ERROR' "$log" || tail -n1 "$log") (log: $log)"
  touch "$venv/.complete"
fi

if [ "$mode" = bindings ]; then
  rm -rf "$here/bindings"
  RUST_BACKTRACE=0 "$venv/bin/componentize-py" --wit-path "$wit" --world reconciler bindings "$here/bindings" >"$log" 2>&1 \
    || fail "componentize-py bindings: $(tail -n1 "$log") (log: $log)"
  echo "build.sh: wrote $here/bindings (point your editor's Python path at it)" >&2
  exit 0
fi

# The helper module kwop.py (WitWorld from a plain class, Outcome, Context): a plugin made by
# `kwop plugin new` has its copy in src/; kwop's own guest-foo uses the repository's
# wit/python/kwop.py, built in next to src/*.py.
helper=()
[ -f "$here/src/kwop.py" ] || [ ! -f "$witroot/python/kwop.py" ] || helper=("$witroot/python/kwop.py")

# Up to date? OUT newer than the sources, the WIT, the helper, the requirements and this script.
if [ -f "$out" ] && [ -z "$(find "$here/src" "$wit/reconciler.wit" "${helper[@]}" "$here/requirements.txt" "${BASH_SOURCE[0]}" \
  -newer "$out" -type f ! -name '*.pyc' -print -quit)" ]; then
  echo "build.sh: $out is up to date" >&2
  exit 0
fi

# componentize-py bundles every file of the Python path: build from a copy of src/*.py and the
# helper, without the __pycache__ a local test run leaves there.
tmp="$out.tmp.$$"
stage="$(mktemp -d)"
trap 'rm -rf "$tmp" "$stage"' EXIT
cp "$here"/src/*.py "${helper[@]}" "$stage/"
start=$SECONDS
if ! (cd "$stage" && RUST_BACKTRACE=0 "$venv/bin/componentize-py" --wit-path "$wit" --world reconciler \
  componentize app --python-path "$stage" --output "$tmp") >"$log" 2>&1; then
  # The Python error (componentize-py imports app.py while building) if there is one.
  reason="$(sed '/^Stack backtrace:/,$d' "$log" | grep -E '(Error|Exception)\b' | tail -n1 | sed 's/^ *//' || true)"
  [ -n "$reason" ] || reason="$(grep -m1 -iE 'error' "$log" || tail -n1 "$log")"
  fail "componentize-py: ${reason} (log: $log)"
fi
[ -s "$tmp" ] || fail "componentize-py wrote no component (log: $log)"
mv -f "$tmp" "$out"
echo "build.sh: built $out ($(($(wc -c <"$out") / 1024)) KiB in $((SECONDS - start))s)" >&2
