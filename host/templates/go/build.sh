#!/usr/bin/env bash
# Builds the plugin into a WebAssembly component: ./build.sh [OUT]   (default: dist/plugin.wasm)
# Standard Go (GOOS=wasip1), then wasm-tools; the first run installs what is missing into
# ~/.cache/kwop/guests/go (see wit/go/build.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/dist/plugin.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
"$here/wit/go/build.sh" "$here" "$out" >/dev/null
echo "build.sh: built $out ($(($(wc -c <"$out") / 1024)) KiB)" >&2
