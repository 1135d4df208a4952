#!/usr/bin/env bash
# Runs tests/abi_leak.c natively under AddressSanitizer/LeakSanitizer against the bindings
# build.sh generated (run build.sh first).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
C="$(cd "$HERE/.." && pwd)"
[ -f "$C/gen/reconciler.c" ] || { echo "abi_leak.sh: run build.sh first (no gen/)" >&2; exit 1; }
OUT="${KWOP_C_CACHE:-$HOME/.cache/kwop/guests/c}/abi_leak"
mkdir -p "$(dirname "$OUT")"
# the generated glue's wasm attributes mean nothing natively
cc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Wno-attributes \
    -I"$C/src" -I"$C/../../wit/c" -I"$C/gen" -o "$OUT" \
    "$HERE/abi_leak.c" "$C/src/component.c" "$C/src/foo.c" "$C/../../wit/c/json.c" "$C/../../wit/c/kwop.c" \
    "$C/../../wit/c/kwop_wasm.c" "$C/gen/reconciler.c" -lm
ASAN_OPTIONS=detect_leaks=1 "$OUT"
