"""The chaos suite's short runs (``python -m bench.chaos --quick``), judged by its verdict.

Real ``taskq-worker`` processes run jobs that leave a ledger of every run
while a worker is SIGKILLed and another SIGSTOPped past its lease (on rqlite
also: the leader SIGKILLed, and a worker cut off from the store through a
network namespace). Every job must succeed exactly once, with the right
result, no two runs of one job may overlap in time, and nothing the run
started may outlive it. The write unavailability after the leader kill is
reported by the run, not asserted: timing lives in the bench, not in tests.

Among the jobs are workflows (fan-ins, chains, diamonds, parents that fail):
no job may start before its parents ended, every fan-in free to run must
run, every child of a failed parent must end cancelled, none may be left
waiting. The last tests feed the workflows' verdict a hand-made store record
that breaks each rule, so that a rule that can never fail cannot pass here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import chaos, chaos_verdict
from bench.chaos_jobs import FAILURE_MESSAGE, expected_digest
from bench.chaos_ledger import Run
from bench.chaos_workflow_verdict import TARGETS, judge_workflows
from bench.chaos_workflows import WorkflowJob, WorkflowPlan


def _judged(report: dict[str, Any], faults: dict[str, int]) -> None:
    """The faults all happened, and every zero target of the verdict is 0."""
    summary = chaos_verdict.summary(report) + "\n" + "\n".join(report["action_log"])
    assert report["actions"] == faults, summary
    verdict = report["verdict"]
    counts = {name: verdict[name] for name in chaos_verdict.ZERO_TARGETS}
    assert counts == dict.fromkeys(chaos_verdict.ZERO_TARGETS, 0), summary
    # Every job left its trace, but those that a failed parent cancelled: they never ran.
    figures = verdict["workflows"]
    assert verdict["runs"] >= verdict["jobs_in_store"] - figures["cancelled_by_parent"], summary
    # The workflows were there, and met what they are there for: fan-ins released,
    # cascades and runs anyway, and a fan-in waiting on a parent that a fault hit.
    assert figures["workflows"] == report["options"]["workflows"], summary
    assert sum(phase["fan_ins_run"] for phase in figures["phases"].values()) > 0, summary
    assert figures["cancelled_by_parent"] > 0, summary
    assert figures["ran_anyway"] > 0, summary
    assert figures["after_reclaimed_parent"] > 0, summary


@pytest.mark.timeout(300)  # the run bounds each of its waits itself, well within this
def test_jobs_survive_killed_and_frozen_workers_on_the_embedded_store(tmp_path: Path) -> None:
    report = chaos.run(chaos.preset("embedded", quick=True), tmp_path)
    _judged(report, {"worker_kill": 1, "stop": 1})


@pytest.mark.rqlite
@pytest.mark.timeout(300)
def test_jobs_survive_a_leader_kill_and_a_cut_off_worker_on_rqlite(tmp_path: Path) -> None:
    report = chaos.run(chaos.preset("rqlite", quick=True), tmp_path)
    _judged(report, {"worker_kill": 1, "stop": 1, "leader_kill": 1, "cut": 1})
    # A write went through after the kill (how soon is the chaos run's business).
    assert report["unavailability"]["unmeasured"] == 0, chaos_verdict.summary(report)


# -- the workflows' verdict on hand-made records --------------------------------------------

# Two parents (the second fails), a fan-in over them (cancelled), a run_anyway
# fan-in over them (runs), and a fan-in over the first parent and that one.
_PLAN = WorkflowPlan(
    "chaos-wf-000",
    "hand-made",
    (
        WorkflowJob("w000j00", 0.1),
        WorkflowJob("w000j01", 0.1, fails=True),
        WorkflowJob("w000j02", 0.1, parents=(0, 1)),
        WorkflowJob("w000j03", 0.1, parents=(0, 1), run_anyway=True),
        WorkflowJob("w000j04", 0.1, parents=(0, 3)),
    ),
)


class _Record:
    """A store record (and ledger) of :data:`_PLAN` as a correct run leaves it."""

    def __init__(self) -> None:
        self.submitted = {job.token: 10 + index for index, job in enumerate(_PLAN.jobs)}
        self.jobs: dict[int, dict[str, Any]] = {}
        self.executions: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.runs: dict[str, list[Run]] = {}
        ends: dict[int, float] = {}
        for job, state in zip(_PLAN.jobs, _PLAN.expected().values(), strict=True):
            job_id = self.submitted[job.token]
            parents = [10 + position for position in job.parents]
            self.edges += [
                {"child_id": job_id, "position": at, "parent_id": parent}
                for at, parent in enumerate(parents)
            ]
            claim = max((ends[parent] for parent in parents), default=99.9) + 0.1
            row: dict[str, Any] = {"id": job_id, "state": state, "result": None, "error": None}
            row["run_anyway"] = int(job.run_anyway)
            self.jobs[job_id] = row
            if state == "cancelled":  # by its parent's report, at that report's time
                row["finished_at"] = ends[job_id] = claim - 0.1
                continue
            attempt = f"{job_id:016x}"
            run = Run(job.token, attempt, claim + 0.01, claim + 0.11, True, 1, None, "w0g0")
            self.runs[job.token] = [run]
            row["finished_at"] = ends[job_id] = claim + 0.15
            if state == "succeeded":
                row["result"] = json.dumps(
                    {"digest": expected_digest(job.token), "attempt": attempt}
                )
            else:
                message = FAILURE_MESSAGE.format(token=job.token, attempt=attempt)
                row["error"] = json.dumps({"type": "ChaosFailure", "message": message})
            self.executions.append(
                {"id": len(self.executions) + 1, "job_id": job_id, "claimed_at": claim,
                 "started_at": claim + 0.01, "finished_at": claim + 0.15, "outcome": state}
            )  # fmt: skip

    def execution(self, token: str) -> dict[str, Any]:
        return next(e for e in self.executions if e["job_id"] == self.submitted[token])

    def judged(self) -> dict[str, int]:
        verdict = judge_workflows(
            [_PLAN], self.submitted, self.jobs, self.executions, self.edges, self.runs, 1e12
        )
        return {name: verdict[name] for name in TARGETS}


def _only(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in TARGETS}


def test_the_workflow_verdict_passes_a_correct_record() -> None:
    record = _Record()
    assert record.judged() == _only()
    verdict = judge_workflows(
        [_PLAN], record.submitted, record.jobs, record.executions, record.edges, record.runs, 0.0
    )
    figures = verdict["workflows"]
    assert (figures["fan_ins"], figures["cancelled_by_parent"], figures["ran_anyway"]) == (3, 1, 1)
    assert figures["phases"]["drain"]["children_run"] == 2  # claimed after the chaos ended (0.0)
    assert figures["after_reclaimed_parent"] == 0
    # A parent's lease expired once before its second claim ended it: its children count.
    record.executions.append(
        {"id": 0, "job_id": 10, "claimed_at": 99.0, "started_at": 99.0,
         "finished_at": 99.5, "outcome": "lease_expired"}
    )  # fmt: skip
    verdict = judge_workflows(
        [_PLAN], record.submitted, record.jobs, record.executions, record.edges, record.runs, 0.0
    )
    assert verdict["workflows"]["after_reclaimed_parent"] == 2  # the two that ran
    assert {name: verdict[name] for name in TARGETS} == _only()


def test_a_claim_before_the_parent_ended_is_early() -> None:
    record = _Record()
    fan_in, parent = record.execution("w000j04"), record.execution("w000j03")
    fan_in["claimed_at"] = parent["finished_at"] - 0.001
    assert record.judged() == _only(wf_early=1)


def test_a_claim_in_the_parents_clock_step_is_judged_by_the_ledger() -> None:
    record = _Record()
    fan_in, parent = record.execution("w000j04"), record.execution("w000j03")
    fan_in["claimed_at"] = parent["finished_at"] = record.jobs[13]["finished_at"]
    assert record.judged() == _only()  # the same reading of the store's clock: not before
    parent_run = record.runs["w000j03"][0]
    record.runs["w000j04"][0].start = parent_run.last - 0.001
    assert record.judged() == _only(wf_early=1)


def test_a_run_anyway_child_must_not_start_before_its_failed_parent_ended() -> None:
    record = _Record()
    failed_run = record.runs["w000j01"][0]
    record.runs["w000j03"][0].start = failed_run.last - 0.001  # the parent named in its error
    assert record.judged() == _only(wf_early=1)


def test_a_fan_in_that_never_ran_is_counted() -> None:
    record = _Record()
    record.executions.remove(record.execution("w000j04"))
    record.jobs[14]["state"] = "cancelled"
    assert record.judged() == _only(wf_not_run=1, wf_lost=1)


def test_a_child_of_a_failed_parent_that_ran_is_counted() -> None:
    record = _Record()
    record.jobs[12]["state"] = "succeeded"
    record.executions.append(
        {"id": 99, "job_id": 12, "claimed_at": 200.0, "started_at": 200.0,
         "finished_at": 200.1, "outcome": "succeeded"}
    )  # fmt: skip
    assert record.judged() == _only(wf_cascade=1, wf_lost=1)


def test_a_child_left_waiting_is_stuck() -> None:
    record = _Record()
    record.executions.remove(record.execution("w000j04"))
    record.jobs[14].update(state="waiting", finished_at=None)
    # Its parents all ended: a fan-in never released, stuck and not run.
    assert record.judged() == _only(wf_stuck=1, wf_not_run=1)


def test_a_missing_job_or_a_lost_edge_is_lost() -> None:
    record = _Record()
    del record.jobs[14]
    assert record.judged() == _only(wf_lost=1)
    record = _Record()
    record.edges = [edge for edge in record.edges if edge["child_id"] != 14 or edge["position"]]
    assert record.judged()["wf_lost"] == 1
