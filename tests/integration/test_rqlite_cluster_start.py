"""A new cluster comes up although one rqlited dies of its own start-up race.

rqlited can crash as it starts when a peer connects before its listeners are
registered (rqlite issue #325). A wrapper in front of the real binary makes
one node die once with that crash's words, so the test does not wait on luck.
"""

from __future__ import annotations

import signal
import stat
from pathlib import Path

import pytest

from taskq.broker.client.connect import open_store
from taskq.broker.stores.store import Statement
from taskq.dev.rqlited import find_rqlited
from tests.support.rqlite_cluster import running_cluster

pytestmark = pytest.mark.rqlite  # every test here runs a real cluster

_MUX_RACE_WORDS = (
    "fatal error: concurrent map read and map write\n"
    "github.com/rqlite/rqlite/v10/tcp.(*Mux).handleConn(0x1, {0x2, 0x3})\n"
)


def _dies_once_then_runs(
    tmp_path: Path, node_id: str, dying_words: str, *, at_launch: int = 1
) -> str:
    """A binary: the ``at_launch``-th run of ``node_id`` prints ``dying_words`` and exits 2
    (leaving a file in its data directory); every other run is rqlited's."""
    wrapper = tmp_path / "rqlited-wrapper"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for data in "$@"; do :; done\n'
        'launches="$data/../launches"\n'
        f'case " $* " in *" -node-id {node_id} "*)\n'
        '  echo run >> "$launches"\n'
        f'  if [ "$(wc -l < "$launches")" -eq {at_launch} ]; then\n'
        '    touch "$data/left-behind"\n'
        f"    printf '%s' '{dying_words}'\n"
        "    exit 2\n"
        "  fi;;\n"
        "esac\n"
        f'exec {find_rqlited()} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def test_a_node_lost_to_the_start_up_race_is_started_again(tmp_path: Path) -> None:
    binary = _dies_once_then_runs(tmp_path, "node2", _MUX_RACE_WORDS)
    with running_cluster(tmp_path / "cluster", binary=binary) as cluster:
        node = cluster.nodes[1]
        assert len((node.directory / "launches").read_text().splitlines()) == 2
        assert not (node.data_dir / "left-behind").exists()  # started on an empty directory
        assert "started again" in node.log_path.read_text()
        assert all(each.alive for each in cluster.nodes)
        store = open_store(cluster.url)
        try:
            store.execute([Statement("CREATE TABLE t (k INTEGER PRIMARY KEY)")])
            store.execute([Statement("INSERT INTO t (k) VALUES (1)")])
        finally:
            store.close()


def test_a_node_restarted_that_loses_the_race_is_started_again_on_its_data(
    tmp_path: Path,
) -> None:
    binary = _dies_once_then_runs(tmp_path, "node2", _MUX_RACE_WORDS, at_launch=2)
    with running_cluster(tmp_path / "cluster", binary=binary) as cluster:
        node = cluster.nodes[1]
        cluster.kill_node(node, signal.SIGKILL)
        cluster.start_node(node)
        cluster.wait_for_leader(every_node=True)
        assert len((node.directory / "launches").read_text().splitlines()) == 3
        assert (node.data_dir / "left-behind").exists()  # its data kept
        assert node.alive
        assert "started again" in node.log_path.read_text()


def test_a_node_that_dies_otherwise_stops_the_start(tmp_path: Path) -> None:
    binary = _dies_once_then_runs(tmp_path, "node2", "open: permission denied\n")
    refused = pytest.raises(RuntimeError, match=r"(?s)rqlited node2 exited:.*permission denied")
    with refused, running_cluster(tmp_path / "cluster", binary=binary):
        pass
