# Sourced by the scripts: one place for the cache locations, so CI and humans share caches.
# The Rust target folder lives in ~/.cache/kwop/target unless CARGO_TARGET_DIR is set, so a fresh
# clone (as in CI) does not rebuild wasmtime and kube from scratch when the cache is warm.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kwop/target}"
export KWOP_CACHE_DIR="${KWOP_CACHE_DIR:-$HOME/.cache/kwop/precompiled}"
KWOP_BIN_DIR="$("$(dirname "${BASH_SOURCE[0]}")/k8s-bins" --print-dir 2>/dev/null || true)"
export KWOP_BIN_DIR
