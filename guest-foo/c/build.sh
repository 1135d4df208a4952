#!/usr/bin/env bash
# Builds this Foo plugin with the same build script as `kwop plugin new --lang c` plugins
# (host/templates/c/build.sh, where its options are documented).
#
#   guest-foo/c/build.sh [OUT]        (default: guest-foo/c/dist/foo.wasm)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KWOP_PLUGIN_DIR="$here" KWOP_C_SDK="$(cd "$here/../../wit/c" && pwd)" exec "$here/../../host/templates/c/build.sh" "${1:-$here/dist/foo.wasm}"
