#!/usr/bin/env bash
# Builds the TypeScript config-sync into a WebAssembly component (kwop:reconciler@0.2).
#
#   examples/config-sync/ts/build.sh [OUT]      (default: examples/config-sync/ts/dist/config-sync.wasm)
#
# 1. gen/ts: src/*.ts beside kwop's SDK (wit/js: kwop.js, kwop.d.ts, types/ generated from the WIT);
# 2. tsc (strict, from the pinned JavaScript toolchain: guest-foo/js's package-lock.json) checks
#    the types and writes gen/tsc/*.js, copied to gen/plugin/src when they changed;
# 3. the shared JavaScript build (host/templates/js/build.sh) makes the component of gen/plugin.
# Needs node >= 18 and npm; the toolchain is installed once into ~/.cache/kwop/toolchains.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$here/dist/config-sync.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
gen="$here/gen"
rm -rf "$gen/ts" "$gen/tsc"
mkdir -p "$gen/ts" "$gen/plugin/src" "$here/dist"
cp "$here"/src/*.ts "$root/wit/js/kwop.js" "$root/wit/js/kwop.d.ts" "$gen/ts/"
cp -r "$root/wit/js/types" "$gen/ts/"
# Copies only what changed, so the component build below can tell it is up to date.
put() { cmp -s "$1" "$2" || cp "$1" "$2"; }
put "$root/guest-foo/js/package.json" "$gen/plugin/package.json"
put "$root/guest-foo/js/package-lock.json" "$gen/plugin/package-lock.json"
ln -sfn "$root/wit" "$gen/plugin/wit"
# The toolchain (and node_modules/.bin/tsc) linked into gen/plugin.
KWOP_JS_TOOLCHAIN_ONLY=1 KWOP_PLUGIN_DIR="$gen/plugin" "$root/host/templates/js/build.sh"
if ! (cd "$here" && "$gen/plugin/node_modules/.bin/tsc" -p tsconfig.json) >"$here/dist/tsc.log" 2>&1; then
  echo "build.sh: tsc failed:" >&2
  cat "$here/dist/tsc.log" >&2
  exit 1
fi
for f in "$gen"/tsc/*.js "$root/wit/js/kwop.js"; do put "$f" "$gen/plugin/src/${f##*/}"; done
for f in "$gen"/plugin/src/*.js; do [ -e "$gen/tsc/${f##*/}" ] || [ "${f##*/}" = kwop.js ] || rm -f "$f"; done
KWOP_PLUGIN_DIR="$gen/plugin" exec "$root/host/templates/js/build.sh" "$out"
