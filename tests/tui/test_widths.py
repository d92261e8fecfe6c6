"""The tables take the width the terminal gives them: whole ids and paths while there is room.

Read off the cells as drawn (the table's own rendered lines), not the data
handed to it, and pictured in snapshots at 120 and 200 columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Static

from taskq.app import formatting
from taskq.app.app import ConsoleApp
from taskq.app.formatting import Clock
from taskq.app.source import ConsoleSource, JobFilter
from taskq.app.widgets.keyed_table import Column, KeyedTable, fit_widths
from taskq.app.widgets.tables import JobsTable, NodesTable, QueuesTable, WorkersTable
from taskq.broker.client.client import AsyncClient
from taskq.broker.ops import migrations, plan
from taskq.broker.ops.claims import job_claim
from taskq.broker.ops.workers import worker_register
from taskq.broker.stores.sqlite_store import SqliteStore
from taskq.broker.stores.store import Store
from tests.tui.seed import BASE, seed
from tests.tui.waiting import plain, wait_for

SnapCompare = Callable[..., bool]
Worker = tuple[str, str, str, tuple[str, ...]]
"""A worker's id, name, host and queues."""
StoreMaker = Callable[[str, Worker], Store]

# A store path and a worker longer than their columns' usual widths: whole at
# 120 columns, where what the workers take and may run is cut to make room.
PATH = "lab-pipeline/nightly-image-runs/taskq.db"
GPU_17: Worker = ("gpu-17-48213-9f8e7d6c", "gpu-17-48213", "gpu-17.lab", ("images", "sims", "etl"))
# Names as long as real hosts make them: whole at 220 columns, cut at 100.
LONG_PATH = "stores/lab-pipeline/production-eu-west-1/nightly-image-processing/taskq.db"
LONG: Worker = (
    "gpu-node-17.cluster.example.org-48213-9f8e7d6c",
    "gpu-node-17.cluster.example.org-48213",
    "gpu-node-17.cluster.example.org",
    ("images", "default", "sims", "etl"),
)


def _store(path: str, worker: Worker) -> Store:
    """The seeded store at ``path`` (relative, so drawn alike everywhere), one more worker
    running a job."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(path)
    migrations.migrate(store)
    seed(store)
    worker_id, name, host, queues = worker
    plan.run(
        store,
        worker_register(
            worker_id,
            name=name,
            host=host,
            pid=48213,
            queues=queues,
            labels=("a100", "gpu"),
            slots=8,
            now=BASE - 60,
        ),
    )
    plan.run(store, job_claim(worker_id, ["images"], limit=1, lease_seconds=300, now=BASE - 5))
    return store


@pytest.fixture
def make_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreMaker]:
    """Seeded stores at paths relative to a fresh directory, closed after the test."""
    monkeypatch.chdir(tmp_path)
    made: list[Store] = []

    def make(path: str, worker: Worker) -> Store:
        made.append(_store(path, worker))
        return made[-1]

    yield make
    for store in made:
        store.close()


def _app(store: Store) -> ConsoleApp:
    # A long interval: pictures and drawn cells are read between polls.
    source = ConsoleSource(AsyncClient(store=store, import_names=False), store_now=lambda: BASE)
    return ConsoleApp(source, refresh_seconds=5.0, clock=Clock(now=lambda: BASE, tz=UTC))


def _drawn(table: KeyedTable, key: str) -> dict[str, str]:
    """The text drawn in each cell of row ``key`` that is wholly in view, by column key.

    A table too wide even with its text cut scrolls sideways: the cells past
    its right edge are out of view, not cut.
    """
    line = table.render_line(1 + table.get_row_index(key)).text  # line 0 is the heading
    cells = {}
    x = 0
    for column in table.ordered_columns:
        width = column.get_render_width(table)
        if x + width <= table.scrollable_content_region.width:
            cells[str(column.key.value)] = line[x : x + width].strip()
        x += width
    return cells


def _free_columns(table: KeyedTable) -> int:
    """How many columns of the table's room its columns leave blank."""
    return table.scrollable_content_region.width - table.virtual_size.width


def _cells(table: KeyedTable) -> Iterator[tuple[str, str]]:
    """Each cell in view as ``(whole text, text drawn)``."""
    for key in table.row_keys():
        for column, drawn in _drawn(table, key).items():
            yield table.cell_text(key, column), drawn


def _cut_cells(table: KeyedTable) -> list[str]:
    """The cells drawn shorter than their text, each as ``whole -> drawn``.

    Fails if one is cut while the table has free columns, or if one is cut
    without an ellipsis saying so.
    """
    cut = []
    for whole, drawn in _cells(table):
        if drawn == whole:
            continue
        assert "…" in drawn, f"{whole!r} drawn as {drawn!r}, cut silently"
        free = _free_columns(table)
        assert free <= 0, f"{whole!r} drawn as {drawn!r} with {free} columns free"
        cut.append(f"{whole} -> {drawn}")
    return cut


def _fits_its_room(table: KeyedTable) -> bool:
    """Whether no cell is drawn cut while the table leaves columns free."""
    return _free_columns(table) <= 0 or all(drawn == whole for whole, drawn in _cells(table))


async def _widths_settled(pilot: Pilot[None], tables: list[KeyedTable]) -> None:
    """Wait until every table fits its room.

    Rows arrive before the table is laid out again: on a busy machine it may
    be drawn for a moment with the widths of the room it had before (a
    scrollbar that has just gone), cut with columns free. A table that stays
    so fails here.
    """
    await wait_for(
        pilot, lambda: all(_fits_its_room(table) for table in tables), "the tables to fit"
    )


async def _overview_loaded(pilot: Pilot[None], app: ConsoleApp) -> None:
    workers = app.screen.query_one(WorkersTable)
    await wait_for(pilot, lambda: workers.row_count == 4, "the workers")
    await _widths_settled(pilot, list(app.screen.query(KeyedTable)))


async def _jobs_loaded(pilot: Pilot[None], app: ConsoleApp) -> None:
    await app.show_jobs(JobFilter(queue="images"))
    jobs = app.screen.query_one(JobsTable)
    await wait_for(pilot, lambda: jobs.row_count > 0, "the jobs")
    await _widths_settled(pilot, [jobs])


@pytest.mark.parametrize("width", [120, 200])
def test_overview_at(snap_compare: SnapCompare, make_store: StoreMaker, width: int) -> None:
    app = _app(make_store(PATH, GPU_17))

    async def loaded(pilot: Pilot[None]) -> None:
        await _overview_loaded(pilot, app)

    assert snap_compare(app, terminal_size=(width, 40), run_before=loaded)


def test_jobs_at_200(snap_compare: SnapCompare, make_store: StoreMaker) -> None:
    app = _app(make_store(PATH, GPU_17))

    async def loaded(pilot: Pilot[None]) -> None:
        await _jobs_loaded(pilot, app)

    assert snap_compare(app, terminal_size=(200, 40), run_before=loaded)


def _cut_columns(table: KeyedTable) -> set[str]:
    """The keys of the columns with a cell drawn shorter than its text."""
    return {
        column
        for key in table.row_keys()
        for column, drawn in _drawn(table, key).items()
        if drawn != table.cell_text(key, column)
    }


@pytest.mark.anyio
@pytest.mark.parametrize("width", [120, 200])
async def test_ids_paths_and_queue_lists_are_whole_where_they_fit(
    make_store: StoreMaker, width: int
) -> None:
    app = _app(make_store(PATH, GPU_17))
    async with app.run_test(size=(width, 40)) as pilot:
        await _overview_loaded(pilot, app)
        workers = app.screen.query_one(WorkersTable)
        for table in app.screen.query(KeyedTable):
            if table is not workers:
                assert _cut_cells(table) == [], type(table).__name__
        assert _drawn(app.screen.query_one(NodesTable), PATH)["address"] == PATH
        assert _drawn(workers, GPU_17[0])["id"] == GPU_17[0]
        if width == 120:
            # Short of room, what the workers take and may run gives way, not who they are.
            assert _cut_cells(workers), "the workers' lists should not all fit"
            assert _cut_columns(workers) <= {"labels", "queues", "runs"}
        else:
            assert _cut_cells(workers) == []
            assert _drawn(workers, GPU_17[0])["queues"] == "images,sims,etl"
            assert _drawn(workers, "lab-01-7c2e91aa")["queues"] == "images,default"
        # The totals keep every part, on a second line when one is too narrow.
        totals = plain(app.screen.query_one("#totals", Static))
        assert "Workers 3 up · 1 lost" in totals

        await _jobs_loaded(pilot, app)
        assert _cut_cells(app.screen.query_one(JobsTable)) == []


@pytest.mark.anyio
@pytest.mark.parametrize("width", [100, 120, 160, 220])
async def test_text_is_cut_only_when_no_column_is_free(make_store: StoreMaker, width: int) -> None:
    app = _app(make_store(LONG_PATH, LONG))
    async with app.run_test(size=(width, 40)) as pilot:
        await _overview_loaded(pilot, app)
        cut = [cell for table in app.screen.query(KeyedTable) for cell in _cut_cells(table)]
        await _jobs_loaded(pilot, app)
        cut += _cut_cells(app.screen.query_one(JobsTable))
    if width == 220:
        assert cut == []
    else:
        assert cut, "the long names should not all fit"


@pytest.mark.anyio
async def test_a_cut_id_or_path_keeps_its_distinguishing_end(make_store: StoreMaker) -> None:
    app = _app(make_store(LONG_PATH, LONG))
    async with app.run_test(size=(100, 40)) as pilot:
        await _overview_loaded(pilot, app)
        worker_id = _drawn(app.screen.query_one(WorkersTable), LONG[0])["id"]
        path = _drawn(app.screen.query_one(NodesTable), LONG_PATH)["address"]
        queue = _drawn(app.screen.query_one(QueuesTable), "images")["queue"]
    assert re.fullmatch(r"gpu-.+….*9f8e7d6c", worker_id)
    assert re.fullmatch(r"stores/.+….+/taskq\.db", path)
    assert queue == "images"


@pytest.mark.anyio
async def test_more_room_brings_cut_text_back(make_store: StoreMaker) -> None:
    app = _app(make_store(LONG_PATH, LONG))
    async with app.run_test(size=(100, 40)) as pilot:
        await _overview_loaded(pilot, app)
        workers = app.screen.query_one(WorkersTable)
        workers.move_cursor(row=workers.get_row_index("lab-02-19f03b5d"))
        assert "…" in _drawn(workers, LONG[0])["id"]
        await pilot.resize_terminal(220, 40)
        await wait_for(pilot, lambda: _drawn(workers, LONG[0])["id"] == LONG[0], "the whole id")
        assert workers.cursor_key == "lab-02-19f03b5d"


def test_columns_grow_to_their_widest_cell_while_there_is_room() -> None:
    columns = [Column("id", "ID", 8, elide="middle"), Column("n", "N", 4)]
    assert fit_widths(columns, [20, 2], room=40) == [20, 4]


def test_blank_space_goes_before_any_text_is_cut() -> None:
    columns = [Column("id", "ID", 8, elide="middle"), Column("n", "N", 6), Column("s", "S", 9)]
    assert fit_widths(columns, [20, 2, 3], room=25) == [20, 2, 3]


def test_a_column_cut_first_gives_way_down_to_its_heading_before_any_other() -> None:
    columns = [
        Column("id", "ID", 8, elide="middle"),
        Column("runs", "Runs", 6, elide="end", cut_first=True),
    ]
    assert fit_widths(columns, [20, 12], room=26) == [20, 6]
    assert fit_widths(columns, [20, 12], room=22) == [18, 4]


def test_the_widest_cut_column_gives_way_first_down_to_its_usual_width() -> None:
    columns = [
        Column("a", "A", 8, elide="middle"),
        Column("b", "B", 8, elide="end"),
        Column("n", "N", 3),
    ]
    assert fit_widths(columns, [30, 12, 10], room=40) == [18, 12, 10]
    assert fit_widths(columns, [30, 12, 10], room=20) == [8, 8, 10]


@pytest.mark.parametrize(
    ("where", "width", "drawn"),
    [
        ("middle", 12, "lab-0…a-long"),
        ("end", 12, "lab-01-7c2e…"),
        ("middle", 40, "lab-01-7c2e91aa-long"),
    ],
)
def test_elide(where: formatting.Elide, width: int, drawn: str) -> None:
    assert formatting.elide(Text("lab-01-7c2e91aa-long"), width, where).plain == drawn
