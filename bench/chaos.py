"""taskq's chaos run: real workers and a real store, killed, frozen and cut off while they work.

It starts its own store (a 3-node rqlite cluster on loopback ports, or an
embedded SQLite file), ``--workers`` real ``taskq-worker`` processes (lease
6 s, heartbeat 1 s), and submits ``--jobs`` jobs (``bench.chaos_jobs:work``: short
ones of up to 0.3 s and ``--long-jobs`` of 15-45 s) spread over the first
60% of ``--duration``, and among them ``--workflows`` workflows (fan-ins,
chains, diamonds, parents that fail and fan-ins that run anyway, and a job
that spawns a fan-in at run time: ``bench/chaos_spawn_jobs.py``; see
``bench/chaos_workflows.py``), each written whole in one request. Every run
of a job appends timestamped ``start``, ``alive`` (every 0.25 s) and
``end`` lines to a ledger (see ``bench/chaos_jobs.py``). Meanwhile, until every job has finished or
``--duration`` has passed:

* the rqlite leader is SIGKILLed about every 10 s and restarted 3 s later,
  while a probe submits a no-op job (to a queue no worker takes from) every
  50 ms, which times the write unavailability after each kill, and the
  surviving nodes are asked every 20 ms until one names a new leader;
* a worker is SIGKILLed (the worker alone, not its jobs' processes) about
  every 5 s, and a new one started a second later;
* a worker is SIGSTOPped about every 30 s for its lease + 3 s, then SIGCONTed;
* on rqlite, one worker lives in a network namespace of its own whose only
  way to the store is a relay, cut about every 30 s for its lease + 4 s
  (``bench/chaos_link.py``; ``--cut-mode blackhole`` holds connections
  silent instead of refusing them). The embedded store has no network, so
  no worker is cut off there.

Half of the kills and stops go to a worker that runs a long job, when one
does (all of them with ``--quick``, where a fault waits up to 5 s for one
and prefers a workflow's long parent).
Then every job is drained (``--drain-timeout``), the workers get SIGTERM,
and the verdict is read from the store's rows and the ledger:

lost        submitted, but missing from the store or ended other than succeeded
stuck       still queued or running after the drain
wrong       succeeded with a result that is not the token's digest
zombie      a result accepted from a run that had lost its lease: the job has not
            exactly one succeeded execution, or it is not the job's last claim, or
            the result's run is unknown to the ledger, ran on another worker than
            the execution names, or was followed by a later run of the job
overlap     two runs of one job whose ledger intervals (start to end, or to the
            last alive line of a killed run) share more than the tolerance (50 ms)
left behind processes of this run (marked by ``CHAOS_RUN`` in their
            environment, or a job's pid from the ledger) still alive once the
            workers have stopped and a lease and 5 s have passed

and, for the workflows' jobs (``bench/chaos_workflow_verdict.py``, which says
how a start is compared with a parent's end on the store's 86 ms clock):

wf_early    a run of a job begun before one of its parents had ended, by the
            store's claim times or by the ledger
wf_not_run  a child free to run (its parents all succeeded, or all ended for a
            ``run_anyway`` one) that did not run and succeed
wf_cascade  a child of a failed, dead or cancelled parent (not ``run_anyway``)
            that ran, or did not end cancelled
wf_stuck    a workflow's job left waiting, queued or running
wf_lost     a workflow's job missing (a spawned one: not spawned by the attempt
            the store accepted), or not as its shape says (end state,
            parents, run_anyway)
wf_spawn    a spawner whose spawned jobs are not one set, from the attempt
            the store accepted (see ``bench/chaos_workflow_verdict.py``)

The plain counts above judge every job that must succeed, the workflows'
among them. Their targets are 0 (and so is that of jobs the run could not
submit), and write unavailability after a leader kill must stay within 3 s
at p99; the exit status is 1 when a target is missed. A killed run's last ``alive``
line can be up to 0.25 s before its death, so an overlap shorter than that
plus the tolerance can go unseen; any overlap reported is real.

    .venv/bin/python -m bench.chaos --store rqlite        # 10,000 jobs, 4 workers x 8
    .venv/bin/python -m bench.chaos --store embedded      # 2,000 jobs, 3 workers x 4
    .venv/bin/python -m bench.chaos --quick [--store rqlite] [--json FILE] [--keep DIR]

``--quick`` is the test suite's run (150 jobs, 6 long ones of 8-12 s among
them, and 10 workflows of 48 jobs, which spawn 10 more; a 3 s lease so that
the long ones outlive it, one worker kill and one stop; on rqlite one leader
kill and one cut). ``--jobs``, ``--long-jobs``, ``--workflows``, ``--workers``, ``--seed``,
``--no-leader-kills`` and the like change a preset. Progress
goes to stderr, the summary to stdout, the details to ``--json``. The run's
directory (store, ledger, worker logs) is deleted unless ``--keep DIR``
names one or a target was missed (its path is printed). The network
namespace needs root and iproute2; rqlited comes from ``TASKQ_RQLITED``, PATH,
or the cache ``scripts/install_rqlite.sh`` builds into.

This file holds the options and their presets and the run itself, from
start to verdict. Beside it in ``bench/``: the job mix and the threads that
submit the jobs, watch the store and probe it (``chaos_load.py``), the jobs
and their ledger (``chaos_jobs.py``; the spawning job, which imports taskq,
in ``chaos_spawn_jobs.py``), the faults (``chaos_faults.py``), the
workers (``chaos_fleet.py``), the cut-off (``chaos_link.py``), the
workflows (``chaos_workflows.py``) and the verdict (``chaos_verdict.py``,
``chaos_workflow_verdict.py``, over ``chaos_rows.py``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench import chaos_jobs, chaos_ledger, chaos_verdict, chaos_workflow_verdict, chaos_workflows
from bench.chaos_faults import Chaos, Fault
from bench.chaos_fleet import Fleet
from bench.chaos_link import CUT_MODES, Partition
from bench.chaos_load import QUEUE, Background, plan_jobs
from bench.chaos_options import Options
from bench.chaos_workflows import WorkflowPlan
from taskq.broker.client.client import Client
from taskq.broker.stores.store import Consistency, Row, Statement, Store
from taskq.dev.cluster import RqliteCluster, running_cluster
from taskq.worker.settings import WorkerSettings


def preset(store: str, quick: bool) -> Options:
    if quick:
        base = Options(
            store=store, quick=True, jobs=150, long_jobs=6, long_seconds=(8.0, 12.0),
            # Two long parents per fan-in: one is likely on a worker the faults may hit;
            # workflows submitted over 10 s: some meet the leader kill.
            workflows=10, fan_in_width=(4, 4), fan_in_long_parents=2, workflow_span=10.0,
            workers=3, concurrency=3, duration=45.0, drain_timeout=60.0,
            # A short lease, so that a long job outlives the lease of a frozen or
            # cut-off worker (and the run is short); heartbeats to match.
            lease_seconds=3.0, heartbeat_seconds=0.5, lease_margin_seconds=1.0,
            cut=Fault(30.0, 1, 3.0), stop=Fault(30.0, 1, 3.5),
            worker_kill=Fault(5.0, 1, 4.0), leader_kill=Fault(10.0, 1, 6.0),
        )  # fmt: skip
    else:
        base = Options(store=store)
        if store == "rqlite":
            base = replace(base, jobs=10_000, long_jobs=50, workers=4, concurrency=8)
            base = replace(base, workflows=100)
            base = replace(base, duration=240.0)
    if store == "embedded":  # no leader, no network
        base = replace(base, leader_kill=Fault(None), cut=Fault(None))
    return base


def say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_worker_config(path: Path, options: Options) -> Path:
    """The workers' config; settings this checkout's worker does not know are left out."""
    # The constructor's parameters: what the settings take, whatever kind of class holds them.
    known = set(inspect.signature(WorkerSettings).parameters)
    settings: dict[str, object] = {
        "queues": [QUEUE],
        "concurrency": options.concurrency,
        "lease_seconds": options.lease_seconds,
        "heartbeat_seconds": options.heartbeat_seconds,
        "grace_seconds": 3.0,
        "idle_poll_seconds": 0.2,
        "lease_margin_seconds": options.lease_margin_seconds,
        "modules": ["bench.chaos_jobs", "bench.chaos_spawn_jobs"],
        "env_passthrough": [chaos_jobs.RUN_ENV, chaos_jobs.WORKER_ENV],
    }
    lines = ["[worker]"] + [
        f"{key} = {json.dumps(value)}" for key, value in settings.items() if key in known
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- one run --------------------------------------------------------------------------------


def read_verdict(
    store: Store,
    submitted: dict[str, int],
    ledger: Path,
    tolerance: float,
    origin: float,
    workflows: list[WorkflowPlan],
    chaos_ended: float,
) -> Any:
    """The store's rows judged against the ledger, the workflows' too.

    The rows as stored, not the broker's records of them, so that a mistake in
    the broker's parsing cannot hide one in its SQL; read linearizably, so on
    rqlite they hold every acknowledged write. The plain verdict judges every
    job that must succeed, those of the workflows among them; the workflows'
    (``bench/chaos_workflow_verdict.py``) every job of a workflow.
    """

    def rows(sql: str) -> list[Row]:
        return store.query(Statement(sql, {"queue": QUEUE}), consistency=Consistency.LINEARIZABLE)

    jobs = rows("SELECT * FROM jobs WHERE queue = :queue ORDER BY id")
    executions = rows(
        "SELECT executions.* FROM executions JOIN jobs ON jobs.id = executions.job_id "
        "WHERE jobs.queue = :queue ORDER BY executions.id"
    )
    workers = rows("SELECT id, name FROM workers")
    edges = rows(
        "SELECT job_parents.* FROM job_parents JOIN jobs ON jobs.id = job_parents.child_id "
        "WHERE jobs.queue = :queue"
    )
    expected = {token: state for plan in workflows for token, state in plan.expected().items()}
    by_id = {int(row["id"]): row for row in jobs}
    # The spawned jobs, as their spawners' accepted attempts wrote them, must succeed too.
    spawned = chaos_workflow_verdict.spawned_jobs(by_id, executions)
    must_succeed = {
        token: job_id
        for token, job_id in (submitted | spawned).items()
        if expected.get(token, "succeeded") == "succeeded"
    }
    runs = chaos_ledger.read_ledger(ledger)
    verdict = chaos_verdict.judge(
        must_succeed,
        by_id,
        executions,
        {str(row["id"]): str(row["name"]) for row in workers},
        runs,
        tolerance,
        origin,
    )
    judged = chaos_workflow_verdict.judge_workflows(
        workflows, submitted, by_id, executions, edges, runs, chaos_ended
    )
    verdict["examples"].update(judged.pop("examples"))
    verdict.update(judged)
    return verdict


def to_be_spawned(workflows: list[WorkflowPlan], submitted: dict[str, int]) -> int:
    """How many jobs the submitted spawners will spawn (each spawns once, when it succeeds)."""
    return sum(
        len(plan.spawned_by(position))
        for plan in workflows
        for position, job in enumerate(plan.jobs)
        if job.token in submitted
    )


def kill_leftovers(run_id: str, ledger: Path) -> None:
    """SIGKILL every process of this run still alive (found as the verdict finds them)."""
    for pid in chaos_verdict.run_processes(run_id, chaos_ledger.read_ledger(ledger)):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run(options: Options, root: Path) -> dict[str, Any]:
    """One chaos run in ``root`` (which it fills); the report, with ``violations``."""
    run_id = secrets.token_hex(6)
    rng = random.Random(options.seed)
    # With --quick the long jobs come first, so that the faults meet them.
    front = 0.2 if options.quick else 0.5
    plans = plan_jobs(
        options.jobs, options.long_jobs, options.long_seconds, options.short_seconds, front, rng
    )
    workflows = chaos_workflows.plan_workflows(
        options.workflows, options.fan_in_width, options.long_seconds, options.short_seconds, rng,
        options.fan_in_long_parents,
    )  # fmt: skip
    in_workflows = sum(len(workflow.jobs) for workflow in workflows)
    spawned = sum(len(workflow.spawned) for workflow in workflows)
    ledger = root / "ledger"
    ledger.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"options": _jsonable(asdict(options)), "run_id": run_id}
    began, origin = time.monotonic(), time.time()  # the ledger's times count from ``origin``
    with ExitStack() as stack:
        cluster: RqliteCluster | None = None
        partition: Partition | None = None
        if options.store == "rqlite":
            say("starting a 3-node rqlite cluster")
            cluster = stack.enter_context(running_cluster(root / "cluster"))
            url = cluster.url
            if options.cut.every is not None:
                partition = Partition([node.http_port for node in cluster.nodes], options.cut_mode)
                stack.callback(partition.close)
                partition.start()
        else:
            url = f"sqlite://{root / 'taskq.db'}"
        client = stack.enter_context(Client(url, submitter="chaos"))  # migrates the store
        # After the verdict: whatever is left, by pid (the workers' children, then the rest).
        stack.callback(kill_leftovers, run_id, ledger)
        config = write_worker_config(root / "worker.toml", options)
        fleet = Fleet(root, url, config, options.workers, run_id, partition, say)
        stack.callback(fleet.sweep)
        background = Background(url, ledger, options, say)
        stack.callback(background.join)
        say(f"starting {options.workers} workers x {options.concurrency}")
        for slot in range(options.workers):
            fleet.start(slot)
        for worker in fleet.current:
            assert worker is not None
            worker.wait_for_event("worker_started", timeout=60)
        chaos = Chaos(options, fleet, background, cluster, partition, origin, say)
        span = 2.0 if options.quick else 0.6 * options.duration
        say(
            f"submitting {len(plans)} jobs and {len(workflows)} workflows of {in_workflows} "
            f"jobs (and {spawned} they spawn) over {span:g} s (the workflows over "
            f"{options.workflow_span or span:g} s); "
            f"chaos for up to {options.duration:g} s"
        )
        background.spawn(
            "submit", lambda: background.submit(plans, span, workflows, options.workflow_span)
        )
        background.spawn("watch", background.watch)
        if cluster is not None:
            background.spawn("probe", background.probe)
        next_note = 0.0

        total = len(plans) + in_workflows + spawned

        def all_done() -> bool:
            # The store counts the spawned jobs among the finished ones: they must be waited for.
            to_finish = len(background.submitted) + to_be_spawned(workflows, background.submitted)
            return background.submitting_done.is_set() and background.finished >= to_finish

        try:
            while time.monotonic() - chaos.start < options.duration:
                if all_done() and chaos.finished_firing:
                    break
                chaos.tick()
                if time.monotonic() > next_note:
                    say(f"{background.finished} of {total} jobs finished")
                    next_note = time.monotonic() + 10
                time.sleep(0.05)
        finally:
            chaos.undo_all()
        chaos_ended = time.time()  # on the store's clock too: it parts the chaos from the drain
        report["chaos_seconds"] = round(time.monotonic() - chaos.start, 1)
        say(f"chaos over; draining ({background.finished} of {total} jobs finished)")
        background.phase = "drain"
        drained = time.monotonic()
        while not all_done() and time.monotonic() - drained < options.drain_timeout:
            fleet.restart_exited()
            if time.monotonic() > next_note:
                say(f"{background.finished} of {total} jobs finished")
                next_note = time.monotonic() + 10
            time.sleep(0.2)
        report["drain_seconds"] = round(time.monotonic() - drained, 1)
        report["most_running"] = {
            **background.most_running,
            "slots": options.workers * options.concurrency,
        }
        background.join()
        say("stopping the workers (SIGTERM)")
        fleet.terminate(timeout=30)
        # Whatever this run started must be gone a lease (and some) after the workers.
        runs = chaos_ledger.read_ledger(ledger)
        settle_end = time.monotonic() + options.lease_seconds + 5
        while chaos_verdict.run_processes(run_id, runs) and time.monotonic() < settle_end:
            time.sleep(0.2)
        left = chaos_verdict.run_processes(run_id, runs)
        say("reading the verdict")
        verdict = read_verdict(
            client.store, background.submitted, ledger, options.tolerance, origin, workflows,
            chaos_ended,
        )  # fmt: skip
        verdict["left_behind"] = len(left)
        verdict["unsubmitted"] = len(background.unsubmitted)
        verdict["examples"]["left_behind"] = {str(pid): line for pid, line in left.items()}
        report["verdict"] = verdict
        report["actions"] = dict(chaos.counts)
        report["action_log"] = chaos.log
        report["worker_exits"] = fleet.exits
        report["worker_events"] = dict(fleet.event_counts())
        if partition is not None:
            relay = partition.relay
            report["link"] = {"relayed": relay.relayed, "dropped": relay.dropped,
                              "refused": relay.refused, "mode": relay.mode}  # fmt: skip
        report["unavailability"] = chaos_verdict.unavailability(
            chaos.leader_kills, chaos.leaders_reported, background.probes
        )
        verdict["workflows"] |= chaos_workflow_verdict.submissions(
            background.workflow_submits, chaos.leader_kills,
            report["unavailability"]["seconds"], background.workflows_resent,
        )  # fmt: skip
    report["seconds"] = round(time.monotonic() - began, 1)
    report["violations"] = chaos_verdict.violations(report)
    return report


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# -- the command ----------------------------------------------------------------------------


def parse_options(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--store", choices=["embedded", "rqlite"], default="embedded")
    add("--quick", action="store_true", help="the test suite's short run")
    add("--jobs", type=int, help="jobs in all, long ones included")
    add("--long-jobs", type=int, help="jobs of tens of seconds among them")
    add("--long-seconds", type=float, nargs=2, metavar=("MIN", "MAX"))
    add("--workflows", type=int, help="workflows besides the jobs (fan-ins, chains, diamonds)")
    add("--fan-in-width", type=int, nargs=2, metavar=("MIN", "MAX"), help="parents of a fan-in")
    add("--workers", type=int)
    add("--concurrency", type=int, help="slots per worker")
    add("--duration", type=float, help="most seconds of chaos (it ends sooner when all is done)")
    add("--drain-timeout", type=float, help="most seconds to wait for the jobs after the chaos")
    add("--seed", type=int)
    add("--lease-seconds", type=float)
    add("--cut-mode", choices=CUT_MODES)
    for name in ("leader-kills", "worker-kills", "stops", "cuts"):
        add(f"--no-{name}", action="store_true")
    add("--keep", type=Path, metavar="DIR", help="run in DIR and keep it")
    add("--json", type=Path, dest="json_path", metavar="FILE")
    args = parser.parse_args(argv)
    changes: dict[str, Any] = {
        name: getattr(args, name)
        for name in ("jobs", "long_jobs", "workflows", "workers", "concurrency", "duration",
                     "drain_timeout", "seed", "lease_seconds", "cut_mode", "keep", "json_path")
        if getattr(args, name) is not None
    }  # fmt: skip
    if args.lease_seconds is not None:  # heartbeats and margin in the proportions of 6, 1, 1.5
        changes["heartbeat_seconds"] = args.lease_seconds / 6
        changes["lease_margin_seconds"] = args.lease_seconds / 4
    if args.long_seconds:
        changes["long_seconds"] = tuple(args.long_seconds)
    if args.fan_in_width:
        changes["fan_in_width"] = tuple(args.fan_in_width)
    for fault in ("leader_kill", "worker_kill", "stop", "cut"):
        if getattr(args, f"no_{fault}s"):
            changes[fault] = Fault(None)
    options = replace(preset(args.store, args.quick), **changes)
    if options.long_jobs > options.jobs:
        parser.error("--long-jobs must not exceed --jobs")
    if options.workflows < 0 or not 1 <= options.fan_in_width[0] <= options.fan_in_width[1]:
        parser.error("--workflows must be 0 or more, --fan-in-width MIN MAX with 1 <= MIN <= MAX")
    return options


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so that every process started is stopped by pid."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    root = options.keep or Path(tempfile.mkdtemp(prefix="taskq-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        report = run(options, root)
    except BaseException:
        say(f"the run failed; its directory is kept: {root}")
        raise
    print(chaos_verdict.summary(report))
    if options.json_path is not None:
        options.json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if report["violations"] and options.keep is None:
        say(f"targets missed: the run's directory (ledger, logs) is kept: {root}")
    elif options.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
