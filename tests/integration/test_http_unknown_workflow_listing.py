"""A listing of the jobs of an id no workflow has is empty over HTTP, as on the store.

``GET /jobs?workflow=ID`` answers 404 for such an id; the Python client over
HTTP lists no jobs, as a client on the store does, and its ``workflow(ID)``
raises :class:`taskq.errors.WorkflowNotFound` on both, for a caller that
must tell the two apart.
"""

from __future__ import annotations

import pytest

import taskq
from taskq import errors
from taskq.dev.server import ServerProcess, token_of

NO_SUCH_WORKFLOW = 987_654_321


def test_the_jobs_of_an_unknown_workflow_list_as_none_on_both(
    served: tuple[str, ServerProcess],
) -> None:
    query = taskq.JobQuery(workflow_id=NO_SUCH_WORKFLOW)
    with (
        taskq.Client(served[0]) as on_store,
        taskq.Client(served[1].url, token=token_of("tester")) as over_http,
    ):
        for client in (on_store, over_http):
            assert client.list(query) == []
            with pytest.raises(errors.WorkflowNotFound):
                client.workflow(NO_SUCH_WORKFLOW)
