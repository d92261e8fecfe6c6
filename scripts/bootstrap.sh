#!/usr/bin/env bash
# Creates (or refreshes) the project's virtualenv in .venv with taskq installed
# (editable), and shows what it does while it does it.
#
#   scripts/bootstrap.sh             taskq with its dev tools (tests, lint, types, bench)
#   scripts/bootstrap.sh --runtime   taskq with its runtime dependencies and taskq serve's
#                                    (the demo, and every block of the README)
#
# Idempotent: a second run with an unchanged pyproject.toml does nothing; a dev
# install also serves --runtime.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
python=${TASKQ_PYTHON:-python3}

case "${1:-}" in
    "") set -- dev "[dev]" "taskq and its dev tools" ;;
    --runtime) set -- runtime "[server]" "taskq, its runtime dependencies and the server extra" ;;
    *)
        echo "usage: scripts/bootstrap.sh [--runtime]" >&2
        exit 2
        ;;
esac
kind=$1 extras=$2 what=$3

log() { printf 'bootstrap: %s\n' "$*" >&2; }

# Installed, and since pyproject.toml last changed?
installed() {
    [[ -f "$venv/.taskq-installed-$1" && ! "$root/pyproject.toml" -nt "$venv/.taskq-installed-$1" ]]
}

# Run an installer, its whole output into the log and its progress (one line
# per step or package, pip's or uv's) on stderr; its exit status.
install_with() {
    "$@" 2>&1 |
        tee -a "$pip_log" |
        while IFS= read -r line; do
            case "$line" in
                Collecting* | Installing* | Successfully* | Resolved* | Prepared* | Installed* | " + "*)
                    printf '  %s\n' "$line" >&2
                    ;;
            esac
        done
}

install_with_pip_or_fail() {
    if ! install_with "$venv/bin/python" -m pip install --disable-pip-version-check -e "$root$extras"; then
        tail -n 40 "$pip_log" >&2
        log "the install failed; the whole log is $pip_log"
        exit 1
    fi
}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    log "taskq needs Python >= 3.11; $python is $("$python" -V 2>&1)"
    exit 1
fi
if ! installed "$kind" && ! installed dev; then
    started=$SECONDS
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        "$python" -m venv "$venv"
    fi
    pip_log="$venv/pip-install.log"
    log "installing $what into $venv (the whole log: $pip_log)"
    # uv installs the same packages as pip, in less time (a fresh dev install,
    # uv's own install included: 13 s against pip's 20 s; 2 cores, 2026-12-03).
    # uv reads no pip configuration (an index or mirror set for pip), so where
    # uv cannot be had, or its install fails, pip installs. Both write the
    # packages' bytecode, which PYTHONDONTWRITEBYTECODE would otherwise leave
    # every process to compile again (uv alone does not: the suite took 37 s
    # more CPU without it).
    : >"$pip_log"
    if "$venv/bin/python" -m pip install --disable-pip-version-check -q "uv>=0.9,<1" >>"$pip_log" 2>&1 &&
        "$venv/bin/uv" --version >>"$pip_log" 2>&1; then
        if ! install_with "$venv/bin/uv" pip install --compile-bytecode --python "$venv/bin/python" \
            -e "$root$extras"; then
            log "uv's install failed (see the log); pip installs instead"
            install_with_pip_or_fail
        fi
    else
        log "uv could not be installed (see the log); pip installs instead"
        install_with_pip_or_fail
    fi
    touch "$venv/.taskq-installed-$kind"
    log "ready in $((SECONDS - started)) s"
fi
# An editable install leaves taskq's bytecode to be written on first import,
# which PYTHONDONTWRITEBYTECODE (set in some environments) forbids: then every
# sandbox child and CLI call compiles taskq again. Compile it here, once per
# change; up-to-date files are skipped.
"$venv/bin/python" -m compileall -q "$root/taskq" >/dev/null
