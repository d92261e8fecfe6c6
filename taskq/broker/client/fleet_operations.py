"""Requests about queues and their limits, the workers and the store (see :mod:`.operations`)."""

from __future__ import annotations

import builtins
from typing import Any

from taskq.broker.client import http_fleet_plans
from taskq.broker.client.client_base import ClientBase
from taskq.broker.client.faces import Operation, over_http
from taskq.broker.client.group_commit import GroupOp
from taskq.broker.ops.functions import DeclaredFunction, function_list, queue_served_list
from taskq.broker.ops.jobs import (
    ExecutionStats,
    ThroughputBucket,
    execution_stats,
    execution_throughput,
)
from taskq.broker.ops.maintenance import Pruner
from taskq.broker.ops.migrations import schema_version
from taskq.broker.ops.plan import Op
from taskq.broker.ops.queues import (
    KEEP,
    Keep,
    SubmitLimit,
    job_counts,
    queue_set_defaults,
    queue_set_limits,
    queue_set_paused,
    submit_limit_list,
    submit_limit_remove,
    submit_limit_set,
)
from taskq.broker.ops.retention import retention_get, retention_set
from taskq.broker.ops.workers import worker_list
from taskq.broker.records import (
    QueueStats,
    Retention,
    WorkerInfo,
)
from taskq.retry import RetryPolicy


class FleetOperations(ClientBase):
    """The requests about queues, workers and the store, each as the plan of its answer."""

    # -- queues and limits ----------------------------------------------------------

    @over_http(http_fleet_plans.queue_stats)
    def stats(self) -> GroupOp[builtins.list[QueueStats]]:
        """Every queue: its counts per state, whether it is paused, its limits."""
        return job_counts()

    @over_http(http_fleet_plans.queue_pause)
    def pause(self, queue: str, *, create: bool = False) -> GroupOp[None]:
        """Stop workers from claiming the queue's jobs.

        A queue without jobs or settings is refused (a misspelt name would
        become a new paused queue) unless ``create``: to pause it ahead of its
        first job.
        """
        return queue_set_paused(queue, True, create=create)

    @over_http(http_fleet_plans.queue_resume)
    def resume(self, queue: str, *, create: bool = False) -> GroupOp[None]:
        """Let workers claim the queue's jobs again (unknown queues as for :meth:`pause`)."""
        return queue_set_paused(queue, False, create=create)

    @over_http(http_fleet_plans.queue_set_limits)
    def set_queue_limits(
        self,
        queue: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate_limit: float | Keep | None = KEEP,
        rate_period: float = 1.0,
        create: bool = False,
    ) -> GroupOp[None]:
        """Cap a queue cluster-wide: ``max_running`` at once, ``rate_limit`` starts a period.

        ``None`` lifts a limit; one not given stays as it is. A queue without
        jobs or settings is refused (a misspelt name) unless ``create``.
        """
        return queue_set_limits(
            queue,
            max_running=max_running,
            rate_limit=rate_limit,
            rate_period=rate_period,
            create=create,
        )

    @Operation
    def set_queue_defaults(
        self,
        queue: str,
        *,
        timeout: float | Keep | None = KEEP,
        max_attempts: int | Keep | None = KEEP,
        limits: dict[str, Any] | Keep | None = KEEP,
        retry: RetryPolicy | dict[str, Any] | Keep | None = KEEP,
        create: bool = False,
    ) -> GroupOp[None]:
        """Set what the queue's jobs get when they say none: applied by every enqueue.

        ``None`` lifts a default; one not given stays. ``limits`` merge name by
        name (a limit given as None is lifted). Read them back in
        :meth:`stats` (``job_defaults``). A queue without jobs or settings is
        refused unless ``create``.
        """
        return queue_set_defaults(
            queue,
            timeout=timeout,
            max_attempts=max_attempts,
            limits=limits,
            retry=retry,
            create=create,
        )

    @over_http(http_fleet_plans.submit_limit_set)
    def set_submit_limit(self, submitter: str, rate: float, period: float) -> GroupOp[None]:
        """Let ``submitter`` ("*": all without a limit of their own) submit ``rate`` a period."""
        return submit_limit_set(submitter, rate, period)

    @over_http(http_fleet_plans.submit_limit_remove)
    def remove_submit_limit(self, submitter: str) -> GroupOp[None]:
        """Lift a submitter's own limit (the "*" limit, if any, applies again)."""
        return submit_limit_remove(submitter)

    @over_http(http_fleet_plans.submit_limit_list)
    def submit_limits(self) -> GroupOp[builtins.list[SubmitLimit]]:
        """Every submitter's limit, "*" (everyone else) included."""
        return submit_limit_list()

    # -- the fleet and the store ------------------------------------------------------

    @over_http(http_fleet_plans.worker_list)
    def workers(self) -> GroupOp[builtins.list[WorkerInfo]]:
        """Every registered worker, stopped ones included."""
        return worker_list()

    @over_http(http_fleet_plans.function_list)
    def functions(self) -> GroupOp[builtins.list[DeclaredFunction]]:
        """Every job workers have declared, by name: the version submits use, its live workers."""
        return function_list()

    @over_http(http_fleet_plans.queue_served_list)
    def served_queues(self) -> GroupOp[set[str]]:
        """The queues at least one live worker takes jobs from."""
        return queue_served_list()

    @over_http(http_fleet_plans.store_schema_version)
    def schema_version(self) -> GroupOp[int]:
        """The newest schema migration the store has (any node's copy; 0: none)."""
        return schema_version()

    @over_http(http_fleet_plans.store_throughput)
    def throughput(
        self, *, minutes: int = 15, now: float | None = None
    ) -> GroupOp[builtins.list[ThroughputBucket]]:
        """Finished attempts per minute, oldest first, back from ``now`` (the store's clock)."""
        return execution_throughput(minutes=minutes, now=now)

    @Operation
    def execution_stats(self) -> GroupOp[ExecutionStats]:
        """The store's totals: attempts' run time by outcome, jobs' pickup latency."""
        return execution_stats()

    @over_http(http_fleet_plans.store_prune)
    def prune(self, *, older_than: float | None = None) -> GroupOp[int]:
        """Delete jobs finished more than ``older_than`` seconds ago (default: past the
        store's :meth:`retention`, as maintenance does); how many went."""
        pruner = Pruner(retention_seconds=older_than)  # checked now, before any request
        return _prune_batches(pruner)

    @over_http(http_fleet_plans.retention_get)
    def retention(self) -> GroupOp[Retention]:
        """How long the store keeps finished jobs before maintenance prunes them."""
        return retention_get()

    @over_http(http_fleet_plans.retention_set)
    def set_retention(
        self,
        *,
        succeeded: float | Keep | None = KEEP,
        failed: float | Keep | None = KEEP,
    ) -> GroupOp[Retention]:
        """Keep succeeded jobs, and failed, dead or cancelled ones, this many seconds
        after they end (``None``: until pruned by hand; one not given stays); the
        retention now. Every worker's maintenance prunes by it."""
        return retention_set(succeeded_seconds=succeeded, failed_seconds=failed)


def _prune_batches(pruner: Pruner) -> Op[int]:
    """Batch after batch, so that no one request deletes an unbounded number of rows."""
    pruned = 0
    while True:
        batch = (yield from pruner.plan_once())["pruned"]
        pruned += batch
        if batch < pruner.batch:
            return pruned
