#!/usr/bin/env bash
# Builds the JavaScript Foo plugin into a WebAssembly component.
#
#   guest-foo/js/build.sh [OUT]        (default: guest-foo/js/dist/foo.wasm)
#
# Installs the pinned toolchain (package-lock.json: @bytecodealliance/componentize-js and jco)
# into guest-foo/js/node_modules with `npm ci` when the lock file changed, then runs
# componentize-js. Does nothing when OUT is newer than every input. Needs node >= 18 and npm.
# On failure it prints one line (the full tool output is in dist/build.log).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
wit="$(cd "$here/../../wit" && pwd)"
out="${1:-$here/dist/foo.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
log="$here/dist/build.log"

fail() {
  echo "guest-foo-js: build failed: $*" >&2
  exit 1
}

command -v node >/dev/null 2>&1 || fail "node is not installed (need Node.js >= 18)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed"
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

# Up to date? OUT newer than the sources, the WIT, the lock file and this script.
if [ -f "$out" ] && [ -z "$(find "$here/src" "$wit" "$here/package-lock.json" "$here/build.sh" \
  -newer "$out" -type f -print -quit)" ]; then
  echo "guest-foo-js: $out is up to date" >&2
  exit 0
fi

# No WASI features: the component imports only kwop:reconciler (no stdio, clocks, random, http).
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
if ! (cd "$here" && node_modules/.bin/componentize-js src/component.js \
  --wit "$wit" --world-name reconciler \
  --disable stdio random clocks http fetch-event \
  --out "$tmp") >"$log" 2>&1; then
  # The JS error (wizer runs the module's top level) if there is one, else the first error line.
  reason="$(grep -E '(Syntax|Type|Reference|Range)Error' "$log" | tail -n1 || true)"
  [ -n "$reason" ] || reason="$(grep -m1 -E 'Error|error' "$log" || tail -n1 "$log")"
  fail "componentize-js: ${reason} (log: $log)"
fi
[ -s "$tmp" ] || fail "componentize-js wrote no component (log: $log)"
mv -f "$tmp" "$out"
echo "guest-foo-js: built $out ($(($(wc -c <"$out") / 1024)) KiB in $((SECONDS - start))s)" >&2
