# Sourced by wit/go/build.sh and wit/go/generate.sh: the pinned Go plugin toolchain and where it is
# cached. Every tool comes from a registry (the Go module proxy, crates.io); each is installed the
# first time it is needed and reused afterwards.
#
#   KWOP_GO_CACHE   cache root (default ~/.cache/kwop/guests/go): tools/, adapter-*/, toolchain/
#   GO              the go command to use (default: `go` on PATH when it is new enough)

GO_MIN_MINOR=25                 # //go:wasmexport + the generated bindings need Go >= 1.25
GO_FALLBACK_VERSION=1.26.8      # fetched from the Go module proxy when no Go >= 1.25 is installed
WIT_BINDGEN_VERSION=0.63.0      # as the Rust guest's wit-bindgen crate; pinned with wit-bindgen-go
WASM_TOOLS_VERSION=1.263.0      # as guest-foo/c
ADAPTER_CRATE=wasi-preview1-component-adapter-provider
ADAPTER_VERSION=48.0.8          # the host's wasmtime version
GO_CACHE="${KWOP_GO_CACHE:-$HOME/.cache/kwop/guests/go}"
TOOLS="$GO_CACHE/tools"
mkdir -p "$TOOLS"

go_fail() {
    echo "kwop-go: FAILED: $*${GO_LOG:+ (log: $GO_LOG)}" >&2
    exit 1
}
# go_run STEP CMD...: output to the log, one line on failure
go_run() {
    local step="$1"
    shift
    echo "+ $*" >>"$GO_LOG"
    "$@" >>"$GO_LOG" 2>&1 || go_fail "$step"
}

# Minor version of a go command, or 0.
go_minor() {
    "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p' | grep . || echo 0
}

# Sets GO to a go command >= 1.$GO_MIN_MINOR: $GO, `go` on PATH, or the Go toolchain module
# golang.org/toolchain from the Go module proxy (what `GOTOOLCHAIN` itself downloads), unpacked
# once into $GO_CACHE/toolchain.
ensure_go() {
    local candidate="${GO:-go}"
    if command -v "$candidate" >/dev/null 2>&1 && [ "$(go_minor "$candidate")" -ge "$GO_MIN_MINOR" ]; then
        GO="$(command -v "$candidate")"
        return
    fi
    local os arch
    os="$(uname -s | tr '[:upper:]' '[:lower:]')"
    case "$(uname -m)" in x86_64 | amd64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) arch="$(uname -m)" ;; esac
    local dir="$GO_CACHE/toolchain/go$GO_FALLBACK_VERSION.$os-$arch"
    if [ ! -x "$dir/bin/go" ]; then
        command -v curl >/dev/null 2>&1 || go_fail "no Go >= 1.$GO_MIN_MINOR on PATH, and no curl to fetch one"
        command -v unzip >/dev/null 2>&1 || go_fail "no Go >= 1.$GO_MIN_MINOR on PATH, and no unzip to unpack one"
        local proxy="${GOPROXY:-https://proxy.golang.org}"
        proxy="${proxy%%[,|]*}"
        [ "$proxy" != direct ] && [ "$proxy" != off ] || proxy=https://proxy.golang.org
        local url="$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_FALLBACK_VERSION.$os-$arch.zip"
        echo "kwop-go: no Go >= 1.$GO_MIN_MINOR on PATH; fetching go$GO_FALLBACK_VERSION from the Go module proxy" >&2
        local tmp="$GO_CACHE/toolchain/.fetch"
        rm -rf "$tmp" && mkdir -p "$tmp"
        go_run "fetching $url" curl -fsSL -o "$tmp/go.zip" "$url"
        go_run "unpacking the Go toolchain" unzip -q "$tmp/go.zip" -d "$tmp"
        # Module zips do not keep file modes: mark the commands executable, as `go` does.
        local root="$tmp/golang.org/toolchain@v0.0.1-go$GO_FALLBACK_VERSION.$os-$arch"
        chmod -R a+x "$root/bin" "$root/pkg/tool"
        mkdir -p "$(dirname "$dir")"
        rm -rf "$dir" && mv "$root" "$dir" && rm -rf "$tmp"
    fi
    GO="$dir/bin/go"
    export GOTOOLCHAIN=local
}

# cargo_tool BIN CRATE VERSION FEATURES [ALSO_IN_DIR]: cargo install into $TOOLS unless that
# version is there (or in ALSO_IN_DIR/bin, e.g. guest-foo/c's tools: then it is linked, not rebuilt).
cargo_tool() {
    local bin="$1" crate="$2" version="$3" features="$4" also="${5:-}"
    if [ -x "$TOOLS/bin/$bin" ]; then
        case " $("$TOOLS/bin/$bin" --version 2>/dev/null || true) " in *" $version "*) return ;; esac
    fi
    if [ -n "$also" ] && [ -x "$also/bin/$bin" ]; then
        case " $("$also/bin/$bin" --version 2>/dev/null || true) " in
        *" $version "*) mkdir -p "$TOOLS/bin" && ln -f "$also/bin/$bin" "$TOOLS/bin/$bin" 2>/dev/null \
            || cp "$also/bin/$bin" "$TOOLS/bin/$bin"; return ;;
        esac
    fi
    command -v cargo >/dev/null || go_fail "cargo is needed to install $crate (install Rust with rustup)"
    echo "kwop-go: installing $crate $version (cargo install, a few minutes once)" >&2
    go_run "cargo install $crate@$version" cargo install --locked --quiet --root "$TOOLS" \
        --no-default-features --features "$features" "$crate@$version"
}

# crate_file CRATE VERSION: prints the path of the .crate file, fetching it with cargo once.
crate_file() {
    local crate="$1" version="$2"
    local files=("${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$crate-$version.crate")
    if [ ! -f "${files[0]}" ]; then
        command -v cargo >/dev/null || go_fail "cargo is needed to fetch $crate (install Rust with rustup)"
        local fetch="$GO_CACHE/crate-fetch"
        mkdir -p "$fetch/src"
        printf '[package]\nname = "crate-fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n[workspace]\n' \
            "$crate" "$version" >"$fetch/Cargo.toml"
        : >"$fetch/src/lib.rs"
        go_run "cargo fetch $crate@$version" cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
        files=("${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$crate-$version.crate")
        [ -f "${files[0]}" ] || go_fail "no $crate-$version.crate after cargo fetch"
    fi
    echo "${files[0]}"
}

# Sets ADAPTER to wasmtime's WASI preview 1 reactor adapter (from its crate, extracted once).
ensure_adapter() {
    ADAPTER="$GO_CACHE/adapter-$ADAPTER_VERSION/wasi_snapshot_preview1.reactor.wasm"
    [ -f "$ADAPTER" ] && return
    echo "kwop-go: fetching $ADAPTER_CRATE $ADAPTER_VERSION (cargo)" >&2
    local file
    file="$(crate_file "$ADAPTER_CRATE" "$ADAPTER_VERSION")"
    mkdir -p "$(dirname "$ADAPTER")"
    tar -xzOf "$file" "$ADAPTER_CRATE-$ADAPTER_VERSION/artefacts/wasi_snapshot_preview1.reactor.wasm" \
        >"$ADAPTER.tmp" 2>>"$GO_LOG" || go_fail "extracting the adapter from $file"
    mv "$ADAPTER.tmp" "$ADAPTER"
}
