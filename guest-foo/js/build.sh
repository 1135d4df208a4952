#!/usr/bin/env bash
# Builds the JavaScript Foo plugin into a WebAssembly component.
#
#   guest-foo/js/build.sh [OUT]        (default: guest-foo/js/dist/foo.wasm)
#
# Installs the pinned toolchain (package-lock.json: @bytecodealliance/componentize-js and jco)
# into guest-foo/js/node_modules with `npm ci` when the lock file changed, then runs
# componentize-js. Does nothing when OUT is newer than every input. Needs node >= 18 and npm.
# On failure it prints one line (the full tool output is in dist/build.log).
#
# KWOP_JS_ENGINE=quickjs builds with jco's QuickJS backend (componentize-qjs) instead of
# StarlingMonkey: 1.8 MB instead of 12 MB, and much faster for the host to compile (see README).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/dist/foo.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
log="$here/dist/build.log"
engine="${KWOP_JS_ENGINE:-starlingmonkey}"

fail() {
  echo "guest-foo-js: build failed: $*" >&2
  exit 1
}

wit="$(cd "$here/../../wit" 2>/dev/null && pwd)" || fail "no WIT folder at $here/../../wit"

command -v node >/dev/null 2>&1 || fail "node is not installed (need Node.js >= 18)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed"
case "$engine" in starlingmonkey | quickjs) ;; *) fail "KWOP_JS_ENGINE must be starlingmonkey or quickjs, not $engine" ;; esac
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 18 ] || fail "node $(node --version) is too old (need >= 18)"
mkdir -p "$here/dist" "$(dirname "$out")"

# Toolchain: reinstall only when package-lock.json changed since the last install.
stamp="$here/node_modules/.kwop-lock.sha256"
want="$(node -e 'process.stdout.write(require("crypto").createHash("sha256").update(require("fs").readFileSync(process.argv[1])).digest("hex"))' "$here/package-lock.json")"
if [ ! -x "$here/node_modules/.bin/componentize-js" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "guest-foo-js: installing the toolchain (npm ci)..." >&2
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 \
    || fail "npm ci failed: $(grep -m1 -i 'err' "$log" || tail -n1 "$log") (log: $log)"
  echo "$want" >"$stamp"
fi

# Up to date? OUT newer than the sources, the WIT, the helper module, the lock file and this
# script, and built with the same engine (remembered per output path in dist/).
helper="$wit/js/kwop.js"
[ -f "$helper" ] || fail "no helper module at $helper"
marker="$here/dist/.engine-$(printf '%s' "$out" | cksum | cut -d' ' -f1)"
if [ -f "$out" ] && [ "$(cat "$marker" 2>/dev/null)" = "$engine" ] \
  && [ -z "$(find "$here/src" "$wit/reconciler.wit" "$helper" "$here/package-lock.json" "$here/build.sh" \
    -newer "$out" -type f -print -quit)" ]; then
  echo "guest-foo-js: $out is up to date" >&2
  exit 0
fi

# The module root: src/ plus the helper module (wit/js/kwop.js), staged in dist/.
stage="$here/dist/stage.$$"
rm -rf "$stage" && mkdir -p "$stage"
cp "$here"/src/*.js "$helper" "$stage/"
# No WASI at all: the component imports only kwop:reconciler (no stdio, clocks, random, http).
tmp="$out.tmp.$$"
trap 'rm -rf "$tmp" "$stage"' EXIT
start=$SECONDS
if [ "$engine" = quickjs ]; then
  build=(node_modules/.bin/componentize-qjs --wit "$wit" --world reconciler
    --js "$stage/component.js" --module-root "$stage" --sync --stub-wasi --output "$tmp")
else
  build=(node_modules/.bin/componentize-js "$stage/component.js" --wit "$wit" --world-name reconciler
    --disable stdio random clocks http fetch-event --out "$tmp")
fi
if ! (cd "$here" && "${build[@]}") >"$log" 2>&1; then
  # The JS error (wizer runs the module's top level) if there is one, else the first error line.
  reason="$(grep -E '(Syntax|Type|Reference|Range)Error' "$log" | tail -n1 || true)"
  [ -n "$reason" ] || reason="$(grep -m1 -E 'Error|error' "$log" || tail -n1 "$log")"
  fail "${build[0]##*/}: ${reason} (log: $log)"
fi
[ -s "$tmp" ] || fail "${build[0]##*/} wrote no component (log: $log)"
mv -f "$tmp" "$out"
echo "$engine" >"$marker"
echo "guest-foo-js: built $out with $engine ($(($(wc -c <"$out") / 1024)) KiB in $((SECONDS - start))s)" >&2
