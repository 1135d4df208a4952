#!/usr/bin/env bash
# The native unit tests (Node's test runner, no toolchain needed): ./test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec node --test test/
