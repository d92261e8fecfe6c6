"""The chaos suite's short runs (``python -m bench.chaos --quick``), judged by its verdict.

Real ``taskq-worker`` processes run jobs that leave a ledger of every run
while a worker is SIGKILLed and another SIGSTOPped past its lease (on rqlite
also: the leader SIGKILLed, and a worker cut off from the store through a
network namespace). Every job must succeed exactly once, with the right
result, no two runs of one job may overlap in time, and nothing the run
started may outlive it. The write unavailability after the leader kill is
reported by the run, not asserted: timing lives in the bench, not in tests.

Among the jobs are workflows (fan-ins, chains, diamonds, parents that fail,
a job that spawns a fan-in as it succeeds): no job may start before its
parents ended, every fan-in free to run must run, every child of a failed
parent must end cancelled, none may be left waiting, and a spawner's jobs
must be spawned once, by the attempt the store accepted. The last tests feed
the workflows' verdict a hand-made store record that breaks each rule, so
that a rule that can never fail cannot pass here.
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
    # Spawned jobs were written, and claimed, as their spawners succeeded.
    assert figures["spawned"] > 0, summary
    assert sum(phase["spawned_run"] for phase in figures["phases"].values()) > 0, summary


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


# A spawner (long, so its token starts Lw) with a job after it; it spawns two
# jobs and a fan-in over them, ids 12 to 14, keyed by its attempt's lease.
_SPAWN_PLAN = WorkflowPlan(
    "chaos-wf-001",
    "hand-made spawn",
    (WorkflowJob("Lw001j00", 0.1), WorkflowJob("w001j01", 0.1, parents=(0,))),
    (
        WorkflowJob("w001j00s00", 0.1, spawner=0),
        WorkflowJob("w001j00s01", 0.1, spawner=0),
        WorkflowJob("w001j00s02", 0.1, parents=(2, 3), spawner=0),
    ),
)


class _Record:
    """A store record (and ledger) of ``plan`` as a correct run leaves it: job ids from 10
    in the plan's order, the attempt of job ``n`` under the lease ``lease-n``."""

    def __init__(self, plan: WorkflowPlan = _PLAN) -> None:
        self.plan = plan
        ids = {job.token: 10 + index for index, job in enumerate(plan.whole)}
        self.submitted = {job.token: ids[job.token] for job in plan.jobs}
        self.jobs: dict[int, dict[str, Any]] = {}
        self.executions: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.runs: dict[str, list[Run]] = {}
        ends: dict[int, float] = {}
        for job, state in zip(plan.whole, plan.expected().values(), strict=True):
            job_id = ids[job.token]
            parents = [10 + position for position in job.parents]
            self.edges += [
                {"child_id": job_id, "position": at, "parent_id": parent}
                for at, parent in enumerate(parents)
            ]
            # A spawned job is written as its spawner ends, and claimed after that.
            after = parents if job.spawner is None else [*parents, 10 + job.spawner]
            claim = max((ends[parent] for parent in after), default=99.9) + 0.1
            row = self.job_row(job_id, job.token, state, self.key(job, job_id))
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
                 "started_at": claim + 0.01, "finished_at": claim + 0.15, "outcome": state,
                 "lease_token": f"lease-{job_id}"}
            )  # fmt: skip

    def key(self, job: WorkflowJob, job_id: int) -> str:
        """The job's idempotency key: its workflow's and position, or its spawn's."""
        if job.spawner is None:
            return f"{self.plan.key}/{job_id - 10}"
        at = self.plan.spawned_by(job.spawner).index(job)
        return f"spawn:lease-{10 + job.spawner}/{at}"

    @staticmethod
    def job_row(job_id: int, token: str, state: str, key: str) -> dict[str, Any]:
        payload = {"target": "bench.chaos_jobs:work", "args": [token, 0.1, "/ledger"]}
        row = {"id": job_id, "state": state, "result": None, "error": None, "run_anyway": 0}
        return row | {"idempotency_key": key, "payload": json.dumps(payload), "workflow_id": 1}

    def id_of(self, token: str) -> int:
        return 10 + [job.token for job in self.plan.whole].index(token)

    def execution(self, token: str) -> dict[str, Any]:
        return next(e for e in self.executions if e["job_id"] == self.id_of(token))

    def verdict(self, chaos_ended: float = 1e12) -> dict[str, Any]:
        return judge_workflows(
            [self.plan], self.submitted, self.jobs, self.executions, self.edges, self.runs,
            chaos_ended,
        )  # fmt: skip

    def judged(self) -> dict[str, int]:
        verdict = self.verdict()
        return {name: verdict[name] for name in TARGETS}


def _only(**counts: int) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in TARGETS}


def test_the_workflow_verdict_passes_a_correct_record() -> None:
    record = _Record()
    assert record.judged() == _only()
    verdict = record.verdict(chaos_ended=0.0)
    figures = verdict["workflows"]
    assert (figures["fan_ins"], figures["cancelled_by_parent"], figures["ran_anyway"]) == (3, 1, 1)
    assert figures["phases"]["drain"]["children_run"] == 2  # claimed after the chaos ended (0.0)
    assert figures["after_reclaimed_parent"] == 0
    # A parent's lease expired once before its second claim ended it: its children count.
    record.executions.append(
        {"id": 0, "job_id": 10, "claimed_at": 99.0, "started_at": 99.0,
         "finished_at": 99.5, "outcome": "lease_expired", "lease_token": "lease-expired"}
    )  # fmt: skip
    verdict = record.verdict(chaos_ended=0.0)
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
         "finished_at": 200.1, "outcome": "succeeded", "lease_token": "lease-12"}
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


# -- spawns: once, by the attempt the store accepted -----------------------------------------


def _spawn_record_with_killed_attempt() -> _Record:
    """:data:`_SPAWN_PLAN`'s record, its spawner's lease once expired (lease-killed) before
    the attempt the store accepted: a killed attempt, which must have spawned nothing."""
    record = _Record(_SPAWN_PLAN)
    record.executions.append(
        {"id": 0, "job_id": 10, "claimed_at": 99.0, "started_at": 99.0, "finished_at": 99.5,
         "outcome": "lease_expired", "lease_token": "lease-killed"}
    )  # fmt: skip
    return record


def test_the_workflow_verdict_passes_a_correct_spawn() -> None:
    record = _spawn_record_with_killed_attempt()
    assert record.judged() == _only()
    figures = record.verdict(chaos_ended=0.0)["workflows"]
    assert (figures["spawners"], figures["spawned"], figures["spawns_unaccepted"]) == (1, 3, 1)
    # Claimed after the chaos ended: two children (the job after the spawner, the spawned
    # fan-in) and three spawned jobs (that fan-in and its two parents).
    drain = figures["phases"]["drain"]
    assert (drain["children_run"], drain["fan_ins_run"], drain["spawned_run"]) == (2, 1, 3)


def test_a_second_set_of_spawned_jobs_is_counted() -> None:
    record = _spawn_record_with_killed_attempt()
    for at, token in enumerate(("w001j00s00", "w001j00s01", "w001j00s02")):
        job_id = 20 + at  # the killed attempt's spawn, landed beside the accepted one's
        record.jobs[job_id] = record.job_row(job_id, token, "succeeded", f"spawn:lease-killed/{at}")
    assert record.judged() == _only(wf_spawn=1)


def test_a_spawn_by_an_attempt_the_store_did_not_accept_is_counted() -> None:
    record = _spawn_record_with_killed_attempt()
    for job_id in (12, 13, 14):
        key = record.jobs[job_id]["idempotency_key"]
        record.jobs[job_id]["idempotency_key"] = key.replace("lease-10", "lease-killed")
    # The accepted attempt spawned none of them: each is lost, and the spawn is wrong.
    assert record.judged() == _only(wf_spawn=1, wf_lost=3)


def test_a_spawner_that_spawned_nothing_is_counted() -> None:
    record = _Record(_SPAWN_PLAN)
    for job_id in (12, 13, 14):
        del record.jobs[job_id]
    assert record.judged() == _only(wf_spawn=1, wf_lost=3)


def test_a_spawned_job_whose_key_names_another_job_is_counted() -> None:
    record = _Record(_SPAWN_PLAN)
    record.jobs[13]["idempotency_key"] = "spawn:lease-11/1"  # the job after the spawner's attempt
    assert record.judged() == _only(wf_spawn=1)


def test_a_spawned_job_outside_its_spawners_workflow_is_counted() -> None:
    record = _Record(_SPAWN_PLAN)
    record.jobs[13]["workflow_id"] = 2
    assert record.judged() == _only(wf_spawn=1)


def test_a_spawned_fan_in_claimed_before_a_spawned_job_ended_is_early() -> None:
    record = _Record(_SPAWN_PLAN)
    fan_in, child = record.execution("w001j00s02"), record.execution("w001j00s01")
    fan_in["claimed_at"] = child["finished_at"] - 0.001
    assert record.judged() == _only(wf_early=1)


def test_a_spawned_job_begun_before_its_spawner_ended_is_early() -> None:
    record = _Record(_SPAWN_PLAN)
    spawner_run = record.runs["Lw001j00"][0]
    record.runs["w001j00s00"][0].start = spawner_run.last - 0.001
    assert record.judged() == _only(wf_early=1)


def test_a_missing_or_unreleased_spawned_job_is_counted() -> None:
    record = _Record(_SPAWN_PLAN)
    del record.jobs[12]  # never spawned: no row, and no edge from it to the fan-in
    record.edges = [edge for edge in record.edges if edge["parent_id"] != 12]
    assert record.judged() == _only(wf_lost=1)
    record = _Record(_SPAWN_PLAN)
    record.executions.remove(record.execution("w001j00s02"))
    record.jobs[14].update(state="waiting", finished_at=None)
    assert record.judged() == _only(wf_stuck=1, wf_not_run=1)
