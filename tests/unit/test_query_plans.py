"""The plans SQLite picks for the hot path and the listings, on a store with no statistics.

taskq never runs ANALYZE, so the planner goes by the schema alone: these
pin the choices that keep a busy worker's statements proportional to the
jobs they name, and every listing on an index, however many jobs there are.
"""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskq.broker.ops import queries
from taskq.broker.ops.migrations import migrate
from taskq.broker.stores.sqlite_store import SqliteStore


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    store = SqliteStore(Path(tmp_path_factory.mktemp("plans")) / "plans.db")
    migrate(store)
    yield store
    store.close()


def _plan(store: SqliteStore, name: str) -> list[str]:
    sql = queries.query(name)
    if "{first_parents}" in sql:
        sql = sql.format(first_parents=queries.query("job_claim_first_parents"))
    return _plan_of(store, sql)


def _plan_of(store: SqliteStore, sql: str) -> list[str]:
    params = {param: None for param in re.findall(r":([a-z_0-9]+)", sql)}
    with store._lock:
        rows = store._conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    return [row["detail"] for row in rows]


@pytest.mark.parametrize("name", ["job_complete", "job_fail", "job_release"])
def test_reports_find_their_jobs_by_id(store: SqliteStore, name: str) -> None:
    sql = queries.query(name).format(
        job_report_end=queries.query("job_report_end"),
        job_fail_requeues=queries.query("job_fail_requeues"),
    )
    plan = _plan_of(store, sql)
    assert "SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan


@pytest.mark.parametrize(
    "name", ["execution_start", "job_heartbeat", "job_claimed_by_token", "queue_rate_spend"]
)
def test_one_workers_running_jobs_are_found_by_worker(store: SqliteStore, name: str) -> None:
    plan = _plan(store, name)
    assert any("jobs USING INDEX jobs_running_worker (worker_id=?)" in step for step in plan), plan


def test_a_claim_reads_the_first_parents_of_each_job_by_its_edges(store: SqliteStore) -> None:
    """What a claim hands over of a fan-in's parents costs their rows, not a scan of edges."""
    plan = _plan(store, "job_claimed_by_token")
    assert any("edge USING PRIMARY KEY (child_id=?)" in step for step in plan), plan
    assert any("parent USING INTEGER PRIMARY KEY (rowid=?)" in step for step in plan), plan


@pytest.mark.parametrize("name", ["job_requeue_expired", "execution_expire"])
def test_expired_leases_are_found_by_expiry(store: SqliteStore, name: str) -> None:
    plan = _plan(store, name)
    assert any("jobs USING INDEX jobs_lease (lease_until<?)" in step for step in plan), plan


@pytest.mark.parametrize("name", ["job_prune", "execution_prune"])
def test_pruning_walks_finished_jobs_in_order(store: SqliteStore, name: str) -> None:
    plan = _plan_of(store, queries.query(name).format(job_prunable=queries.query("job_prunable")))
    assert any("jobs USING INDEX jobs_finished (finished_at<?)" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("job_list_by_state", "jobs_state_id (state=? AND id<?)"),
        ("job_list_running", "jobs_running_worker"),
        ("job_list_succeeded", "jobs_succeeded_id (id<?)"),
    ],
)
def test_each_state_is_listed_through_an_index(store: SqliteStore, name: str, index: str) -> None:
    plan = _plan(store, name)
    assert any(f"jobs USING INDEX {index}" in step for step in plan), plan


def test_a_workers_attempts_are_paged_through_the_worker_index(store: SqliteStore) -> None:
    """The page is cut on the index before the row that says whether the worker is known
    joins it: only the page's own rows are sorted, never all the worker's attempts."""
    sql = queries.query("execution_list_by_worker").format(
        output_tail=queries.query("execution_output_tail")
    )
    plan = _plan_of(store, sql)
    page = "executions USING INDEX executions_worker (worker_id=? AND id<?)"
    assert any(page in step for step in plan), plan
    assert not any(re.fullmatch(r"SCAN executions", step) for step in plan), plan


def test_the_backlog_reads_each_queue_through_the_claim_index(store: SqliteStore) -> None:
    """An autoscaling worker reads it every interval: it must not cost a scan of the jobs."""
    branch = queries.query("job_claim_candidates").format(n=0, now="0.0")
    plan = _plan_of(store, queries.query("job_backlog").format(candidates=branch))
    assert any("jobs USING INDEX jobs_claimable (queue=?" in step for step in plan), plan
    assert not any(step.startswith("SCAN jobs") for step in plan), plan


# -- workflows: what every write that ends a job now also runs, and the prune -----------


def test_the_settling_statements_read_only_their_partial_indexes(store: SqliteStore) -> None:
    """They end every report batch: with nothing to settle, each must cost a probe."""
    release = _plan(store, "job_release_ready")
    assert any("jobs USING INDEX jobs_releasable" in step for step in release), release
    cascade = _plan(store, "job_cascade_cancel")
    assert any("child USING INDEX jobs_doomed" in step for step in cascade), cascade
    whole_scans = [step for step in release + cascade if re.fullmatch(r"SCAN \w+", step)]
    # Only the clock's one row and the cascade's own (empty) working sets are walked whole.
    assert {step.split()[1] for step in whole_scans} <= {"taskq_clock", "doomed", "cause"}


def test_a_parents_end_finds_its_children_by_the_parent_index(store: SqliteStore) -> None:
    with store._lock:
        rows = store._conn.execute(
            "EXPLAIN QUERY PLAN UPDATE jobs SET parents_left = parents_left - 1 "
            "WHERE id IN (SELECT child_id FROM job_parents WHERE parent_id = ?) "
            "AND state = 'waiting'",
            (1,),
        ).fetchall()
    plan = [row["detail"] for row in rows]
    assert any("job_parents USING COVERING INDEX job_parents_parent" in step for step in plan)


def test_pruning_looks_for_unfinished_children_by_index(store: SqliteStore) -> None:
    plan = _plan_of(
        store, queries.query("job_prune").format(job_prunable=queries.query("job_prunable"))
    )
    assert any("job_parents_parent (parent_id=?)" in step for step in plan), plan
    assert any("jobs USING INDEX jobs_finished (finished_at<?)" in step for step in plan), plan


@pytest.mark.parametrize(
    "name", ["workflow_get", "workflow_jobs", "workflow_edges", "workflow_retryable"]
)
def test_a_workflows_jobs_are_read_by_the_workflow_index(store: SqliteStore, name: str) -> None:
    plan = _plan(store, name)
    assert any("INDEX jobs_workflow (workflow_id=?)" in step for step in plan), plan


_SPAWN_LOOKUPS = [
    ("workflow_edges", "executions_1 (lease_token=?)"),
    ("job_relatives", "executions_1 (lease_token=?)"),
    ("job_relatives", "executions_job (job_id=?)"),
    ("job_relatives", "spawned USING INDEX sqlite_autoindex_jobs_1 (idempotency_key>? AND"),
    ("workflow_spawn_submitter", "jobs USING INDEX sqlite_autoindex_jobs_1 (idempotency_key>? AND"),
]


@pytest.mark.parametrize(("name", "lookup"), _SPAWN_LOOKUPS)
def test_spawners_and_spawned_jobs_are_found_by_index(
    store: SqliteStore, name: str, lookup: str
) -> None:
    """A spawned job's key names its spawning attempt's lease token, and a spawner's
    leases the keys of what it spawned: each side is a lookup, not a scan."""
    plan = _plan(store, name)
    assert any(lookup in step for step in plan), plan
