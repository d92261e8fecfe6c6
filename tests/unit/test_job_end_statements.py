"""Every statement that ends a job, or takes one out of its end, sets ``finished_at``.

The triggers that count a waiting job's parents fire on an UPDATE OF
finished_at (migration 0014): a statement that moved a parent into or out of
an ended state without setting it would leave its children uncounted, waiting
forever or released too soon. Only the statements named in ``_OPEN_MOVES``
change a state without it, and each moves a job between open states alone.
"""

import re

from taskq.broker.ops import queries

_OPEN_MOVES = {
    "job_claim": "queued to running",
    "job_release_ready": "waiting to queued",
}
# The SET clause of an UPDATE of jobs: up to its WHERE or FROM, which start a line.
_UPDATE_JOBS = re.compile(
    r"UPDATE jobs\b(?: INDEXED BY \w+)? SET\b(?P<set>.*?)(?:\n(?:WHERE|FROM)\b|$)", re.S
)
_SETS_STATE = re.compile(r"(?:^|,)\s*state\s*=", re.M)
_SETS_FINISHED_AT = re.compile(r"(?:^|,)\s*finished_at\s*=", re.M)


def _state_setters() -> dict[str, str]:
    """Each named statement that sets jobs.state, with its SET clause."""
    found = {}
    for name, sql in queries.all_queries().items():
        for update in _UPDATE_JOBS.finditer(sql):
            if _SETS_STATE.search(update.group("set")):
                found[name] = update.group("set")
    return found


def test_a_statement_setting_a_jobs_state_sets_finished_at_or_moves_it_between_open_ones() -> None:
    setters = _state_setters()
    # The claim, the release, cancel, retry, revive, the cascade, the lease's expiry and
    # the three reports: a parser that found none of them would pass anything.
    assert len(setters) >= 10, sorted(setters)
    assert set(_OPEN_MOVES) <= set(setters)
    missing = [
        name
        for name, assignments in setters.items()
        if name not in _OPEN_MOVES and not _SETS_FINISHED_AT.search(assignments)
    ]
    assert missing == []


def test_the_open_moves_never_set_an_ended_state() -> None:
    setters = _state_setters()
    for name in _OPEN_MOVES:
        assignments = setters[name]
        assert not re.search(r"'(succeeded|failed|dead|cancelled)'", assignments), name
