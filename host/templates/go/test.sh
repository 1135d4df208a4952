#!/usr/bin/env bash
# The native unit tests: ./test.sh   (go test, with the Go that wit/go/build.sh uses)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PATH="$(wit/go/build.sh --go-bin):$PATH"
exec go test "$@" ./...
