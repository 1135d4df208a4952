#!/usr/bin/env bash
# Builds this Foo plugin with the same build script as `kwop plugin new --lang python` plugins
# (host/templates/python/build.sh, where its options are documented).
#
#   guest-foo/python/build.sh [OUT]        (default: guest-foo/python/dist/foo.wasm)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KWOP_PLUGIN_DIR="$here" exec "$here/../../host/templates/python/build.sh" "${1:-$here/dist/foo.wasm}"
