#!/usr/bin/env bash
# The whole test suite on a fresh machine: Python deps into .venv, rqlited
# found or installed (scripts/install_rqlite.sh), then lint, types, the import
# contracts of pyproject.toml and pytest.
#
#   scripts/test.sh [--under-load] [PYTEST ARGS...]
#
# --under-load runs one CPU hog per core beside pytest, so that a test that
# leans on timing fails here rather than on a busy CI machine. Other
# arguments go to pytest.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

under_load=false
if [[ "${1:-}" == "--under-load" ]]; then
    under_load=true
    shift
fi

scripts/bootstrap.sh

# The rqlite tier finds rqlited through TASKQ_RQLITED. When no route of the
# installer works, the tier is reported as not run (tests/support/rqlite_tier.py),
# or fails the run under TASKQ_REQUIRE_RQLITE=1.
if rqlited_path=$(scripts/install_rqlite.sh | tail -n 1) && [[ -x "$rqlited_path" ]]; then
    export TASKQ_RQLITED="$rqlited_path"
fi

echo "== ruff" >&2
.venv/bin/ruff check taskq tests scripts bench
.venv/bin/ruff format --check taskq tests scripts bench
echo "== mypy" >&2
.venv/bin/mypy
echo "== import contracts" >&2
.venv/bin/lint-imports
echo "== pytest" >&2
# The workers, job children and commands the tests start import the tests' own
# modules too: their bytecode, once, as bootstrap.sh does for taskq's.
.venv/bin/python -m compileall -q tests bench >/dev/null
# Four pytest workers, a test file each at a time (module fixtures stay
# whole): most tests wait on processes rather than burn CPU, so even on 2
# cores more workers than cores shorten the run (the whole suite: 587 s with
# two, 428 s with three, one after the other on the same clone; as it grew,
# 543 s with three and 469 s with four, the second with its state machine's
# runs cut from 600 to 450, about 23 s of one worker).
# TASKQ_TEST_WORKERS=0 runs it in one process.
workers=${TASKQ_TEST_WORKERS:-4}
# A test that hangs fails after 120 s (pytest-timeout), unless it marks its own bound.
pytest_args=(--timeout 120)
if [ "$workers" != 0 ]; then
    pytest_args+=(-n "$workers" --dist loadfile)
fi
if ! $under_load; then
    exec .venv/bin/pytest "${pytest_args[@]}" "$@"
fi

hogs=()
stop_hogs() {
    if ((${#hogs[@]})); then
        kill "${hogs[@]}" 2>/dev/null || true
        wait "${hogs[@]}" 2>/dev/null || true
    fi
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cores=$(getconf _NPROCESSORS_ONLN)
for _ in $(seq "$cores"); do
    # A busy loop in a child shell: pure CPU, no I/O, stopped by its pid.
    bash -c 'while :; do :; done' &
    hogs+=("$!")
done
echo "test: under load: $cores CPU hogs (pids ${hogs[*]})" >&2
status=0
.venv/bin/pytest "${pytest_args[@]}" "$@" || status=$?
stop_hogs
exit "$status"
