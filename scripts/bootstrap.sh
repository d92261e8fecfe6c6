#!/usr/bin/env bash
# Creates (or refreshes) the project's virtualenv in .venv with taskq and its
# development tools installed. Idempotent: a second run with an unchanged
# pyproject.toml does nothing.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
python=${TASKQ_PYTHON:-python3}
stamp="$venv/.taskq-installed"

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "bootstrap: taskq needs Python >= 3.11; $python is $("$python" -V 2>&1)" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "bootstrap: creating $venv" >&2
    "$python" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
    echo "bootstrap: installing taskq and its dev tools into $venv" >&2
    log="$venv/pip-install.log"
    if ! { "$venv/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
        "$venv/bin/python" -m pip install --disable-pip-version-check -e "$root[dev]"; } >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "bootstrap: pip install failed; the whole log is $log" >&2
        exit 1
    fi
    touch "$stamp"
fi
# An editable install leaves taskq's bytecode to be written on first import,
# which PYTHONDONTWRITEBYTECODE (set in some environments) forbids: then every
# sandbox child and CLI call compiles taskq again. Compile it here, once per
# change; up-to-date files are skipped.
"$venv/bin/python" -m compileall -q "$root/taskq" >/dev/null
