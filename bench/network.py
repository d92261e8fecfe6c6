"""``python -m bench.network``: drain, submit and pickup across a LAN of namespaces, per round trip.

Three store nodes, ``--worker-hosts`` hosts of ``--per-host`` workers and a
client host, each in a network namespace of its own on one bridge
(:mod:`bench.netns`); every connection to a node crosses a forwarder that
adds the round trip being measured (:mod:`bench.network_cluster`). For each
``--latencies`` value (ms of round trip) the client host times single
submits, pickups by idle workers and a drain (:mod:`bench.network_probe`);
then, at ``--sustain-rtt``, it offers each of ``--rates`` jobs a second for
``--seconds``, while this process reads from ``/proc`` the CPU each part used.
Needs root (network namespaces); everything made is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import host_cpu
from bench.common import cpu_sample, process_cpu, say
from bench.disk import disk_probe
from bench.netns import Lan
from bench.network_cluster import NetworkCluster

_REPO = Path(__file__).resolve().parent.parent


def probe(cluster: NetworkCluster, *args: str, timeout: float = 600.0) -> dict[str, Any]:
    """Run :mod:`bench.network_probe` on the client host; its JSON answer."""
    argv = [sys.executable, "-m", "bench.network_probe", cluster.url, *args]
    done = subprocess.run(
        cluster.client.wrap(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=_REPO,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the client host's probe {args[0]} failed:\n{done.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def sustained(cluster: NetworkCluster, rate: float, seconds: float, disk: Path) -> dict[str, Any]:
    """One offered rate, with the CPU of the leader, the other nodes, workers, forwarders,
    and the disk's fsync time beside the Raft log's fsyncs (``disk``: the nodes' folder).

    Each node appends a Raft entry to its log with one fsync, so the share of a
    second the leader's disk spends in fsync is about entries/s x the fsync's
    time; the probe (:mod:`bench.disk`) times a like append while the window runs.
    """
    assert cluster.fleet is not None
    node_pids = {node.http: node.rqlited.pid for node in cluster.store}
    proxy_pids = [node.proxy.pid for node in cluster.store]
    workers = cluster.fleet.pids
    nodes_before = {address: process_cpu(pid) for address, pid in node_pids.items()}
    proxies_before = sum(process_cpu(pid) for pid in proxy_pids)
    workers_before = cpu_sample(workers, [])
    client_before = os.times()
    machine_before = host_cpu.read()
    with disk_probe(disk, interval=0.050) as fsyncs:
        answer = probe(cluster, "sustain", "--rate", str(rate), "--seconds", str(seconds))
    machine = host_cpu.shares(machine_before, host_cpu.read())
    wall = answer["window"]  # the CPU below also covers the wait for the backlog
    nodes = {
        address: process_cpu(pid) - nodes_before[address] for address, pid in node_pids.items()
    }
    leader = answer["leader"]
    used_workers = cpu_sample(workers, []).minus(workers_before)
    client = os.times()
    answer["cpu_seconds"] = {
        "leader_rqlited": round(nodes.get(leader, 0.0), 2),
        "follower_rqlited": round(sum(v for k, v in nodes.items() if k != leader), 2),
        "workers_and_sandboxes": round(
            used_workers.worker_main + used_workers.worker_threads + used_workers.sandboxes, 2
        ),
        "forwarders": round(sum(process_cpu(pid) for pid in proxy_pids) - proxies_before, 2),
        "client": round(
            client.children_user
            + client.children_system
            - client_before.children_user
            - client_before.children_system,
            2,
        ),
    }
    # Busy: neither idle nor waiting for the disk (the host's steal counts as busy).
    answer["machine_busy_fraction"] = (
        round(1 - machine["idle"] - machine["iowait"], 3) if machine else None
    )
    answer["leader_cpu_per_window_second"] = round(nodes.get(leader, 0.0) / wall, 2)
    disk_figures = fsyncs.summary()
    answer["disk"] = disk_figures
    answer["raft_fsync_share"] = round(
        answer["raft_entries_per_second"] * disk_figures["fsync_p50_ms"] / 1000, 3
    )
    return answer


def run(args: argparse.Namespace) -> dict[str, Any]:
    latencies = [float(value) for value in args.latencies.split(",")]
    rates = [float(value) for value in args.rates.split(",") if value]
    results: dict[str, Any] = {"latencies": {}, "sustained": []}
    root = Path(tempfile.mkdtemp(prefix="bench-network-"))
    with (
        Lan() as lan,
        NetworkCluster(
            lan,
            root,
            worker_hosts=args.worker_hosts,
            per_host=args.per_host,
            concurrency=args.concurrency,
        ) as cluster,
    ):
        say(f"LAN {lan.prefix}: 3 nodes, {args.worker_hosts} worker hosts, a client host")
        cluster.start_store()
        probe(cluster, "ready")
        cluster.start_workers()
        say(f"{len(cluster.fleet.workers if cluster.fleet else [])} workers started")
        for rtt in latencies:
            cluster.set_rtt(rtt)
            time.sleep(1.0)
            measured = probe(
                cluster, "measure", "--pickups", str(args.pickups), "--drain", str(args.drain)
            )
            results["latencies"][str(rtt)] = measured
            say(f"rtt {rtt} ms: {json.dumps(measured)}")
        cluster.set_rtt(args.sustain_rtt)
        for rate in rates:
            answer = sustained(cluster, rate, args.seconds, root)
            results["sustained"].append(answer)
            say(f"offered {rate}/s at {args.sustain_rtt} ms: {json.dumps(answer)}")
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        "| round trip | single submit p50 / p99 | pickup p50 / p99 | drain |",
        "| --- | --- | --- | --- |",
    ]
    for rtt, measured in results["latencies"].items():
        pick, drain = measured["pickup"], measured["drain"]
        lines.append(
            f"| {rtt} ms | {pick['submit_call_p50_ms']:.1f} / {pick['submit_call_p99_ms']:.1f} ms"
            f" | {pick['p50_ms']:.1f} / {pick['p99_ms']:.1f} ms"
            f" | {drain['per_second']:,.0f} jobs/s ({drain['jobs']} jobs) |"
        )
    lines += [
        "",
        "| offered | submitted | completed | backlog at end | latency p50 / p99 | Raft entries/s"
        " | leader CPU | fsync p50 / p99 | Raft fsync share | machine busy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run_ in results["sustained"]:
        lines.append(
            f"| {run_['offered_per_second']:.0f}/s | {run_['submitted_per_second']:.0f}/s"
            f" | {run_['completed_per_second']:.0f}/s | {run_['backlog_at_end']}"
            f" | {run_['latency_p50_ms']:.0f} / {run_['latency_p99_ms']:.0f} ms"
            f" | {run_['raft_entries_per_second']:.0f}"
            f" | {run_['leader_cpu_per_window_second']:.2f} cores"
            f" | {run_['disk']['fsync_p50_ms']:.2f} / {run_['disk']['fsync_p99_ms']:.2f} ms"
            f" | {run_['raft_fsync_share']:.1%}"
            f" | {run_['machine_busy_fraction']:.0%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", default="0,0.5,2,5", help="round trips to add, ms")
    parser.add_argument("--worker-hosts", type=int, default=6)
    parser.add_argument("--per-host", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2, help="slots per worker")
    parser.add_argument("--pickups", type=int, default=30)
    parser.add_argument("--drain", type=int, default=2000)
    parser.add_argument("--rates", default="250,500,1000,2000", help="offered jobs/s ('' for none)")
    parser.add_argument("--sustain-rtt", type=float, default=0.5, help="round trip for --rates")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path, help="write every figure here too")
    args = parser.parse_args(argv)
    results = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
