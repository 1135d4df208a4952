#!/usr/bin/env bash
# Builds the C kwop plugin in this folder into a WebAssembly component (WIT world
# kwop:reconciler@0.2.0): every src/*.c with the C SDK (kwop.h, kwop.c, kwop_wasm.c, json.c:
# vendored in src/ by `kwop plugin new`, the repository's wit/c/ for kwop's own guests), against
# the WIT in wit/v0.2/ (kwop's own guests: the repository's wit/v0.2/).
#
#   ./build.sh [OUT]        default OUT: dist/plugin.wasm
#
# Installs what it needs first, skipping what is there: Debian's clang-19, lld-19, wasm32
# compiler-rt and wasi-libc (apt-get), and wit-bindgen-cli and wasm-tools (cargo install, into
# ~/.cache/kwop/guests/c/tools). Then generates the C bindings (gen/), compiles for wasm32-wasi
# (WASI preview 1; Debian's wasi-libc has no preview 2) and turns the core module into a
# component with `wasm-tools component new`. Nothing is rebuilt when nothing changed.
#
# Environment: KWOP_C_SDK (the SDK folder when it is not in src/), KWOP_WIT (the WIT folder when
# it is not wit/v0.2/), KWOP_C_CACHE (default ~/.cache/kwop/guests/c, shared by every C plugin), CLANG
# (default clang-19), VERBOSE=1 to show every step. This script is shared by
# `kwop plugin new --lang c` and kwop's own guest-foo/c.
set -euo pipefail

HERE="${KWOP_PLUGIN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
if [ -n "${KWOP_WIT:-}" ]; then WIT="$KWOP_WIT"; elif [ -d "$HERE/wit/v0.2" ]; then WIT="$HERE/wit/v0.2"; else WIT="$(cd "$HERE/../../wit/v0.2" && pwd)"; fi
SDK="${KWOP_C_SDK:-$HERE/src}"
SDK_SOURCES=()
if [ "$SDK" != "$HERE/src" ]; then SDK_SOURCES=("$SDK/kwop.c" "$SDK/kwop_wasm.c" "$SDK/json.c"); fi
OUT="${1:-$HERE/dist/plugin.wasm}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
CACHE="${KWOP_C_CACHE:-$HOME/.cache/kwop/guests/c}"
TOOLS="$CACHE/tools"
LOG="$CACHE/build-$(echo "$OUT" | sha256sum | cut -c1-16).log"
CLANG="${CLANG:-clang-19}"

WIT_BINDGEN_VERSION=0.63.0 # as the Rust guest's wit-bindgen crate
WASM_TOOLS_VERSION=1.263.0
APT_PACKAGES=(clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc)
# Only used if the core module ever imports WASI preview 1 (today it imports nothing from WASI):
# the adapter from the crate wasmtime publishes it in, at the host's wasmtime version.
ADAPTER_CRATE=wasi-preview1-component-adapter-provider
ADAPTER_VERSION=48.0.8

mkdir -p "$CACHE" "$TOOLS"
: >"$LOG"

fail() {
    echo "build.sh: FAILED: $* (log: $LOG)" >&2
    exit 1
}
say() { if [ "${VERBOSE:-0}" = 1 ]; then echo "build.sh: $*" >&2; fi; }
# run STEP CMD...: output to the log, one line on failure
run() {
    local step="$1"
    shift
    echo "+ $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || fail "$step"
}

# ---- toolchain ------------------------------------------------------------------------------

missing=()
for p in "${APT_PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "build.sh: installing Debian packages: ${missing[*]}" >&2
    SUDO=()
    [ "$(id -u)" = 0 ] || SUDO=(sudo)
    if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
        run "apt-get update" "${SUDO[@]}" apt-get update
    fi
    run "apt-get install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive \
        "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
command -v "$CLANG" >/dev/null || fail "$CLANG not found after installing ${APT_PACKAGES[*]}"

# cargo_tool BIN CRATE VERSION FEATURES
cargo_tool() {
    local bin="$1" crate="$2" version="$3" features="$4"
    if [ -x "$TOOLS/bin/$bin" ]; then
        case " $("$TOOLS/bin/$bin" --version 2>/dev/null || true) " in *" $version "*) return ;; esac
    fi
    command -v cargo >/dev/null || fail "cargo is needed to install $crate"
    echo "build.sh: installing $crate $version (cargo install, a few minutes once)" >&2
    run "cargo install $crate@$version" cargo install --locked --quiet --root "$TOOLS" \
        --no-default-features --features "$features" "$crate@$version"
}
cargo_tool wit-bindgen wit-bindgen-cli "$WIT_BINDGEN_VERSION" c
cargo_tool wasm-tools wasm-tools "$WASM_TOOLS_VERSION" component,validate,print
WIT_BINDGEN="$TOOLS/bin/wit-bindgen"
WASM_TOOLS="$TOOLS/bin/wasm-tools"

# ---- up to date? ------------------------------------------------------------------------------

shopt -s nullglob
SOURCES=("$HERE"/src/*.c "$HERE"/src/*.h "${SDK_SOURCES[@]}" "$SDK"/*.h)
shopt -u nullglob
stamp="$({
    echo "$OUT"
    "$CLANG" --version | sed -n 1p
    dpkg-query -W -f='${Version}\n' wasi-libc libclang-rt-19-dev-wasm32
    "$WIT_BINDGEN" --version
    "$WASM_TOOLS" --version
    cat "$WIT"/*.wit "${SOURCES[@]}" "${BASH_SOURCE[0]}"
} | sha256sum | cut -d' ' -f1)"
STAMP_FILE="$CACHE/build/$(echo "$OUT" | sha256sum | cut -c1-16).stamp"
if [ -f "$OUT" ] && [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$stamp" ]; then
    say "up to date: $OUT"
    echo "$OUT"
    exit 0
fi

# ---- bindings ---------------------------------------------------------------------------------

GEN="$HERE/gen"
rm -rf "$GEN"
mkdir -p "$GEN"
say "wit-bindgen c $WIT --world reconciler"
run "wit-bindgen c" "$WIT_BINDGEN" c "$WIT" --world reconciler --out-dir "$GEN"

# ---- compile and link the core module ---------------------------------------------------------

BUILD="$CACHE/build"
mkdir -p "$BUILD"
CORE="$BUILD/$(echo "$OUT" | sha256sum | cut -c1-16).core.wasm"
# __FILE__ (in panics and kwop_fail) names src/plugin.c, not where the folder happens to be.
CFLAGS=(--target=wasm32-wasi -Os -std=c11 -Wall -Wextra -Werror -I"$HERE/src" -I"$SDK" -I"$GEN"
    -fmacro-prefix-map="$HERE/=" -fmacro-prefix-map="$SDK/=kwop-sdk/")
# A reactor: no main, exports only what the WIT world says. gc-sections drops unused libc.
LDFLAGS=(-mexec-model=reactor -Wl,--gc-sections -Wl,--strip-debug)
say "$CLANG ${CFLAGS[*]} ${LDFLAGS[*]}"
echo "+ $CLANG ..." >>"$LOG"
if ! "$CLANG" "${CFLAGS[@]}" "${LDFLAGS[@]}" -o "$CORE" \
    "$HERE"/src/*.c "${SDK_SOURCES[@]}" "$GEN/reconciler.c" "$GEN/reconciler_component_type.o" >>"$LOG" 2>&1; then
    grep -E "error|warning" "$LOG" | head -20 >&2 || true
    fail "compiling with $CLANG"
fi

# ---- componentize -----------------------------------------------------------------------------

ADAPT=()
run "wasm-tools print" "$WASM_TOOLS" print "$CORE" -o "$CORE.wat"
if grep -q '(import "wasi_snapshot_preview1"' "$CORE.wat"; then
    # the module uses WASI preview 1: adapt it to preview 2 with wasmtime's adapter
    ADAPTER="$CACHE/adapter-$ADAPTER_VERSION/wasi_snapshot_preview1.reactor.wasm"
    if [ ! -f "$ADAPTER" ]; then
        echo "build.sh: fetching $ADAPTER_CRATE $ADAPTER_VERSION (cargo)" >&2
        fetch="$CACHE/adapter-fetch"
        mkdir -p "$fetch/src"
        printf '[package]\nname = "adapter-fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n[workspace]\n' \
            "$ADAPTER_CRATE" "$ADAPTER_VERSION" >"$fetch/Cargo.toml"
        : >"$fetch/src/lib.rs"
        run "cargo fetch $ADAPTER_CRATE" cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
        crates=("${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$ADAPTER_CRATE-$ADAPTER_VERSION.crate")
        crate_file="${crates[0]}"
        [ -f "$crate_file" ] || fail "no $ADAPTER_CRATE-$ADAPTER_VERSION.crate after cargo fetch"
        mkdir -p "$(dirname "$ADAPTER")"
        tar -xzOf "$crate_file" "$ADAPTER_CRATE-$ADAPTER_VERSION/artefacts/wasi_snapshot_preview1.reactor.wasm" \
            >"$ADAPTER.tmp" 2>>"$LOG" || fail "extracting the adapter from $crate_file"
        mv "$ADAPTER.tmp" "$ADAPTER"
    fi
    ADAPT=(--adapt "wasi_snapshot_preview1=$ADAPTER")
fi

mkdir -p "$(dirname "$OUT")"
say "wasm-tools component new ${ADAPT[*]}"
run "wasm-tools component new" "$WASM_TOOLS" component new "$CORE" "${ADAPT[@]}" -o "$OUT.tmp"
run "wasm-tools validate" "$WASM_TOOLS" validate --features component-model "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$stamp" >"$STAMP_FILE"
say "built $OUT ($(stat -c %s "$OUT") bytes)"
echo "$OUT"
