"""The cluster of ``scripts/local_cluster.sh``: find it running, or start it from a checkout.

The script records the cluster's store URL in ``$TASKQ_CLUSTER_DIR/url``
(default ``${XDG_RUNTIME_DIR:-/tmp}/taskq-cluster``); a cluster counts as
running when a node named there reports a leader.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from taskq import errors
from taskq.broker.connect import open_store
from taskq.cli import connection, output

SCRIPT = Path("scripts") / "local_cluster.sh"


def cluster_dir() -> Path:
    """Where the script keeps the cluster's data, logs and URL."""
    configured = os.environ.get("TASKQ_CLUSTER_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / "taskq-cluster"


def script_path() -> Path | None:
    """``scripts/local_cluster.sh`` of the checkout this taskq runs from, if it does."""
    candidate = Path(__file__).resolve().parents[2] / SCRIPT
    return candidate if candidate.is_file() else None


def running_url() -> str | None:
    """The URL of the recorded cluster when it has a leader, else None."""
    try:
        url = (cluster_dir() / "url").read_text().strip()
    except OSError:
        return None
    if not url:
        return None
    try:
        store = open_store(connection.bounded(url), migrate=False)
    except errors.ConfigError:
        return None
    try:
        return url if any(node.leader for node in store.nodes()) else None
    except errors.StoreError:
        return None
    finally:
        store.close()


def ensure_running() -> str:
    """The running local cluster's URL, starting it first when a checkout can."""
    url = running_url()
    if url is not None:
        return url
    script = script_path()
    if script is None:
        raise errors.TaskqError(
            f"no local cluster is running (none recorded in {cluster_dir()}); start one with "
            "scripts/local_cluster.sh start from a taskq checkout, or pass --store rqlite://..."
        )
    output.warn(f"no local cluster is running: starting one with {script} start")
    done = subprocess.run(
        [str(script), "start"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise errors.TaskqError(f"{script} start failed (exit {done.returncode}); see above")
    return lines[-1]
