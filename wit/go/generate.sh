#!/usr/bin/env bash
# Regenerates the SDK's WIT bindings (internal/bindings) and its copy of the canonical-ABI runtime
# (internal/wit) from wit/v0.2/reconciler.wit, with pinned tools. Run it after changing the WIT.
#
#   wit/go/generate.sh          rewrite the generated files
#   wit/go/generate.sh --check  only compare: exit 1 (and say what differs) when they are stale
#
# - Bindings: `wit-bindgen go` 0.63.0 (crate wit-bindgen-cli, feature go; `cargo install` into
#   ~/.cache/kwop/guests/go/tools the first time, ~4 min). Its module `wit_component` becomes
#   kwop.dev/guest/internal/bindings; the export glue (its `package main`) becomes package
#   `exports`. The export stubs are not used: export_wit_world/ is the SDK's own (it hands the calls
#   to the reconciler registered with guest.Export).
# - Runtime: the generated code needs go.bytecodealliance.org/pkg, which the Go proxy does not
#   serve; the same code ships in the wit-bindgen-go 0.63.0 crate (src/pkg, Apache-2.0). It is
#   copied to internal/wit with realloc.patch applied (cabi_realloc through arena.go, off the
#   Go heap).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WIT="$(cd "$HERE/../v0.2" && pwd)"  # the world kwop:reconciler@0.2.0
check=0
case "${1:-}" in --check) check=1 ;; "") ;; *) echo "usage: $0 [--check]" >&2; exit 2 ;; esac

# shellcheck source=tools.sh
source "$HERE/tools.sh"
GO_LOG="$GO_CACHE/generate.log"
: >"$GO_LOG"
ensure_go
cargo_tool wit-bindgen wit-bindgen-cli "$WIT_BINDGEN_VERSION" go
crate="$(crate_file wit-bindgen-go "$WIT_BINDGEN_VERSION")"

MODULE=kwop.dev/guest
# The generated files, relative to wit/go (everything else there is the SDK's own code).
GENERATED=(internal/bindings/exports internal/bindings/kwop_reconciler_cache internal/bindings/kwop_reconciler_log
    internal/bindings/kwop_reconciler_types internal/bindings/wit_world internal/wit/LICENSE internal/wit/async
    internal/wit/types internal/wit/runtime/runtime.go internal/wit/runtime/empty.s)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
out="$tmp/out"
mkdir -p "$out/internal/bindings" "$out/internal/wit"

# Runtime package, from the crate, patched.
go_run "unpacking $crate" tar -xzf "$crate" -C "$tmp" "wit-bindgen-go-$WIT_BINDGEN_VERSION/src/pkg"
pkg="$tmp/wit-bindgen-go-$WIT_BINDGEN_VERSION/src/pkg"
cp -r "$pkg/wit/async" "$pkg/wit/types" "$pkg/wit/runtime" "$out/internal/wit/"
cp "$pkg/LICENSE" "$out/internal/wit/LICENSE"
go_run "applying realloc.patch" patch --quiet -d "$out/internal/wit" -p1 -i "$HERE/realloc.patch"

# Bindings.
go_run "wit-bindgen go" "$TOOLS/bin/wit-bindgen" go -w reconciler --generate-stubs "$WIT" --out-dir "$tmp/gen"
for d in kwop_reconciler_cache kwop_reconciler_log kwop_reconciler_types wit_world; do
    cp -r "$tmp/gen/$d" "$out/internal/bindings/$d"
done
mkdir -p "$out/internal/bindings/exports"
cp "$tmp/gen/wit_world/empty.s" "$out/internal/bindings/exports/empty.s"
sed -e 's/^package main$/package exports/' -e '/^\/\/ Unused, but present to make the compiler happy$/d' \
    -e '/^func main() {}$/d' "$tmp/gen/wit_exports.go" >"$out/internal/bindings/exports/wit_exports.go"
grep -q '^package exports$' "$out/internal/bindings/exports/wit_exports.go" || go_fail "wit_exports.go has no 'package main' line"

find "$out" -name '*.go' -print0 | xargs -0 sed -i -e "s#\"go.bytecodealliance.org/pkg/wit/#\"$MODULE/internal/wit/#" \
    -e "s#\"wit_component/#\"$MODULE/internal/bindings/#"
go_run gofmt "$(dirname "$GO")/gofmt" -w "$out"
if grep -rq 'go.bytecodealliance.org\|"wit_component' "$out"; then go_fail "an import was not rewritten"; fi

if [ "$check" = 1 ]; then
    stale=()
    for f in "${GENERATED[@]}"; do
        diff -r "$out/$f" "$HERE/$f" >>"$GO_LOG" 2>&1 || stale+=("$f")
    done
    if [ ${#stale[@]} -gt 0 ]; then
        echo "kwop-go: the generated bindings are stale (${stale[*]}): run wit/go/generate.sh (diff: $GO_LOG)" >&2
        exit 1
    fi
    echo "kwop-go: generated bindings up to date" >&2
    exit 0
fi
for f in "${GENERATED[@]}"; do
    rm -rf "${HERE:?}/$f"
    mkdir -p "$(dirname "$HERE/$f")"
    cp -r "$out/$f" "$HERE/$f"
done
echo "kwop-go: regenerated ${GENERATED[*]} in $HERE" >&2
