#!/usr/bin/env bash
# Builds the Go config-sync into a WebAssembly component with the kwop Go SDK's build script.
#   examples/config-sync/go/build.sh [OUT]    default OUT: examples/config-sync/go/dist/config-sync.wasm
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../../../wit/go/build.sh" "$here" "${1:-$here/dist/config-sync.wasm}"
