"""The chaos run's verdict: the ledger read, and what the store accepted judged against it.

Run by :mod:`bench.chaos` only, never in a worker. It reads the ledger
that :func:`bench.chaos_jobs.work` writes (see there for its lines) into
:class:`Run` records, finds overlapping runs of one job, and judges the
store's rows (plain dicts) against them: lost, stuck, wrong, zombie and
overlapping jobs (:func:`judge`), processes of the run left behind
(:func:`run_processes`), write unavailability after leader kills
(:func:`unavailability`, with :func:`percentile`), the targets missed
(:func:`violations`) and the summary printed at the end (:func:`summary`).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import Any

from bench import chaos_workflow_verdict
from bench.chaos_jobs import ALIVE_SECONDS, RUN_ENV, expected_digest
from bench.chaos_ledger import Run
from bench.chaos_rows import Row, stored_json

# The verdict's targets: these counts must be 0, and the write unavailability
# after a leader kill at most this many seconds at p99.
ZERO_TARGETS = (
    "lost", "stuck", "wrong", "zombie", "overlap", "left_behind", "unsubmitted",
    *chaos_workflow_verdict.TARGETS,
)  # fmt: skip
UNAVAILABILITY_TARGET = 3.0


# -- reading the ledger ---------------------------------------------------------------------


def overlaps(runs: list[Run], tolerance: float) -> list[tuple[Run, Run, float]]:
    """Pairs of runs of one job whose intervals share more than ``tolerance`` seconds."""
    found = []
    for index, first in enumerate(runs):
        for second in runs[index + 1 :]:
            shared = min(first.last, second.last) - max(first.start, second.start)
            if shared > tolerance:
                found.append((first, second, shared))
    return found


# -- the verdict: what the store accepted, against what ran ----------------------------------

ZOMBIE_REASONS = {
    "succeeded_count": "not exactly one succeeded execution",
    "not_last_claim": "the succeeded execution is not the job's last claim",
    "unknown_run": "the result names a run the ledger does not have (or that never ended)",
    "other_worker": "the result's run was on another worker than its execution names",
    "later_run": "the job ran again after the run whose result was accepted had started",
}


def judge(
    submitted: dict[str, int],
    jobs: dict[int, Row],
    executions: list[Row],
    worker_names: dict[str, str],
    runs: dict[str, list[Run]],
    tolerance: float,
    origin: float,
) -> dict[str, Any]:
    """Counts and examples of lost, stuck, wrong, zombie and overlapping jobs.

    ``jobs`` and ``executions`` are the store's rows of the chaos queue,
    ``worker_names`` maps worker ids to names (the chaos tags), ``runs`` is
    :func:`read_ledger`'s answer; examples give times in seconds from ``origin``.
    """
    by_job: dict[int, list[Row]] = {}
    for execution in executions:
        by_job.setdefault(int(execution["job_id"]), []).append(execution)
    lost: dict[str, str] = {}
    stuck: dict[str, str] = {}
    wrong: dict[str, str] = {}
    zombie: dict[str, list[str]] = {}
    for token, job_id in submitted.items():
        row = jobs.get(job_id)
        if row is None:
            lost[token] = "missing"
            continue
        state = str(row["state"])
        if state in ("queued", "running"):
            stuck[token] = state
            continue
        if state != "succeeded":
            lost[token] = state
            continue
        result = stored_json(row["result"])
        if not isinstance(result, dict) or result.get("digest") != expected_digest(token):
            wrong[token] = repr(result)[:200]
            continue
        attempts = sorted(by_job.get(job_id, []), key=lambda execution: int(execution["id"]))
        reasons = _zombie_reasons(result, attempts, worker_names, runs.get(token, []))
        if reasons:
            zombie[token] = [ZOMBIE_REASONS[reason] for reason in reasons]
    overlapping = {token: overlaps(found, tolerance) for token, found in runs.items()}
    overlapping = {token: pairs for token, pairs in overlapping.items() if pairs}
    all_runs = [run for found in runs.values() for run in found]
    return {
        "lost": len(lost),
        "stuck": len(stuck),
        "wrong": len(wrong),
        "zombie": len(zombie),
        "overlap": len(overlapping),
        "examples": {
            "lost": dict(list(lost.items())[:10]),
            "stuck": dict(list(stuck.items())[:10]),
            "wrong": dict(list(wrong.items())[:10]),
            "zombie": dict(list(zombie.items())[:10]),
            "overlap": {
                token: "; ".join(
                    f"{_span(a, origin)} and {_span(b, origin)} shared {shared:.2f} s"
                    for a, b, shared in sorted(pairs, key=lambda pair: -pair[2])[:3]
                )
                + (f" (and {len(pairs) - 3} more pairs)" if len(pairs) > 3 else "")
                for token, pairs in sorted(
                    overlapping.items(), key=lambda item: -max(p[2] for p in item[1])
                )[:10]
            },
        },
        "longest_overlap": max(
            (pair[2] for pairs in overlapping.values() for pair in pairs), default=0.0
        ),
        "runs": len(all_runs),
        "killed_runs": sum(not run.ended for run in all_runs),
        "jobs_run_more_than_once": sum(len(found) > 1 for found in runs.values()),
        "executions": len(executions),
        "execution_outcomes": dict(Counter(str(e["outcome"]) for e in executions)),
        "jobs_in_store": len(jobs),
    }


def _span(run: Run, origin: float) -> str:
    """A run as ``worker/attempt start-end`` (``+``: killed, it lasted a little longer)."""
    end = f"{run.last - origin:.2f}" + ("" if run.ended else "+")
    return f"{run.worker}/{run.attempt[:6]} {run.start - origin:.2f}-{end}"


def _zombie_reasons(
    result: dict[str, Any], attempts: list[Row], worker_names: dict[str, str], runs: list[Run]
) -> list[str]:
    reasons = []
    succeeded = [execution for execution in attempts if execution["outcome"] == "succeeded"]
    if len(succeeded) != 1:
        reasons.append("succeeded_count")
    elif succeeded[0] is not attempts[-1]:
        reasons.append("not_last_claim")
    run = next((run for run in runs if run.attempt == result.get("attempt")), None)
    if run is None or not run.ended:
        reasons.append("unknown_run")
    else:
        if len(succeeded) == 1:
            name = worker_names.get(str(succeeded[0]["worker_id"]))
            if name is not None and name != run.worker:
                reasons.append("other_worker")
        if any(other.start > run.start for other in runs if other is not run):
            reasons.append("later_run")
    return reasons


# -- the rest of the verdict: processes, write unavailability, the summary -------------------


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile (``share`` in 0..1), None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


# -- processes left behind ------------------------------------------------------------------


def _alive(pid: int, ticks: int | None) -> bool:
    """Whether ``pid`` still runs (a zombie does not) and is the process that had ``ticks``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in (b"Z", b"X") and (ticks is None or int(fields[19]) == ticks)


def run_processes(run_id: str, runs: dict[str, list[Run]]) -> dict[int, str]:
    """Live processes of this run: ``CHAOS_RUN`` in their environment, or a job's pid."""
    marker = f"{RUN_ENV}={run_id}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                marked = marker in environ.read().split(b"\0")
        except OSError:
            continue
        if marked and _alive(int(entry), None):
            found[int(entry)] = _cmdline(int(entry))
    for found_runs in runs.values():
        for run in found_runs:
            if run.pid not in found and _alive(run.pid, run.ticks):
                found[run.pid] = _cmdline(run.pid)
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "?"


def unavailability(
    kills: list[float], leaders: list[float | None], probes: list[tuple[float, float, bool]]
) -> dict[str, Any]:
    """For each leader kill: the first successful write begun after it, and the new leader.

    ``seconds``: from the kill to the end of that write; ``leader_seconds``:
    from the kill until a surviving node named a new leader (``leaders``,
    None where none did); ``behind_leader``: how much later the write came.
    """
    gaps: list[float | None] = []
    for kill in kills:
        ends = [end for start, end, ok in probes if ok and start >= kill]
        gaps.append(round(min(ends) - kill, 3) if ends else None)
    elected = [
        None if at is None else round(at - kill, 3) for kill, at in zip(kills, leaders, strict=True)
    ]
    behind = [
        round(gap - leader, 3)
        for gap, leader in zip(gaps, elected, strict=True)
        if gap is not None and leader is not None
    ]
    measured = [gap for gap in gaps if gap is not None]
    found = [leader for leader in elected if leader is not None]
    return {
        "kills": len(kills),
        "seconds": gaps,
        "p50": percentile(measured, 0.50),
        "p99": percentile(measured, 0.99),
        "max": max(measured, default=None),
        "unmeasured": len(gaps) - len(measured),
        "leader_seconds": elected,
        "leader_p50": percentile(found, 0.50),
        "leader_p99": percentile(found, 0.99),
        "behind_leader": behind,
        "behind_p50": percentile(behind, 0.50),
        "behind_p99": percentile(behind, 0.99),
        "probe_writes": len(probes),
        "probe_failures": sum(not ok for _, _, ok in probes),
    }


def violations(report: dict[str, Any]) -> list[str]:
    verdict = report["verdict"]
    found = [f"{name} = {verdict[name]}" for name in ZERO_TARGETS if verdict[name]]
    gaps = report["unavailability"]
    if gaps["unmeasured"]:
        found.append(f"{gaps['unmeasured']} leader kills with no successful write after them")
    if gaps["p99"] is not None and gaps["p99"] > UNAVAILABILITY_TARGET:
        found.append(f"write unavailability p99 = {gaps['p99']:.2f} s > {UNAVAILABILITY_TARGET} s")
    return found


_ROWS = (
    ("lost", "lost (missing, or ended other than succeeded)"),
    ("stuck", "stuck (not finished after the drain)"),
    ("wrong", "wrong results"),
    ("zombie", "zombie results accepted"),
    ("overlap", "overlapping executions (jobs)"),
    ("left_behind", "processes left behind"),
    ("unsubmitted", "jobs the run could not submit"),
    *chaos_workflow_verdict.ROWS,
)


def summary(report: dict[str, Any]) -> str:
    """The run as a table of measured against target, with what happened around it."""
    o, verdict, gaps = report["options"], report["verdict"], report["unavailability"]
    actions = report["actions"]
    lines = [
        f"chaos run on {o['store']}: {o['jobs']:,} jobs ({o['long_jobs']} long, "
        f"{o['long_seconds'][0]:g}-{o['long_seconds'][1]:g} s) and {o.get('workflows', 0)} "
        f"workflows, {o['workers']} workers x "
        f"{o['concurrency']}, lease {o['lease_seconds']:g} s, seed {o['seed']}; "
        f"{report['seconds']:g} s in all: chaos {report['chaos_seconds']:g} s, then a drain of "
        f"{report['drain_seconds']:g} s",
        "faults: "
        + ", ".join(
            f"{actions.get(name, 0)} {label}"
            for name, label in (
                ("leader_kill", f"leader kills ({o['leader_down_seconds']:g} s down)"),
                ("worker_kill", "worker kills"),
                ("stop", f"stops ({o['lease_seconds'] + 3:g} s)"),
                ("cut", f"cuts ({o['lease_seconds'] + 4:g} s, {o['cut_mode']})"),
            )
            if o[name]["every"] is not None
        ),
        f"runs: {verdict['runs']:,} ({verdict['killed_runs']} killed mid-way), "
        f"{verdict['jobs_run_more_than_once']} jobs ran more than once; executions "
        + ", ".join(f"{k} {v}" for k, v in sorted(verdict["execution_outcomes"].items())),
        "worker events: "
        + (
            ", ".join(
                f"{name} {count}"
                for name, count in sorted(report["worker_events"].items())
                if name in ("lease_lost", "job_dropped", "store_unavailable")
            )
            or "no lease_lost, job_dropped or store_unavailable"
        ),
    ]
    if o["store"] == "embedded":
        lines.append("embedded store: no leader to kill and no network to cut (no cut-off)")
    if "link" in report:
        link = report["link"]
        lines.append(
            f"cut link: {link['relayed']} connections relayed, {link['dropped']} dropped "
            f"by cuts, {link['refused']} refused while cut"
        )
    most = report["most_running"]
    lines.append(
        f"jobs running at once (claimed ahead included), most seen each second: "
        f"{most['chaos']} in the chaos, {most['drain']} in the drain; {most['slots']} slots"
    )
    lines += chaos_workflow_verdict.summary_lines(verdict)
    if report["worker_exits"]:
        lines.append("workers that exited by themselves: " + "; ".join(report["worker_exits"]))
    lines += ["", f"{'':54}{'measured':>10}{'target':>10}"]
    for key, label in _ROWS:
        value = verdict[key]
        mark = "ok" if value == 0 else "MISSED"
        extra = (
            f"  longest {verdict['longest_overlap']:.2f} s" if key == "overlap" and value else ""
        )
        lines.append(f"{label:54}{value:>10,}{0:>10}  {mark}{extra}")
    tolerance = f"{o['tolerance'] * 1000:g} ms"
    if gaps["kills"]:
        shown = "/".join("-" if v is None else f"{v:.2f}" for v in (gaps["p50"], gaps["p99"]))
        fine = gaps["p99"] is not None and gaps["p99"] <= UNAVAILABILITY_TARGET
        lines.append(
            f"{'write unavailability after a leader kill, p50/p99 (s)':54}{shown:>10}"
            f"{UNAVAILABILITY_TARGET:>10.2f}  {'ok' if fine else 'MISSED'}  (p99 at most; "
            f"{gaps['kills']} kills, longest {gaps['max'] or 0:.2f} s)"
        )
        lines += _election_lines(gaps)
    lines += [
        "",
        f"overlap: two runs of a job sharing more than {tolerance} of their ledger intervals; "
        f"a killed run's end is known to within {ALIVE_SECONDS:g} s (its last alive line)",
    ]
    for key, examples in verdict["examples"].items():
        for token, detail in list(examples.items())[:5]:
            lines.append(f"  {key} {token}: {detail}")
    missed = report["violations"]
    lines.append(f"verdict: {'FAIL: ' + '; '.join(missed) if missed else 'PASS'}")
    return "\n".join(lines)


def _election_lines(gaps: dict[str, Any]) -> list[str]:
    """Each leader kill: when a new leader was named, when the first write went through."""

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [
        "",
        "after each leader kill (s): a new leader named by a survivor / the first write through",
    ]
    pairs = zip(gaps["leader_seconds"], gaps["seconds"], strict=True)
    lines += [
        f"  kill {n:2}: leader {seconds(leader):>5}  write {seconds(write):>5}"
        for n, (leader, write) in enumerate(pairs, 1)
    ]
    lines.append(
        f"  p50/p99: leader {seconds(gaps['leader_p50'])}/{seconds(gaps['leader_p99'])}, "
        f"write {seconds(gaps['p50'])}/{seconds(gaps['p99'])}, write behind the leader "
        f"{seconds(gaps['behind_p50'])}/{seconds(gaps['behind_p99'])}"
    )
    return lines
