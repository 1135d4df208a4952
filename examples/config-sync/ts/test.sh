#!/usr/bin/env bash
# Native tests of the TypeScript config-sync: ./build.sh (tsc, the component), then node --test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
./build.sh >/dev/null
exec node --test test/
