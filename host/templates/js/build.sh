#!/usr/bin/env bash
# Builds the JavaScript kwop plugin in this folder into a WebAssembly component.
#
#   ./build.sh [OUT]        (default: dist/plugin.wasm)
#
# The entry module is src/component.js, built with the helper module kwop.js next to it
# (import it as './kwop.js'); the WIT is wit/v0.2/reconciler.wit in this folder (kwop's own guests
# use the repository's wit/; a folder with only wit/reconciler.wit builds a 0.1 plugin). The toolchain (componentize-js, pinned by package-lock.json) is installed
# with `npm ci` once into a shared cache, ~/.cache/kwop/toolchains/js-<hash of the lock>
# (KWOP_TOOLCHAINS moves it), so many plugins share one 340 MB install. Does nothing when OUT is
# newer than every input. Needs node >= 18 and npm. On failure it prints one line (the full tool
# output is in dist/build.log).
#
# KWOP_JS_TOOLCHAIN_ONLY=1 only installs the toolchain and links node_modules (for tsc and tests).
# KWOP_JS_DISABLE: WASI features left out (default "random clocks http fetch-event"). stdio stays
# in so console.log and uncaught errors reach the host's log; add "stdio" for a component that
# imports nothing but kwop:reconciler. KWOP_JS_ENGINE=quickjs uses jco's QuickJS backend.
# This script is shared by `kwop plugin new --lang js` and kwop's own guest-foo/js.
set -euo pipefail

here="${KWOP_PLUGIN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
out="${1:-$here/dist/plugin.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
log="$here/dist/build.log"
engine="${KWOP_JS_ENGINE:-starlingmonkey}"
disable="${KWOP_JS_DISABLE-random clocks http fetch-event}"
toolchains="${KWOP_TOOLCHAINS:-${XDG_CACHE_HOME:-$HOME/.cache}/kwop/toolchains}"

fail() {
  echo "build.sh: build failed: $*" >&2
  exit 1
}

if [ -d "$here/wit" ]; then wit="$here/wit"; else wit="$(cd "$here/../../wit" 2>/dev/null && pwd)" || fail "no wit/ folder in $here"; fi
# The world: kwop:reconciler@0.2 (wit/v0.2/); a plugin folder with only wit/reconciler.wit is a
# 0.1 plugin and builds against that.
if [ -f "$wit/v0.2/reconciler.wit" ]; then world="$wit/v0.2"; else world="$wit"; fi

command -v node >/dev/null 2>&1 || fail "node is not installed (need Node.js >= 18)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed"
case "$engine" in starlingmonkey | quickjs) ;; *) fail "KWOP_JS_ENGINE must be starlingmonkey or quickjs, not $engine" ;; esac
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 18 ] || fail "node $(node --version) is too old (need >= 18)"
[ -f "$here/package-lock.json" ] || fail "no package-lock.json in $here (it pins the toolchain)"
mkdir -p "$here/dist" "$(dirname "$out")"

# Toolchain: one install per distinct set of locked packages (the root entry, which names the
# plugin, is left out of the key), in the shared cache.
key="$(node -e '
  const l = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const p = Object.assign({}, l.packages); delete p[""];
  process.stdout.write(require("crypto").createHash("sha256").update(JSON.stringify(p)).digest("hex").slice(0, 16));
' "$here/package-lock.json")"
tc="$toolchains/js-$key"
if [ ! -x "$tc/node_modules/.bin/componentize-js" ] || [ ! -f "$tc/.complete" ]; then
  echo "build.sh: installing the JavaScript toolchain into $tc (npm ci, once)..." >&2
  mkdir -p "$tc"
  cp "$here/package.json" "$here/package-lock.json" "$tc/"
  (cd "$tc" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 \
    || fail "npm ci failed: $(grep -m1 -i 'err' "$log" || tail -n1 "$log") (log: $log)"
  touch "$tc/.complete"
fi
# node_modules here is the shared install (for editors, tsc and `npm test`), unless there is one.
[ -e "$here/node_modules" ] || ln -s "$tc/node_modules" "$here/node_modules"
# KWOP_JS_TOOLCHAIN_ONLY=1: stop here (the toolchain is installed and linked, nothing is built).
[ -z "${KWOP_JS_TOOLCHAIN_ONLY:-}" ] || exit 0

# The helper module kwop.js (the world's exports, an Outcome builder, a fake cache): a plugin
# made by `kwop plugin new` has its copy in src/; kwop's own guest-foo uses the repository's
# wit/js/kwop.js, staged next to src/*.js. The module root is that staged copy.
helper=()
[ -f "$here/src/kwop.js" ] || [ ! -f "$wit/js/kwop.js" ] || helper=("$wit/js/kwop.js")

# Up to date? OUT newer than the sources, the WIT, the lock file and this script, and built with
# the same settings (remembered per output path in dist/).
settings="$engine|$disable|$key"
marker="$here/dist/.settings-$(printf '%s' "$out" | cksum | cut -d' ' -f1)"
if [ -f "$out" ] && [ "$(cat "$marker" 2>/dev/null)" = "$settings" ] \
  && [ -z "$(find "$here/src" "$world/reconciler.wit" "${helper[@]}" "$here/package-lock.json" "${BASH_SOURCE[0]}" \
    -newer "$out" -type f -print -quit)" ]; then
  echo "build.sh: $out is up to date" >&2
  exit 0
fi

tmp="$out.tmp.$$"
stage="$here/dist/stage.$$"
trap 'rm -rf "$tmp" "$stage"' EXIT
rm -rf "$stage" && mkdir -p "$stage"
cp "$here"/src/*.js "${helper[@]}" "$stage/"
start=$SECONDS
if [ "$engine" = quickjs ]; then
  build=("$tc/node_modules/.bin/componentize-qjs" --wit "$world" --world reconciler
    --js "$stage/component.js" --module-root "$stage" --sync --stub-wasi --output "$tmp")
else
  # shellcheck disable=SC2206
  flags=($disable)
  build=("$tc/node_modules/.bin/componentize-js" "$stage/component.js" --wit "$world" --world-name reconciler
    --out "$tmp")
  [ ${#flags[@]} -eq 0 ] || build+=(--disable "${flags[@]}")
fi
if ! (cd "$here" && "${build[@]}") >"$log" 2>&1; then
  # The JS error (wizer runs the module's top level) if there is one, else the first error line.
  reason="$(grep -E '(Syntax|Type|Reference|Range)Error' "$log" | tail -n1 || true)"
  [ -n "$reason" ] || reason="$(grep -m1 -E 'Error|error' "$log" || tail -n1 "$log")"
  fail "${build[0]##*/}: ${reason} (log: $log)"
fi
[ -s "$tmp" ] || fail "${build[0]##*/} wrote no component (log: $log)"
mv -f "$tmp" "$out"
echo "$settings" >"$marker"
echo "build.sh: built $out with $engine ($(($(wc -c <"$out") / 1024)) KiB in $((SECONDS - start))s)" >&2
