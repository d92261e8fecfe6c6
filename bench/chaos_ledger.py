"""The chaos jobs' ledger: each run of a job, from the lines its attempts wrote."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    """One call of :func:`chaos_jobs.work`, from its ledger lines."""

    token: str
    attempt: str
    start: float
    last: float  # its ``end`` line, else its last ``alive`` line (it was killed)
    ended: bool
    pid: int
    ticks: int | None
    worker: str


def read_ledger(ledger_dir: Path) -> dict[str, list[Run]]:
    """Every run in the ledger files of ``ledger_dir``, by job token, oldest start first."""
    runs: dict[str, Run] = {}
    for path in sorted(ledger_dir.glob("*.ledger")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue  # cannot happen (one write per line), but never trust a file blindly
            kind, token, attempt, stamp = fields[:4]
            try:
                at = float(stamp)
            except ValueError:
                continue
            if kind == "start" and len(fields) == 7:
                ticks = None if fields[5] == "None" else int(fields[5])
                runs[attempt] = Run(token, attempt, at, at, False, int(fields[4]), ticks, fields[6])
            elif attempt in runs and kind in ("alive", "end"):
                run = runs[attempt]
                run.last = max(run.last, at)
                run.ended = run.ended or kind == "end"
    by_token: dict[str, list[Run]] = {}
    for run in runs.values():
        by_token.setdefault(run.token, []).append(run)
    for found in by_token.values():
        found.sort(key=lambda run: run.start)
    return by_token
