"""Submitting over HTTP against the Python client, side by side on the same store.

For each store (a fresh SQLite file; a 3-node rqlite cluster on loopback) it
starts one real ``taskq serve`` (uvicorn, one process) and measures jobs/s of:

1. the Python client, one ``submit`` per job, then ``submit_many`` of ``--batch``;
2. ``POST /jobs`` one job per request over one keep-alive connection, then
   from ``--connections`` threads at once (a server answers requests
   concurrently, a script alone does not), then arrays of ``--batch`` jobs;
3. ``taskq.Client`` over HTTP (the server's URL): ``submit`` and ``submit_many``,
   and the latency of a finished job's result (``wait``), p50 in ms, against
   the same on the store;
4. the floor under any request, ``GET /healthz`` on one connection (p50 ms),
   and ``POST /jobs`` one per request against ``Client.submit`` (a ratio);
5. the server's own share: its CPU per ``POST /jobs`` (the store write
   included), and the floor and ``POST /jobs`` again from ``http.client`` (the
   standard library), whose requests cost a fraction of httpx's, so what
   remains of the floor is the server's;
6. the floor under every server, a loopback TCP round trip to a process that
   only echoes (``socket_floor``), and the ratio it leaves within reach.

Each HTTP request carries a bearer token, so the server checks it and names
the submitter, as in production. Every job lands in a queue no worker
serves: only the submit path is timed.

    .venv/bin/python -m bench.http [--stores sqlite,rqlite] [--jobs 2000] [--batch 500]
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bench import socket_floor
from bench.common import Result, percentile, process_cpu, say
from bench.stores import open_bench_store
from taskq.broker.client.client import Client, call_spec
from taskq.dev.server import running_server, token_of, write_server_config

TARGET = "bench.jobs:echo"


def _rate(count: int, work: Callable[[], None]) -> float:
    started = time.perf_counter()
    work()
    return count / (time.perf_counter() - started)


def _posted(answer: httpx.Response) -> None:
    if answer.status_code != 201:
        raise RuntimeError(f"POST /jobs answered {answer.status_code}: {answer.text}")


def _bare_answer(connection: http.client.HTTPConnection, expected: int) -> None:
    answer = connection.getresponse()
    text = answer.read()
    if answer.status != expected:
        raise RuntimeError(f"answered {answer.status}: {text!r}")


def measure(store_name: str, root: Path, jobs: int, batch: int, connections: int) -> list[Result]:
    """The rates, the floor and the ratio on one fresh store of kind ``store_name``."""
    results: list[Result] = []

    def add(key: str, rate: float, note: str) -> None:
        results.append(Result(store_name, key, rate, "jobs/s", note))
        say(f"{store_name} {key}: {rate:,.0f} jobs/s ({note})")

    config = write_server_config(root / "server.toml", {"bench": ["submit", "read"]})
    with (
        open_bench_store(store_name, root) as store,
        Client(store.url, submitter="bench") as client,
        running_server(store.url, config, root / "serve.log") as server,
        server.client("bench") as http,
        Client(server.url, token=token_of("bench")) as remote,
    ):

        def client_single() -> None:
            for n in range(jobs):
                client.submit(TARGET, n, queue="bench-client", unchecked=True)

        def client_batched() -> None:
            for first in range(0, jobs, batch):
                client.submit_many(
                    [
                        call_spec(TARGET, [n], queue="bench-client")
                        for n in range(first, first + batch)
                    ]
                )

        def http_single() -> None:
            for n in range(jobs):
                _posted(
                    http.post(
                        "/jobs",
                        json={
                            "target": TARGET,
                            "args": [n],
                            "queue": "bench-http",
                            "unchecked": True,
                        },
                    )
                )

        def http_concurrent() -> None:
            def post_share(share: int) -> None:
                with server.client("bench") as own:
                    for n in range(share, jobs, connections):
                        body = {
                            "target": TARGET,
                            "args": [n],
                            "queue": "bench-http",
                            "unchecked": True,
                        }
                        _posted(own.post("/jobs", json=body))

            with ThreadPoolExecutor(connections) as pool:
                list(pool.map(post_share, range(connections)))

        def http_batched() -> None:
            for first in range(0, jobs, batch):
                body = [
                    {"target": TARGET, "args": [n], "queue": "bench-http", "unchecked": True}
                    for n in range(first, first + batch)
                ]
                _posted(http.post("/jobs", json=body))

        def remote_single() -> None:
            for n in range(jobs):
                remote.submit(TARGET, n, queue="bench-remote", unchecked=True)

        def remote_batched() -> None:
            for first in range(0, jobs, batch):
                remote.submit_many(
                    [
                        call_spec(TARGET, [n], queue="bench-remote")
                        for n in range(first, first + batch)
                    ]
                )

        add("submit.client_single", _rate(jobs, client_single), f"{jobs:,} Client.submit calls")
        add(
            "submit.client_batched",
            _rate(jobs, client_batched),
            f"{jobs:,} jobs, submit_many of {batch:,}",
        )
        server_cpu = process_cpu(server.process.pid)
        add("submit.http_single", _rate(jobs, http_single), f"{jobs:,} POST /jobs, one connection")
        server_cpu = process_cpu(server.process.pid) - server_cpu
        add(
            "submit.http_single_concurrent",
            _rate(jobs, http_concurrent),
            f"{jobs:,} POST /jobs from {connections} connections at once",
        )
        add(
            "submit.http_batched",
            _rate(jobs, http_batched),
            f"{jobs:,} jobs, POST /jobs arrays of {batch:,}",
        )
        add(
            "submit.http_client_single",
            _rate(jobs, remote_single),
            f"{jobs:,} Client.submit calls over HTTP",
        )
        add(
            "submit.http_client_batched",
            _rate(jobs, remote_batched),
            f"{jobs:,} jobs, Client.submit_many of {batch:,} over HTTP",
        )
        # The floor under any request: a round trip to an answer that reads nothing.
        floor = _p50_ms(lambda: _answered(http.get("/healthz")), jobs)
        results.append(
            Result(store_name, "request.floor_ms", floor, "ms", "GET /healthz p50, one connection")
        )
        single = {result.key: result.value or math.nan for result in results}
        ratio = single["submit.http_single"] / single["submit.client_single"]
        results.append(
            Result(
                store_name,
                "ratio.http_vs_client_single",
                ratio,
                "ratio",
                "POST /jobs on one connection / Client.submit (issue 44: >= 0.8)",
            )
        )
        say(
            f"{store_name} request floor {floor:.2f} ms p50; "
            f"POST /jobs / Client.submit {ratio:.2f}x"
        )
        results.append(
            Result(
                store_name,
                "server.cpu_per_post_us",
                server_cpu / jobs * 1e6,
                "us",
                "taskq serve's CPU (all threads) per POST /jobs on one connection, "
                "the store write included",
            )
        )
        results += _bare_measures(store_name, server.url, jobs)
        bare = next(r.value for r in results if r.key == "submit.http_single_bare") or math.nan
        results.append(
            Result(
                store_name,
                "ratio.http_bare_vs_client_single",
                bare / single["submit.client_single"],
                "ratio",
                "POST /jobs on one connection from http.client / Client.submit: "
                "the same with a client whose own cost is small",
            )
        )
        results += _socket_floor(store_name, single["submit.client_single"], jobs)
        finished = client.submit(TARGET, queue="bench-ended", unchecked=True)
        client.cancel(finished.id)
        for key, who in (("result.client_ms", client), ("result.http_client_ms", remote)):
            latency = _p50_ms(functools.partial(finished_result_of, who, finished.id), 200)
            results.append(Result(store_name, key, latency, "ms", "p50 of 200 waits"))
            say(f"{store_name} {key}: {latency:.2f} ms p50")
    return results


def _socket_floor(store_name: str, client_rate: float, count: int) -> list[Result]:
    """The kernel's round trip under any request, and the ratio it leaves within reach."""
    floor = socket_floor.round_trip_ms(count)
    reachable = socket_floor.reachable_ratio(client_rate, floor)
    say(f"{store_name} socket round trip {floor:.3f} ms p50; within reach: {reachable:.2f}x")
    return [
        Result(
            store_name,
            "request.floor_socket_ms",
            floor,
            "ms",
            f"p50 of {count:,} round trips of {socket_floor.MESSAGE_BYTES} bytes to a process "
            "that only echoes, one loopback TCP connection",
        ),
        Result(
            store_name,
            "ratio.http_reachable",
            reachable,
            "ratio",
            "POST /jobs / Client.submit for a server that cost nothing: Client.submit's time "
            "over the same plus one socket round trip",
        ),
    ]


def _bare_measures(store_name: str, url: str, jobs: int) -> list[Result]:
    """The floor and POST /jobs from ``http.client``, one kept-alive connection."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port)
    headers = {
        "Authorization": f"Bearer {token_of('bench')}",
        "Content-Type": "application/json",
    }

    def healthz() -> None:
        connection.request("GET", "/healthz")
        _bare_answer(connection, 200)

    def post_single() -> None:
        for n in range(jobs):
            body = {"target": TARGET, "args": [n], "queue": "bench-bare", "unchecked": True}
            connection.request("POST", "/jobs", json.dumps(body).encode(), headers)
            _bare_answer(connection, 201)

    try:
        floor = _p50_ms(healthz, jobs)
        rate = _rate(jobs, post_single)
    finally:
        connection.close()
    say(f"{store_name} http.client: floor {floor:.2f} ms p50, POST /jobs {rate:,.0f} jobs/s")
    return [
        Result(
            store_name,
            "request.floor_bare_ms",
            floor,
            "ms",
            "GET /healthz p50, one connection, from http.client",
        ),
        Result(
            store_name,
            "submit.http_single_bare",
            rate,
            "jobs/s",
            f"{jobs:,} POST /jobs, one connection, from http.client",
        ),
    ]


def _answered(answer: httpx.Response) -> None:
    if answer.status_code != 200:
        raise RuntimeError(f"GET /healthz answered {answer.status_code}: {answer.text}")


def finished_result_of(client: Client, job_id: int) -> None:
    """Wait for a job that has ended: one read on the store, one long poll over HTTP."""
    client.wait(job_id, timeout=10)


def _p50_ms(call: Callable[[], None], count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return percentile(times, 0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http", description=__doc__)
    parser.add_argument("--stores", default="sqlite,rqlite", help="sqlite, rqlite or both")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per measure (default 2000)")
    parser.add_argument("--batch", type=int, default=500, help="jobs per batch (default 500)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent POSTs (default 8)")
    args = parser.parse_args(argv)
    results: list[Result] = []
    for name in args.stores.split(","):
        with tempfile.TemporaryDirectory(prefix=f"taskq-bench-http-{name}-") as root:
            results += measure(name, Path(root), args.jobs, args.batch, args.connections)
    print(f"{'store':8} {'measure':32} {'value':>10}  unit  note")
    for result in results:
        print(
            f"{result.store:8} {result.key:32} {result.value or 0:>10,.2f}  "
            f"{result.unit}  {result.note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
