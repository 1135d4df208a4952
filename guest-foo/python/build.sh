#!/usr/bin/env bash
# Builds the Python Foo plugin into a WebAssembly component.
#
#   guest-foo/python/build.sh [OUT]        (default: guest-foo/python/dist/foo.wasm)
#
# Installs the pinned toolchain (requirements.txt: componentize-py) into guest-foo/python/.venv
# when requirements.txt changed, then runs componentize-py on src/app.py. Does nothing when OUT
# is newer than every input. Needs python3 (>= 3.9, with venv) and network access to PyPI once.
# On failure it prints one line (the full tool output is in dist/build.log).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/dist/foo.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
log="$here/dist/build.log"
venv="$here/.venv"
python="${PYTHON:-python3}"

fail() {
  echo "guest-foo-py: build failed: $*" >&2
  exit 1
}

wit="$(cd "$here/../../wit" 2>/dev/null && pwd)" || fail "no WIT folder at $here/../../wit"

command -v "$python" >/dev/null 2>&1 || fail "$python is not installed"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null \
  || fail "$("$python" --version 2>&1) is too old (need >= 3.9)"
mkdir -p "$here/dist" "$(dirname "$out")"

# Toolchain: (re)install only when requirements.txt changed since the last install.
stamp="$venv/.kwop-requirements.sha256"
want="$("$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$here/requirements.txt")"
if [ ! -x "$venv/bin/componentize-py" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "guest-foo-py: installing the toolchain into $venv (pip)..." >&2
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >"$log" 2>&1 \
      || fail "cannot create a venv with $python (on Debian/Ubuntu: apt install python3-venv): $(tail -n1 "$log") (log: $log)"
  fi
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$here/requirements.txt" \
    >"$log" 2>&1 \
    || fail "pip install failed: $(grep -m1 -E '^ERROR' "$log" || tail -n1 "$log") (log: $log)"
  echo "$want" >"$stamp"
fi

# Up to date? OUT newer than the sources, the WIT, the helper module (wit/python/kwop.py), the
# requirements and this script.
helper="$wit/python/kwop.py"
[ -f "$helper" ] || fail "no helper module at $helper"
if [ -f "$out" ] && [ -z "$(find "$here/src" "$wit/reconciler.wit" "$helper" "$here/requirements.txt" "$here/build.sh" \
  -newer "$out" -type f ! -name '*.pyc' -print -quit)" ]; then
  echo "guest-foo-py: $out is up to date" >&2
  exit 0
fi

# componentize-py bundles every file of the Python path: build from a copy of src/*.py and the
# helper module, without the __pycache__ a local test run leaves there.
tmp="$out.tmp.$$"
stage="$(mktemp -d)"
trap 'rm -rf "$tmp" "$stage"' EXIT
cp "$here"/src/*.py "$helper" "$stage/"
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
echo "guest-foo-py: built $out ($(($(wc -c <"$out") / 1024)) KiB in $((SECONDS - start))s)" >&2
