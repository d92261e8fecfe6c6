"""The server's tokens follow its config file: read again when it changed, at most so often."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq import errors
from taskq.server.auth import WatchedTokens

ENTRY = '[[server.tokens]]\nname = "{name}"\nscopes = ["read"]\ntoken = "secret-{name}"\n'


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _write(path: Path, *names: str) -> None:
    path.write_text("".join(ENTRY.format(name=name) for name in names))


def test_a_changed_file_is_read_again_after_the_recheck_interval(tmp_path: Path) -> None:
    path, clock = tmp_path / "config.toml", Clock()
    _write(path, "a")
    tokens = WatchedTokens(path, recheck_seconds=1.0, clock=clock)
    assert tokens.caller("Bearer secret-a").name == "a"
    _write(path, "b", "c")
    assert tokens.caller("Bearer secret-a").name == "a"  # not looked at yet
    clock.now = 1.5
    assert tokens.caller("Bearer secret-b").name == "b"
    with pytest.raises(errors.Unauthorized, match="not one this server knows"):
        tokens.caller("Bearer secret-a")


def test_a_file_that_no_longer_reads_keeps_the_tokens_it_had(tmp_path: Path) -> None:
    path, clock = tmp_path / "config.toml", Clock()
    _write(path, "a")
    tokens = WatchedTokens(path, recheck_seconds=1.0, clock=clock)
    path.write_text("[[server.tokens]\nname = ")
    clock.now = 2.0
    assert tokens.caller("Bearer secret-a").name == "a"


def test_a_server_started_with_tokens_stays_closed_when_the_last_is_revoked(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "config.toml", Clock()
    _write(path, "a")
    tokens = WatchedTokens(path, recheck_seconds=1.0, clock=clock)
    path.write_text("")
    clock.now = 2.0
    assert not tokens.open
    with pytest.raises(errors.Unauthorized, match="no token left"):
        tokens.caller("Bearer secret-a")
