"""``/openapi.json`` and ``taskq serve`` agree: schemathesis's every check, run against the server.

A real ``taskq serve`` on a fresh SQLite store, once with a token and once
open (no token, on loopback), is driven by ``st run`` through its phases
(examples, coverage, fuzzing, stateful) with a fixed seed and a bounded
number of examples per operation, so that a run is the same every time and
takes a few seconds. Any request the document calls valid that the server
refuses, any answer the document does not describe, fails the test with
schemathesis's report. The rules no JSON schema can state are kept by the
generated requests (tests/support/openapi_rules.py).

The open server skips the coverage phase: some two thousand requests at
every bound of every member, which the run with a token makes to the same
handlers. What being open changes (no token asked, no 401 or 403 in the
document) the other phases meet on every operation.

One check is left out: ``use_after_free`` takes a 2xx answer to ``DELETE`` as
the resource gone, but ``DELETE /jobs/{id}`` and ``DELETE /workflows/{id}``
cancel, and the job or workflow stays to be read, as docs/http-api.md says.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from taskq.dev.server import running_server, token_of, write_server_config

EXAMPLES_PER_OPERATION = 5
SEED = 46
_ST = Path(sys.executable).with_name("st")
# Loaded by st as a file, not imported here: its hooks are for st's process only.
_RULES = Path(__file__).parents[1] / "support" / "openapi_rules.py"


@pytest.mark.parametrize(
    ("tokens", "phases"),
    [
        ({"scripts": ["admin"]}, "examples,coverage,fuzzing,stateful"),
        ({}, "examples,fuzzing,stateful"),
    ],
    ids=["with-a-token", "open"],
)
# Its own bound: schemathesis's run took 100 s on a slow 2-core machine, and past the
# suite's 120 s once every core was busy.
@pytest.mark.timeout(420)
def test_every_check_of_schemathesis_passes(
    tmp_path: Path, tokens: dict[str, list[str]], phases: str
) -> None:
    store_url = f"sqlite://{tmp_path / 'taskq.db'}"
    open_store(store_url).close()
    config = write_server_config(tmp_path / "server.toml", tokens)
    bearer = [f"--header=Authorization: Bearer {token_of(name)}" for name in tokens]
    with running_server(store_url, config, tmp_path / "serve.log") as server:
        ran = subprocess.run(
            [
                str(_ST),
                "run",
                f"{server.url}/openapi.json",
                "--checks=all",
                "--exclude-checks=use_after_free",
                f"--phases={phases}",
                f"--max-examples={EXAMPLES_PER_OPERATION}",
                f"--seed={SEED}",
                "--generation-deterministic",
                "--workers=1",
                "--no-color",
                *bearer,
            ],
            env={**os.environ, "SCHEMATHESIS_HOOKS": str(_RULES)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=360,
            check=False,
        )
    assert ran.returncode == 0, ran.stdout[-20_000:] + ran.stderr[-5_000:]
