"""The console's data source: snapshots of the store, and the actions it offers.

Everything here goes through the public :class:`taskq.broker.client.client.AsyncClient`,
never an operation or SQL of its own, so the console works alike on a store and over a
``taskq serve``. The app is handed a :class:`ConsoleSource`, so tests drive the real app
over a real store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from taskq import errors
from taskq.app.job_family import JobFamily, family_of
from taskq.broker.client.client import (
    AsyncClient,
    CancelResult,
    DeclaredFunction,
    JobQuery,
    ThroughputBucket,
)
from taskq.broker.records import (
    Execution,
    Job,
    JobSpec,
    JobState,
    QueueStats,
    WorkerInfo,
    WorkflowInfo,
    WorkflowStatus,
)
from taskq.broker.stores.sqlite_store import EMBEDDED_NODE_ID
from taskq.broker.stores.store import NodeInfo
from taskq.broker.stores.store_url import mask_password

# What each bulk action can move: job_cancel leaves other states alone, and
# job_retry only takes finished jobs that did not succeed. Bulk actions list
# just these states, each through its (state, id) index.
CANCELLABLE = (JobState.QUEUED, JobState.RUNNING)
RETRYABLE = (JobState.FAILED, JobState.DEAD, JobState.CANCELLED)

# What a read or an action of the console may meet that is no fault of its own: the
# store's trouble, or, over a taskq serve, the server's verdict on the token.
SOURCE_ERRORS = (errors.StoreError, errors.Unauthorized, errors.Forbidden)

_BULK_BATCH = 1000  # the most job_list returns in one page
_RUNNING_SHOWN = 1000  # running jobs read per poll to show each worker's current jobs


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs the jobs view lists; ``None`` fields do not filter."""

    state: JobState | None = None
    queue: str | None = None
    worker_id: str | None = None
    text: str | None = None
    workflow_id: int | None = None

    @property
    def empty(self) -> bool:
        return self == JobFilter()


@dataclass(frozen=True, slots=True)
class Activity:
    """What the queues and workers are doing, read in one poll."""

    queues: tuple[QueueStats, ...]
    workers: tuple[WorkerInfo, ...]
    throughput: tuple[ThroughputBucket, ...]
    running: dict[str, tuple[int, ...]]  # worker id -> ids of the jobs it runs now
    # The queues some live worker takes jobs from (None: not read), to flag the others.
    served: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Overview:
    """One poll of the whole store: its nodes always, its activity when it answered."""

    url: str
    embedded: bool
    nodes: tuple[NodeInfo, ...]
    activity: Activity | None
    error: str | None

    @property
    def leader(self) -> NodeInfo | None:
        return next((node for node in self.nodes if node.leader), None)

    @property
    def problem(self) -> str | None:
        """Why the console cannot trust what it shows, or None when all is well."""
        if self.error is not None:
            return self.error
        if self.leader is None:
            reachable = sum(node.reachable for node in self.nodes)
            return (
                f"no leader: {reachable} of {len(self.nodes)} nodes reachable; "
                "writes wait for an election"
            )
        return None


@dataclass(frozen=True, slots=True)
class JobPage:
    """One keyset page of jobs, newest first, and the query that produced it."""

    job_filter: JobFilter
    before: int | None
    jobs: tuple[Job, ...]
    has_more: bool


@dataclass(frozen=True, slots=True)
class WorkflowPage:
    """One keyset page of workflows, newest first (of one status, when ``status``)."""

    before: int | None
    status: WorkflowStatus | None
    workflows: tuple[WorkflowInfo, ...]
    has_more: bool


@dataclass(frozen=True, slots=True)
class JobDetail:
    """A job and every attempt at it, oldest first, and its workflow, parents and children."""

    job: Job
    executions: tuple[Execution, ...]
    family: JobFamily = field(default_factory=JobFamily)


@dataclass(frozen=True, slots=True)
class BulkResult:
    """How many jobs a bulk action found and how many it moved."""

    matched: int
    changed: int


def describe_error(exc: errors.TaskqError) -> str:
    """One line for the banner: what failed, in the store's (or the server's) own words."""
    if isinstance(exc, errors.StoreUnavailable | errors.OutcomeUnknown):
        return f"store unreachable: {exc}"
    if isinstance(exc, errors.Unauthorized | errors.Forbidden):
        return f"refused by the server: {exc}"
    return f"store error: {exc}"


class ConsoleSource:
    """Reads snapshots for the console and carries out its actions, all awaitable."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        throughput_minutes: int = 15,
        page_size: int = 100,
        store_now: Callable[[], float] | None = None,
    ):
        """``client``: on a store (made with ``import_names=False``: the console submits
        only what workers declare) or over a taskq serve. ``store_now`` fixes the time
        throughput counts back from (tests); else the store's."""
        self.client = client
        self.throughput_minutes = throughput_minutes
        self.page_size = page_size
        self.store_now = store_now

    @property
    def url(self) -> str:
        if self.client.http is not None:
            return mask_password(self.client.http.url)
        return self.client.store.url

    async def nodes(self) -> list[NodeInfo]:
        """The store's members; an embedded store describes itself in a thread."""
        return await self.client.nodes()

    async def overview(self) -> Overview:
        """Nodes, then queue counts, workers and throughput; an error is reported in it.

        A store describes its nodes even when none answers; a taskq serve that
        does not answer, or refuses the token, has none to show.
        """
        nodes: list[NodeInfo] = []
        activity: Activity | None = None
        error: str | None = None
        try:
            nodes = await self.nodes()
            activity = await self.activity()
        except SOURCE_ERRORS as exc:
            error = describe_error(exc)
        return Overview(
            url=self.url,
            # Known by its nodes: a taskq serve's URL does not say what it serves.
            embedded=[node.id for node in nodes] == [EMBEDDED_NODE_ID],
            nodes=tuple(nodes),
            activity=activity,
            error=error,
        )

    async def activity(self) -> Activity:
        """Counts per queue, the workers, the jobs they run, and finished attempts per minute."""
        queues = await self.client.stats()
        workers = await self.client.workers()
        running_jobs = await self.client.list(
            JobQuery(state=JobState.RUNNING, limit=_RUNNING_SHOWN)
        )
        throughput = await self.client.throughput(
            minutes=self.throughput_minutes,
            now=self.store_now() if self.store_now is not None else None,
        )
        running: dict[str, list[int]] = {}
        for job in running_jobs:
            if job.worker_id is not None:
                running.setdefault(job.worker_id, []).append(job.id)
        return Activity(
            queues=tuple(queues),
            workers=tuple(workers),
            throughput=tuple(throughput),
            running={worker: tuple(sorted(ids)) for worker, ids in running.items()},
            served=frozenset(await self.client.served_queues()),
        )

    async def job_page(self, job_filter: JobFilter, *, before: int | None = None) -> JobPage:
        """The page of jobs after keyset ``before`` (the last id of the previous page)."""
        # One row more than shown tells whether a next page exists.
        jobs = await self._list(job_filter, job_filter.state, before, self.page_size + 1)
        return JobPage(
            job_filter=job_filter,
            before=before,
            jobs=tuple(jobs[: self.page_size]),
            has_more=len(jobs) > self.page_size,
        )

    async def workflow_page(
        self, *, before: int | None = None, status: WorkflowStatus | None = None
    ) -> WorkflowPage:
        """The page of workflows after keyset ``before`` (in ``status``, if given), each
        with its jobs' counts."""
        found = await self.client.workflows(before=before, status=status, limit=self.page_size + 1)
        return WorkflowPage(
            before=before,
            status=status,
            workflows=tuple(found[: self.page_size]),
            has_more=len(found) > self.page_size,
        )

    async def job_detail(self, job_id: int) -> JobDetail | None:
        """The job and its attempts, or None when no job has that id (pruned)."""
        try:
            job = await self.client.get(job_id)
            executions = await self.client.executions(job_id)
            family = await family_of(self.client, job)
        except errors.JobNotFound:  # pruned, before these reads or between them
            return None
        return JobDetail(job=job, executions=tuple(executions), family=family)

    async def cancel(self, job_ids: Sequence[int]) -> CancelResult:
        """Cancel queued jobs now; ask running ones to stop at their next heartbeat."""
        return await self.client.cancel(*job_ids)

    async def retry(self, job_ids: Sequence[int]) -> list[int]:
        """Queue failed, dead or cancelled jobs again; the ids that moved."""
        return await self.client.retry(*job_ids)

    async def set_paused(self, queue: str, paused: bool) -> None:
        """Pause a queue (claims skip it) or resume it."""
        if paused:
            await self.client.pause(queue)
        else:
            await self.client.resume(queue)

    async def functions(self) -> list[DeclaredFunction]:
        """The jobs workers declare, for the submit form to offer."""
        return await self.client.functions()

    async def submit(self, spec: JobSpec) -> int:
        """Enqueue one job; its id."""
        return (await self.client.submit_spec(spec)).id

    async def cancel_matching(self, job_filter: JobFilter) -> BulkResult:
        """Cancel every queued or running job the filter matches, a page at a time."""
        matched = changed = 0
        for state in _states(job_filter, CANCELLABLE):
            async for ids in self._pages(job_filter, state):
                result = await self.cancel(ids)
                matched += len(ids)
                changed += len(result.cancelled) + len(result.requested)
        return BulkResult(matched=matched, changed=changed)

    async def retry_matching(self, job_filter: JobFilter) -> BulkResult:
        """Retry every failed, dead or cancelled job the filter matches, a page at a time."""
        matched = changed = 0
        for state in _states(job_filter, RETRYABLE):
            async for ids in self._pages(job_filter, state):
                matched += len(ids)
                changed += len(await self.retry(ids))
        return BulkResult(matched=matched, changed=changed)

    async def _pages(self, job_filter: JobFilter, state: JobState) -> AsyncIterator[list[int]]:
        """The ids of the matching jobs in ``state``, newest first, a batch at a time."""
        before: int | None = None
        while True:
            jobs = await self._list(job_filter, state, before, _BULK_BATCH)
            if not jobs:
                return
            yield [job.id for job in jobs]
            if len(jobs) < _BULK_BATCH:
                return
            before = jobs[-1].id

    async def _list(
        self, job_filter: JobFilter, state: JobState | None, before: int | None, limit: int
    ) -> list[Job]:
        return await self.client.list(
            JobQuery(
                state=state,
                queue=job_filter.queue,
                worker_id=job_filter.worker_id,
                text=job_filter.text,
                workflow_id=job_filter.workflow_id,
                before=before,
                limit=limit,
            )
        )


def _states(job_filter: JobFilter, movable: tuple[JobState, ...]) -> tuple[JobState, ...]:
    if job_filter.state is None:
        return movable
    return (job_filter.state,) if job_filter.state in movable else ()
