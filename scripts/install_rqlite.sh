#!/usr/bin/env bash
# Find or build the rqlited binary that taskq is pinned to.
#
# Order of preference:
#   1. $TASKQ_RQLITED, a path to an rqlited binary (used as given; a version
#      other than the pin only draws a warning);
#   2. an rqlited on PATH whose `-version` reports the pinned version;
#   3. a cached build in ${XDG_CACHE_HOME:-$HOME/.cache}/taskq/rqlite/<version>/;
#   4. a fresh build with the local Go toolchain and cgo, through the wrapper
#      module in scripts/rqlited/ (see its README.md), installed into that cache.
#
# The binary's absolute path is the LAST line of stdout. Progress goes to
# stderr. On failure the exit status is non-zero and stderr carries the Go
# error text followed by a one-line explanation.
set -euo pipefail

readonly RQLITE_VERSION="v10.2.7"
readonly RQLITE_COMMIT="a66a6f36d3b5a7f0da0bad3768014052a74ce4bc" # tag v10.2.7
readonly RQLITE_CMD_PKG="github.com/rqlite/rqlite/v10/cmd"
readonly RQLITED_PKG="github.com/rqlite/rqlite/v10/cmd/rqlited"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly WRAPPER_DIR="$SCRIPT_DIR/rqlited"
readonly CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/taskq/rqlite"
readonly INSTALL_DIR="$CACHE_ROOT/$RQLITE_VERSION"
readonly CACHED_BINARY="$INSTALL_DIR/rqlited"

log() { printf 'install_rqlite: %s\n' "$*" >&2; }

fail() {
    printf 'install_rqlite: error: %s\n' "$*" >&2
    exit 1
}

# `rqlited -version` prints e.g. "rqlited v10.2.7 linux amd64 go1.26.8 ..." on stderr.
version_line() {
    "$1" -version 2>&1 | head -n 1
}

is_pinned_version() {
    local line
    line="$(version_line "$1")" || return 1
    [[ "$line" == "rqlited $RQLITE_VERSION "* ]]
}

# Report the chosen binary and stop: its absolute path is the last stdout line.
use_binary() {
    local path provenance
    path="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
    provenance="$(dirname "$path")/PROVENANCE"
    log "using $path ($(version_line "$path"))"
    if [[ -f "$provenance" ]]; then
        log "PROVENANCE: $(head -n 1 "$provenance")"
    fi
    printf '%s\n' "$path"
    exit 0
}

# Run a go command, streaming its output to stderr; on failure the exact Go
# error text is already shown, and a one-line explanation follows.
run_go() {
    local explanation="$1" go_log="$build_dir/go.log"
    shift
    log "go $*"
    if ! go "$@" 2>&1 | tee "$go_log" >&2; then
        if grep -q '403 Forbidden' "$go_log"; then
            explanation="the Go module proxy refuses the rqlite modules; put rqlited $RQLITE_VERSION on PATH or set TASKQ_RQLITED=/path/to/rqlited"
        fi
        fail "$explanation"
    fi
}

# 1. An explicit binary.
if [[ -n "${TASKQ_RQLITED:-}" ]]; then
    [[ -x "$TASKQ_RQLITED" ]] || fail "TASKQ_RQLITED=$TASKQ_RQLITED is not an executable file"
    if ! is_pinned_version "$TASKQ_RQLITED"; then
        log "warning: TASKQ_RQLITED is not rqlited $RQLITE_VERSION: $(version_line "$TASKQ_RQLITED")"
    fi
    use_binary "$TASKQ_RQLITED"
fi

# 2. One on PATH, if it is the pinned version.
if on_path="$(command -v rqlited)"; then
    if is_pinned_version "$on_path"; then
        use_binary "$on_path"
    fi
    log "ignoring $on_path: $(version_line "$on_path") (want $RQLITE_VERSION)"
fi

# 3. A cached build.
if [[ -x "$CACHED_BINARY" ]]; then
    if is_pinned_version "$CACHED_BINARY"; then
        use_binary "$CACHED_BINARY"
    fi
    log "rebuilding: cached $CACHED_BINARY reports $(version_line "$CACHED_BINARY")"
fi

# 4. Build it.
command -v go >/dev/null || fail "go not found: install Go >= 1.26 (cgo needs a C compiler too), or set TASKQ_RQLITED"
cc="$(go env CC)"
command -v "$cc" >/dev/null || fail "C compiler '$cc' not found: rqlited needs cgo (SQLite); install gcc"

mkdir -p "$CACHE_ROOT"
build_dir="$(mktemp -d "$CACHE_ROOT/build-$RQLITE_VERSION.XXXXXX")"
trap 'rm -rf "$build_dir"' EXIT
cp "$WRAPPER_DIR/go.mod" "$build_dir/"
if [[ -f "$WRAPPER_DIR/go.sum" ]]; then
    cp "$WRAPPER_DIR/go.sum" "$build_dir/"
fi

log "building rqlited $RQLITE_VERSION in $build_dir (first build downloads modules and compiles SQLite: minutes)"
cd "$build_dir"
export CGO_ENABLED=1 GOWORK=off
run_go "could not resolve the rqlite $RQLITE_VERSION module graph" mod tidy
ldflags="-w -s"
ldflags+=" -X $RQLITE_CMD_PKG.Version=$RQLITE_VERSION"
ldflags+=" -X $RQLITE_CMD_PKG.Commit=$RQLITE_COMMIT"
ldflags+=" -X $RQLITE_CMD_PKG.Buildtime=$(date +%Y-%m-%dT%T%z)"
ldflags+=" -X $RQLITE_CMD_PKG.CompilerCommand=$cc"
run_go "compiling rqlited failed" build -trimpath -ldflags="$ldflags" -o "$build_dir/rqlited" "$RQLITED_PKG"

is_pinned_version "$build_dir/rqlited" ||
    fail "the built binary reports '$(version_line "$build_dir/rqlited")', not $RQLITE_VERSION"
mkdir -p "$INSTALL_DIR"
mv -f "$build_dir/rqlited" "$CACHED_BINARY"
rm -f "$INSTALL_DIR/PROVENANCE" # a fresh build replaces any hand-built binary
log "installed $CACHED_BINARY"
use_binary "$CACHED_BINARY"
