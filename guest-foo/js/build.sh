#!/usr/bin/env bash
# Builds this Foo plugin with the same build script as `kwop plugin new --lang js` plugins
# (host/templates/js/build.sh, where its options are documented).
#
#   guest-foo/js/build.sh [OUT]        (default: guest-foo/js/dist/foo.wasm)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export KWOP_JS_DISABLE="${KWOP_JS_DISABLE-random clocks http fetch-event}"
KWOP_PLUGIN_DIR="$here" exec "$here/../../host/templates/js/build.sh" "${1:-$here/dist/foo.wasm}"
