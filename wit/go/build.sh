#!/usr/bin/env bash
# Builds a Go kwop plugin (a main package on the SDK kwop.dev/guest) into a WebAssembly component
# of the world kwop:reconciler@0.2.0 (wit/v0.2), with standard Go (no TinyGo).
#
#   wit/go/build.sh [PLUGIN_DIR [OUT]]   defaults: PLUGIN_DIR=. , OUT=PLUGIN_DIR/dist/plugin.wasm
#   wit/go/build.sh --go-bin             prints the folder of the go command it builds with (for
#                                        PATH: `go mod init`, `go test`), fetching Go if needed
#
# Works from any folder. The first run installs what is missing, into ~/.cache/kwop/guests/go:
#   - Go >= 1.25: the one on PATH, else go1.26.8 from the Go module proxy (golang.org/toolchain);
#   - wasm-tools 1.263.0 (cargo install, ~10 min once; taken from guest-foo/c's cache if there);
#   - wasmtime's WASI preview 1 reactor adapter (crate wasi-preview1-component-adapter-provider
#     48.0.8, via cargo fetch).
# Then:
#   GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags=-checklinkname=0
#   wasm-tools component embed -w reconciler <wit> core.wasm
#   wasm-tools component new --adapt wasi_snapshot_preview1=<reactor adapter>
# Nothing is rebuilt when the plugin's files, the SDK, the WIT and the tools are unchanged. Prints
# the output path; on failure one line (details in ~/.cache/kwop/guests/go/build.log).
# VERBOSE=1 shows every step.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WIT="$(cd "$HERE/../v0.2" && pwd)"  # the world kwop:reconciler@0.2.0
if [ "${1:-}" = --go-bin ]; then
    # shellcheck source=tools.sh
    source "$HERE/tools.sh"
    GO_LOG="$GO_CACHE/build.log"
    ensure_go
    dirname "$GO"
    exit 0
fi
PLUGIN="$(cd "${1:-.}" && pwd)"
OUT="${2:-$PLUGIN/dist/plugin.wasm}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac

# shellcheck source=tools.sh
source "$HERE/tools.sh"
GO_LOG="$GO_CACHE/build.log"
: >"$GO_LOG"
say() { if [ "${VERBOSE:-0}" = 1 ]; then echo "kwop-go: $*" >&2; fi; }

[ -f "$WIT/reconciler.wit" ] || go_fail "no WIT at $WIT/reconciler.wit (the SDK folder must sit in the kwop wit/ folder, beside v0.2/)"
[ -f "$PLUGIN/go.mod" ] || go_fail "no go.mod in $PLUGIN (a plugin is a Go module whose main package calls guest.Export)"
ensure_go
cargo_tool wasm-tools wasm-tools "$WASM_TOOLS_VERSION" component,validate,print "${KWOP_C_CACHE:-$HOME/.cache/kwop/guests/c}/tools"
WASM_TOOLS="$TOOLS/bin/wasm-tools"
ensure_adapter

# ---- up to date? ------------------------------------------------------------------------------
stamp="$({
    echo "$OUT"
    "$GO" version
    "$WASM_TOOLS" --version
    sha256sum "$ADAPTER" "${BASH_SOURCE[0]}" "$HERE/tools.sh" "$WIT"/*.wit
    # the plugin's and the SDK's sources (go.sum pins any other module)
    find "$PLUGIN" "$HERE" \( -name dist -o -name .git -o -name testdata \) -prune -o -type f \
        \( -name '*.go' -o -name '*.s' -o -name go.mod -o -name go.sum \) -print | LC_ALL=C sort | xargs sha256sum
} | sha256sum | cut -d' ' -f1)"
BUILD="$GO_CACHE/build/$(echo "$OUT" | sha256sum | cut -c1-16)"
mkdir -p "$BUILD"
if [ -f "$OUT" ] && [ "$(cat "$BUILD/stamp" 2>/dev/null)" = "$stamp" ]; then
    say "up to date: $OUT"
    echo "$OUT"
    exit 0
fi

# ---- core module ------------------------------------------------------------------------------
# c-shared: a reactor (`_initialize` starts the Go runtime and runs the init functions, which
# call guest.Export); -checklinkname=0: the SDK's runtime links to runtime.sbrk.
say "GOOS=wasip1 GOARCH=wasm $GO build -buildmode=c-shared in $PLUGIN"
echo "+ (cd $PLUGIN && GOOS=wasip1 GOARCH=wasm $GO build -buildmode=c-shared ...)" >>"$GO_LOG"
if ! (cd "$PLUGIN" && GOOS=wasip1 GOARCH=wasm "$GO" build -buildmode=c-shared -trimpath \
    -ldflags=-checklinkname=0 -o "$BUILD/core.wasm" .) >>"$GO_LOG" 2>&1; then
    grep -v '^+ ' "$GO_LOG" | head -20 >&2 || true
    go_fail "go build"
fi

# ---- component --------------------------------------------------------------------------------
say "wasm-tools component embed + new (adapter $ADAPTER_VERSION)"
go_run "wasm-tools component embed" "$WASM_TOOLS" component embed -w reconciler "$WIT" "$BUILD/core.wasm" \
    -o "$BUILD/embedded.wasm"
mkdir -p "$(dirname "$OUT")"
go_run "wasm-tools component new" "$WASM_TOOLS" component new "$BUILD/embedded.wasm" \
    --adapt "wasi_snapshot_preview1=$ADAPTER" -o "$OUT.tmp"
go_run "wasm-tools validate" "$WASM_TOOLS" validate --features component-model "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$stamp" >"$BUILD/stamp"
say "built $OUT ($(stat -c %s "$OUT") bytes)"
echo "$OUT"
