#!/usr/bin/env bash
# The native unit tests (plain python3, no toolchain needed): ./test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec "${PYTHON:-python3}" -m unittest discover -s tests "$@"
