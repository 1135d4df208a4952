#!/usr/bin/env bash
# Builds the plugin into a WebAssembly component: ./build.sh [OUT]   (default: dist/plugin.wasm)
# Needs cargo and the wasm32-wasip2 target (added with rustup when missing).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/dist/plugin.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
command -v cargo >/dev/null 2>&1 || { echo "build.sh: cargo is not installed (https://rustup.rs)" >&2; exit 1; }
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx wasm32-wasip2; then
  echo "build.sh: adding the wasm32-wasip2 target (rustup)" >&2
  rustup target add wasm32-wasip2 >&2
fi
cd "$here"
cargo build --quiet --profile plugin --target wasm32-wasip2
target="${CARGO_TARGET_DIR:-$here/target}"
mkdir -p "$(dirname "$out")"
cp "$target/wasm32-wasip2/plugin/{{crate}}.wasm" "$out"
echo "build.sh: built $out ($(($(wc -c <"$out") / 1024)) KiB)" >&2
