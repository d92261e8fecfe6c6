"""Schemathesis hooks (``SCHEMATHESIS_HOOKS``): the rules of ``taskq serve`` no JSON schema states.

The OpenAPI document states every bound of a request's members; what it
cannot state depends on what the store holds, or relates members to each
other. A request that breaks such a rule is refused (422) by right, so the
requests generated as valid are made to keep them, and only them:

- a job's target must be declared by a worker, and the store under test has
  none: each job is submitted ``unchecked``;
- ``after`` names stored jobs, which a generated id need not be: none; and
  a job sent alone (``POST /jobs``, a schedule's) takes ``run_anyway`` only
  with ``after``: false;
- a workflow's parents are positions below its count of jobs, without a
  cycle: each job keeps those of its parents that come before it;
- a schedule has a cron expression or an interval, not both, and a time zone
  that exists: its interval, else a minute, in UTC.

A job's ``limits`` and ``retry`` need no rule: their schemas are exact
(taskq/broker/client/option_schemas.py).
"""

from __future__ import annotations

from typing import Any

import schemathesis


def _jobs(path: str, method: str, body: Any) -> list[dict[str, Any]]:
    """The jobs of a request's body, to change in place."""
    if method != "POST" or not isinstance(body, dict | list):
        return []
    if path == "/jobs":
        found = body if isinstance(body, list) else [body]
    elif path == "/workflows" and isinstance(body, dict):
        found = body.get("jobs", [])
    elif path == "/schedules" and isinstance(body, dict):
        found = [body.get("job")]
    else:
        found = []
    return [job for job in found if isinstance(job, dict)]


def _keep_rules(path: str, method: str, body: Any) -> None:
    for position, job in enumerate(_jobs(path, method, body)):
        job["unchecked"] = True
        job["after"] = []
        if path == "/workflows":
            parents = [parent for parent in job.get("parents", []) if 0 <= parent < position]
            job["parents"] = sorted(set(parents))
        else:
            # Sent alone, with no after: run_anyway would be refused (it goes with after).
            job["run_anyway"] = False
    if path == "/schedules" and method == "POST" and isinstance(body, dict):
        body["cron"] = None
        body["every_seconds"] = body.get("every_seconds") or 60
        body["timezone"] = "UTC"


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    if case.meta is not None and case.meta.generation.mode.is_positive:
        _keep_rules(case.path, case.method.upper(), case.body)
    # A case's wait or follow would hold each request for up to a minute: asked not to wait.
    if isinstance(case.query, dict):
        for name in ("wait", "timeout"):
            if name in case.query:
                case.query[name] = 0
        if case.path.endswith("/output"):
            case.query.pop("follow", None)
    # A body's own key and the header's must agree; the body's is enough.
    keyed_body = isinstance(case.body, dict) and case.body.get("idempotency_key") is not None
    if case.headers is not None and keyed_body:
        case.headers.pop("Idempotency-Key", None)
    return case
