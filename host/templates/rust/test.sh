#!/usr/bin/env bash
# The native unit tests: ./test.sh   (cargo test, on the host's own target)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec cargo test --quiet "$@"
