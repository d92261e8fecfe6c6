"""``GET /metrics``: Prometheus families computed from the store at each scrape.

Where the store is the truth (jobs per queue and state, finished attempts by
outcome with their run time, pickup latency, workers by state, the store's
nodes and leader) the numbers are read from it at each scrape, so every
server behind a load balancer reports the same values. Only what is this
process's by nature is counted here: the submissions it refused.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from taskq import errors
from taskq.broker.client.client import AsyncClient, ExecutionStats, Histogram
from taskq.broker.records import JobState, QueueStats, WorkerInfo
from taskq.broker.stores.store import NodeInfo

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Snapshot(msgspec.Struct, frozen=True):
    """What one scrape read from the store (None where the store did not answer)."""

    queues: list[QueueStats] | None
    workers: list[WorkerInfo] | None
    executions: ExecutionStats | None
    nodes: list[NodeInfo] | None


async def snapshot(client: AsyncClient) -> Snapshot:
    """Read everything a scrape reports; a store that does not answer leaves its part out."""
    try:
        nodes = await client.nodes()
    except errors.StoreError:
        nodes = None
    try:
        return Snapshot(
            await client.stats(), await client.workers(), await client.execution_stats(), nodes
        )
    except errors.StoreError:
        return Snapshot(None, None, None, nodes)


def _histogram(family: HistogramMetricFamily, labels: list[str], seen: Histogram) -> None:
    cumulative = 0
    buckets: list[tuple[str, float]] = []
    for bound, count in seen.buckets.items():
        cumulative += count
        buckets.append(("+Inf" if bound is None else repr(bound), cumulative))
    family.add_metric(labels, buckets, seen.sum)


class _StoreCollector(Collector):
    def __init__(self, seen: Snapshot) -> None:
        self.seen = seen

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        seen = self.seen
        answered = seen.queues is not None
        yield GaugeMetricFamily(
            "taskq_store_up", "1 when the store answered this scrape's reads", value=answered
        )
        if seen.nodes is not None:
            yield from self._nodes(seen.nodes)
        if seen.queues is not None:
            yield from self._queues(seen.queues)
        if seen.workers is not None:
            workers = GaugeMetricFamily(
                "taskq_workers", "Registered workers by state", labels=["state"]
            )
            by_state: dict[str, int] = {"active": 0, "draining": 0, "lost": 0, "stopped": 0}
            for worker in seen.workers:
                by_state[worker.state] = by_state.get(worker.state, 0) + 1
            for state, count in sorted(by_state.items()):
                workers.add_metric([state], count)
            yield workers
        if seen.executions is not None:
            yield from self._executions(seen.executions)

    def _nodes(self, nodes: list[NodeInfo]) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("taskq_store_node_up", "1 when the node answered", labels=["node"])
        leader = GaugeMetricFamily(
            "taskq_store_node_leader", "1 for the node that leads", labels=["node"]
        )
        for node in nodes:
            up.add_metric([node.address], node.reachable)
            leader.add_metric([node.address], node.leader)
        yield up
        yield leader
        yield GaugeMetricFamily(
            "taskq_store_leader_known",
            "1 when a reachable node leads",
            value=any(node.leader and node.reachable for node in nodes),
        )

    def _queues(self, queues: list[QueueStats]) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily("taskq_jobs", "Jobs by queue and state", labels=["queue", "state"])
        paused = GaugeMetricFamily("taskq_queue_paused", "1 when paused", labels=["queue"])
        for stats in queues:
            for state in JobState:
                jobs.add_metric([stats.queue, state.value], stats.counts.get(state, 0))
            paused.add_metric([stats.queue], stats.paused)
        yield jobs
        yield paused

    def _executions(
        self, executions: ExecutionStats
    ) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        finished = CounterMetricFamily(
            "taskq_attempts_finished",
            "Finished attempts by outcome (the store's count: pruning lowers it)",
            labels=["outcome"],
        )
        run = HistogramMetricFamily(
            "taskq_attempt_run_seconds", "Run time of finished attempts", labels=["outcome"]
        )
        for outcome, seen in sorted(executions.run_seconds.items()):
            finished.add_metric([outcome], seen.count)
            _histogram(run, [outcome], seen)
        pickup = HistogramMetricFamily(
            "taskq_job_pickup_seconds", "How long a started job waited once it was due"
        )
        _histogram(pickup, [], executions.pickup_seconds)
        yield finished
        yield run
        yield pickup


class ServerMetrics:
    """This process's own counters, and the exposition of a scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._refused = Counter(
            "taskq_server_submit_refusals",
            "Submissions this server refused for the submitter's rate limit",
            ["submitter"],
            registry=self.registry,
        )

    def rate_limited(self, submitter: str) -> None:
        self._refused.labels(submitter).inc()

    def exposition(self, seen: Snapshot) -> bytes:
        """The text format of the store's families and this process's counters."""
        scrape = CollectorRegistry(auto_describe=False)
        scrape.register(_StoreCollector(seen))
        return generate_latest(scrape) + generate_latest(self.registry)
