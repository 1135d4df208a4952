#!/usr/bin/env bash
# Builds the Go Foo plugin into a WebAssembly component with the kwop Go SDK's build script
# (wit/go/build.sh: standard Go for GOOS=wasip1, wasm-tools, wasmtime's reactor adapter; tools
# installed from their registries the first time).
#
#   guest-foo/go/build.sh [OUT]        default OUT: guest-foo/go/dist/foo.wasm
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../../wit/go/build.sh" "$here" "${1:-$here/dist/foo.wasm}"
