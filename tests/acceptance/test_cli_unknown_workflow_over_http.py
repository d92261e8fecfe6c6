"""``taskq jobs --workflow ID`` of an id no workflow has says the same over taskq serve as on
the store: where to find the known ones.

The real command, run on an embedded store and on a real ``taskq serve`` of
that store (its URL as the store, a token in ``TASKQ_TOKEN``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from taskq.broker.client.connect import open_store
from taskq.dev.server import ServerProcess, running_server, token_of, write_server_config
from tests.support.cli_runs import Ran, taskq

pytestmark = pytest.mark.timeout(120)

NO_SUCH_WORKFLOW = 987_654_321


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ServerProcess]]:
    root = tmp_path_factory.mktemp("unknown-workflow")
    store_url = f"sqlite://{root / 'taskq.db'}"
    open_store(store_url).close()
    config = write_server_config(root / "config.toml", {"scripts": ["read"]})
    with running_server(store_url, config, root / "serve.log") as server:
        yield store_url, server


def _jobs_of_no_workflow(store: str) -> Ran:
    return taskq(
        "jobs",
        "--workflow",
        str(NO_SUCH_WORKFLOW),
        store=store,
        env={"TASKQ_TOKEN": token_of("scripts")},
    )


def test_an_unknown_workflow_is_told_alike_over_http_and_on_the_store(
    served: tuple[str, ServerProcess],
) -> None:
    store_url, server = served
    on_store, over_http = _jobs_of_no_workflow(store_url), _jobs_of_no_workflow(server.url)
    said = (
        f"taskq: error: no workflow with id {NO_SUCH_WORKFLOW} "
        "(taskq workflow list shows the newest)\n"
    )
    assert (on_store.code, on_store.out, on_store.err) == (1, "", said)
    assert (over_http.code, over_http.out, over_http.err) == (1, "", said)
