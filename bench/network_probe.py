"""The client host's side of ``bench.network``: run inside its namespace, prints one JSON line.

``python -m bench.network_probe STORE_URL ready|measure|sustain|check ...``,
run by :mod:`bench.network` and its acceptance test through ``ip netns exec``:
the client reaches the store across the bridge, through the nodes' delaying
forwarders, as the workers do. Its last stdout line is the JSON answer.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

from bench.common import finished_count, jobs_since, percentile, queue_counts, wait_until
from bench.end_to_end import enqueue_echo, pickup
from bench.network_cluster import QUEUE
from taskq.broker.client.client import Client, call_spec
from taskq.broker.records import JobState

ECHO = "bench.jobs:echo"


def ready(url: str, timeout: float) -> dict[str, Any]:
    """Wait until the store takes a write (its schema migrated): the cluster is up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Client(url) as client:
                queue_counts(client.store, QUEUE)
            return {"ready": True}
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def drain(client: Client, jobs: int) -> dict[str, Any]:
    """``jobs`` echo jobs submitted in batches of 1,000; first claim to last finish."""
    before = finished_count(client.store, QUEUE)
    first_id = enqueue_echo(client, QUEUE, 0, jobs)
    wait_until(
        lambda: finished_count(client.store, QUEUE) >= before + jobs,
        max(120.0, jobs / 10),
        f"draining {jobs} jobs",
    )
    found = list(jobs_since(client.store, QUEUE, first_id))
    starts = [job.started_at for job in found if job.started_at is not None]
    ends = [job.finished_at for job in found if job.finished_at is not None]
    seconds = max(ends) - min(starts)
    ok = sum(1 for job in found if job.state is JobState.SUCCEEDED)
    return {"jobs": jobs, "succeeded": ok, "seconds": seconds, "per_second": jobs / seconds}


def measure(url: str, pickups: int, drained: int) -> dict[str, Any]:
    """Single submits and pickups by idle workers, then a drain."""
    with Client(url) as client:
        picked = pickup(client, QUEUE, jobs=pickups, spacing=0.1, idle_first=1.0)
        return {"pickup": picked, "drain": drain(client, drained)}


def leader_raft(url: str) -> dict[str, Any]:
    """The leader's HTTP address and Raft applied index, from each node's ``/status``."""
    for address in url.removeprefix("rqlite://").split(","):
        try:
            with urllib.request.urlopen(f"http://{address}/status", timeout=5) as answer:
                status = json.load(answer)
        except OSError:
            continue
        raft = status["store"]["raft"]
        if raft.get("state") == "Leader":
            return {"leader": address, "applied_index": int(raft["applied_index"])}
    return {"leader": None, "applied_index": 0}


def sustain(url: str, rate: float, seconds: float) -> dict[str, Any]:
    """Submit at ``rate`` jobs a second for ``seconds`` while the workers drain: do they keep up?

    Every 10 ms tick the client submits the jobs due by then in one request,
    as :func:`bench.end_to_end.steady` does, so the client is not what bounds
    the rate. Completed: jobs finished inside the window. The backlog is what
    is still queued at its end; the run then waits for it to drain.
    """
    tick = 0.010
    with Client(url) as client:
        raft_before = leader_raft(url)
        started_wall = time.time()
        started = time.perf_counter()
        calls: list[float] = []
        submitted = 0
        while (elapsed := time.perf_counter() - started) < seconds:
            due = min(int(rate * elapsed) - submitted, 1000)
            if due > 0:
                specs = [
                    call_spec(ECHO, [n], queue=QUEUE) for n in range(submitted, submitted + due)
                ]
                begun = time.perf_counter()
                client.submit_many(specs)
                calls.append(time.perf_counter() - begun)
                submitted += due
            time.sleep(max(0.0, tick - (time.perf_counter() - started) % tick))
        ended_wall = time.time()
        raft_after = leader_raft(url)
        backlog = queue_counts(client.store, QUEUE)[JobState.QUEUED]
        wait_until(
            lambda: queue_counts(client.store, QUEUE)[JobState.QUEUED] == 0,
            300.0,
            "the sustained run's backlog",
            interval=0.2,
        )
        window = ended_wall - started_wall
        finished = [
            job
            for job in jobs_since(client.store, QUEUE, 0)
            if job.finished_at is not None and started_wall <= job.finished_at <= ended_wall
        ]
        latencies = [(job.finished_at or 0) - job.created_at for job in finished]
    entries = raft_after["applied_index"] - raft_before["applied_index"]
    return {
        "offered_per_second": rate,
        "submitted_per_second": submitted / window,
        "completed_per_second": len(finished) / window,
        "backlog_at_end": backlog,
        "submit_request_p50_ms": percentile([c * 1000 for c in calls], 0.5),
        "latency_p50_ms": percentile([s * 1000 for s in latencies], 0.5),
        "latency_p99_ms": percentile([s * 1000 for s in latencies], 0.99),
        "raft_entries_per_second": entries / window,
        "leader": raft_after["leader"],
        "window": window,
    }


def check(url: str, jobs: int, timeout: float) -> dict[str, Any]:
    """Submit ``jobs`` echo jobs, wait for all to finish: did each succeed once, rightly?"""
    with Client(url) as client:
        handles = [client.submit(ECHO, n, queue=QUEUE, unchecked=True) for n in range(jobs)]
        wait_until(
            lambda: finished_count(client.store, QUEUE) >= jobs, timeout, f"{jobs} jobs", 0.2
        )
        found = {job.id: job for job in jobs_since(client.store, QUEUE, handles[0].id)}
    once = [
        job.id
        for job in found.values()
        if job.state is JobState.SUCCEEDED
        and job.attempts == 1
        and job.result == job.payload["args"][0]
    ]
    return {
        "submitted": len(handles),
        "found": len(found),
        "succeeded_once": len(once),
        "workers": sorted({str(job.worker_id) for job in found.values()}),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("what", choices=["ready", "measure", "sustain", "check"])
    parser.add_argument("--pickups", type=int, default=30)
    parser.add_argument("--drain", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.what == "ready":
        answer = ready(args.url, args.timeout)
    elif args.what == "measure":
        answer = measure(args.url, args.pickups, args.drain)
    elif args.what == "sustain":
        answer = sustain(args.url, args.rate, args.seconds)
    else:
        answer = check(args.url, args.jobs, args.timeout)
    print(json.dumps(answer, default=str), flush=True)


if __name__ == "__main__":
    main()
