"""A submit limit of one job per period says "1 job", not "1 jobs"."""

from __future__ import annotations

from pathlib import Path

import pytest

import taskq
from taskq import errors


def test_a_limit_of_one_job_is_said_in_the_singular(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path}/taskq.db", submitter="alice") as client:
        client.set_submit_limit("alice", 1, 60)
        client.submit("m:f", unchecked=True)
        with pytest.raises(errors.RateLimited) as refused:
            client.submit("m:f", unchecked=True)
        assert "submitter 'alice' may submit 1 job per 60 s; nothing was written" in str(
            refused.value
        )
        with pytest.raises(errors.RateLimited) as refused:
            client.submit_many([taskq.call_spec("m:f", submitter="alice")] * 2, unchecked=True)
        assert "may submit at most 1 job per 60 s; 2 in one request can never fit" in str(
            refused.value
        )


def test_a_limit_of_several_jobs_stays_plural(tmp_path: Path) -> None:
    with taskq.Client(f"sqlite://{tmp_path}/taskq.db", submitter="bob") as client:
        client.set_submit_limit("bob", 2, 60)
        with pytest.raises(errors.RateLimited, match=r"may submit at most 2 jobs per 60 s; 3 in"):
            client.submit_many([taskq.call_spec("m:f", submitter="bob")] * 3, unchecked=True)
