from pathlib import Path

import pytest

import taskq
from taskq import errors
from taskq.config import load_config

REPO = Path(__file__).resolve().parents[2]


def test_example_config_parses() -> None:
    config = load_config(REPO / "config.example.toml")
    assert config.store_url == "sqlite:///tmp/taskq-example.db"


def test_missing_default_config_is_fine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TASKQ_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_config().store_url is None


def test_named_config_must_exist(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[stroe]\nurl = 'x'\n", "unknown section [stroe]"),
        ("[store]\nulr = 'x'\n", "unknown key(s) ulr in [store]"),
        ("[store]\nurl = 3\n", "url must be a string"),
        ("[a]\n[b]\n", "unknown sections [a], [b]; known: queues, server, store, worker"),
        ("[queues.img]\nmax_atempts = 2\n", "unknown key(s) max_atempts in [queues.img]"),
        ("[queues.img]\ntimeout = 0\n", "[queues.img] timeout must be a number > 0"),
        ("[queues.img.retry]\nbase = -1\n", "[queues.img] retry: base must be from 0"),
        ("worker = 3\n", "worker must be a table, got 3"),
        ("[store\nurl = 'x'\n", "not valid TOML"),
    ],
)
def test_typos_are_named(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(errors.ConfigError) as caught:
        load_config(path)
    assert complaint in str(caught.value)


def test_the_worker_section_is_read_as_written(tmp_path: Path) -> None:
    # taskq-worker checks it, after merging its flags (taskq.worker.settings).
    path = tmp_path / "config.toml"
    path.write_text("[worker]\nqueues = ['a']\n\n[worker.max_limits]\nmemory_bytes = '1GiB'\n")
    config = load_config(path)
    assert config.worker == {"queues": ["a"], "max_limits": {"memory_bytes": "1GiB"}}
    assert config.source == path


def test_a_queues_defaults_go_with_the_jobs_a_client_submits_to_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[queues.img]\nmax_attempts = 6\ntimeout = 30\nlimits = { memory_bytes = '1GiB' }\n"
        "[queues.img.retry]\nbase = 10\nretry_on = ['OSError']\n"
    )
    with taskq.Client(f"sqlite://{tmp_path / 'taskq.db'}", config_path=path) as client:
        configured = client.get(
            client.submit("m:f", queue="img", limits={"cpu_seconds": 2}, unchecked=True).id
        )
        own = client.get(
            client.submit("m:f", queue="img", max_attempts=1, retry={"base": 1}, unchecked=True).id
        )
        other = client.get(client.submit("m:f", queue="default", unchecked=True).id)
    assert (configured.max_attempts, configured.timeout) == (6, 30.0)
    assert configured.limits == {"memory_bytes": "1GiB", "cpu_seconds": 2}
    assert configured.retry is not None
    assert (configured.retry["base"], configured.retry["retry_on"]) == (10, ["OSError"])
    assert (own.max_attempts, own.retry["base"] if own.retry else None) == (1, 1)
    assert (other.max_attempts, other.timeout, other.retry) == (3, None, None)
