from pathlib import Path

import pytest

from taskq import errors
from taskq.broker.stores.store_url import (
    RqliteTarget,
    SqliteTarget,
    mask_password,
    parse_store_url,
    resolve_store_url,
)


def test_sqlite_url_with_absolute_path() -> None:
    target = parse_store_url("sqlite:///var/lib/taskq/jobs.db")
    assert target == SqliteTarget(path=Path("/var/lib/taskq/jobs.db"))


def test_sqlite_url_relative_path_is_taken_from_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = parse_store_url("sqlite://jobs.db?synchronous=normal&busy_timeout_ms=250")
    assert isinstance(target, SqliteTarget)
    assert target.path == tmp_path / "jobs.db"
    assert target.synchronous == "NORMAL"
    assert target.busy_timeout_ms == 250


def test_rqlite_url_with_credentials_nodes_and_options() -> None:
    target = parse_store_url(
        "rqlites://alice:s%40cret@10.0.0.1:4001,node2:4003?timeout=2.5&ca_file=/ca.pem"
    )
    assert target == RqliteTarget(
        nodes=("10.0.0.1:4001", "node2:4003"),
        tls=True,
        username="alice",
        password="s@cret",
        ca_file="/ca.pem",
        timeout=2.5,
    )
    assert target.base_urls() == ("https://10.0.0.1:4001", "https://node2:4003")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("jobs.db", "no scheme"),
        (
            "sqlite:rel.db",
            "needs :// after sqlite:; use sqlite:///path/file.db (or sqlite://file.db",
        ),
        ("postgres://localhost/db", "unknown scheme"),
        ("https://taskq.lab:8080", "the URL of a taskq serve is for clients: taskq, taskq-tui"),
        ("sqlite://", "names no file"),
        ("sqlite:///x.db?synchronus=full", "unknown option(s) synchronus"),
        ("sqlite:///x.db?synchronous=sometimes", "synchronous must be one of extra, full, normal"),
        ("rqlite://", "names no rqlite node"),
        ("rqlite://localhost", "is not host:port"),
        ("rqlite://localhost:99999", "is not host:port"),
        ("rqlite://bob@localhost:4001", "credentials must be user:password@"),
        ("rqlite://localhost:4001?timeout=soon", "timeout must be a number"),
        ("rqlite://localhost:4001?timeout=0", "timeout must be positive"),
    ],
)
def test_malformed_urls_are_config_errors(url: str, complaint: str) -> None:
    with pytest.raises(errors.ConfigError, match=None) as caught:
        parse_store_url(url)
    assert complaint in str(caught.value)


def test_errors_never_show_the_password() -> None:
    with pytest.raises(errors.ConfigError) as caught:
        parse_store_url("rqlite://bob:hunter2@localhost")
    assert "hunter2" not in str(caught.value)
    assert mask_password("rqlite://bob:hunter2@h:1") == "rqlite://bob:***@h:1"


def test_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKQ_STORE", "sqlite:///env.db")
    assert (
        resolve_store_url("sqlite:///explicit.db", "sqlite:///config.db") == "sqlite:///explicit.db"
    )
    assert resolve_store_url(None, "sqlite:///config.db") == "sqlite:///env.db"
    monkeypatch.delenv("TASKQ_STORE")
    assert resolve_store_url(None, "sqlite:///config.db") == "sqlite:///config.db"
    assert resolve_store_url(None, None).endswith("taskq.db")


@pytest.mark.parametrize(
    ("url", "served", "stores_only"),
    [
        (
            "sqlit:///x.db",
            "expected sqlite, rqlite, rqlites, or http(s) for a taskq serve",
            "expected sqlite, rqlite or rqlites",
        ),
        (
            "localhost:8080",
            "rqlite://host:port[,host:port...] or a taskq serve's http(s)://host:port",
            "or rqlite://host:port[,host:port...]",
        ),
    ],
)
def test_a_refusal_lists_a_taskq_serve_only_to_a_caller_that_takes_one(
    url: str, served: str, stores_only: str
) -> None:
    with pytest.raises(errors.ConfigError) as caught:
        parse_store_url(url, served_too=True)
    assert served in str(caught.value)
    with pytest.raises(errors.ConfigError) as caught:
        parse_store_url(url)
    assert str(caught.value).endswith(stores_only)
    assert "http" not in str(caught.value)
