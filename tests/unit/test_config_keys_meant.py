"""A misspelt key or section of the config file is refused with the one meant, as a misspelt
flag is (``--concurency``: did you mean ``--concurrency``?), alike for every table that
refuses unknown keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq import errors
from taskq.config import load_config
from taskq.worker.main import main as worker_main
from taskq.worker.settings import settings_from


def refusal(tmp_path: Path, text: str) -> str:
    """What reading a config file of ``text`` says, its [worker] section checked as the
    worker checks it."""
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(errors.ConfigError) as refused:
        settings_from(load_config(path).worker)
    return str(refused.value)


# A config file's text with one misspelt key, a table of each kind: the words that end its refusal.
MEANT = {
    "[stroe]\nurl = 'x'\n": "; did you mean [store]?",
    "[store]\nulr = 'x'\n": "; did you mean url?",
    "[server]\nlisen = '127.0.0.1:1'\n": "; did you mean listen?",
    "[[server.tokens]]\nnmae = 'a'\nscopes = ['read']\ntoken = 't'\n": "; did you mean name?",
    "[queues.img]\nmax_atempts = 2\n": "; did you mean max_attempts?",
    "[queues.img.retry]\nbsae = 2\n": "; did you mean base?",
    "[worker]\nconcurency = 4\n": "; did you mean concurrency?",
    "[worker.max_limits]\nmemroy_bytes = '1GiB'\n": "; did you mean memory_bytes?",
}


@pytest.mark.parametrize(("text", "meant"), MEANT.items())
def test_a_misspelt_key_is_told_with_the_one_meant(tmp_path: Path, text: str, meant: str) -> None:
    said = refusal(tmp_path, text)
    # After the known keys, which stay listed: the one meant is the line's last words.
    assert said.endswith(meant), said


def test_each_misspelt_key_is_told_and_one_like_none_is_told_without(tmp_path: Path) -> None:
    said = refusal(tmp_path, "[worker]\nconcurency = 4\nqueus = ['a']\n")
    assert said.endswith("; did you mean concurrency and queues?"), said
    said = refusal(tmp_path, "[worker]\nconcurency = 4\nzzzzzz = 1\n")
    assert said.endswith("; did you mean concurrency?"), said
    assert "did you mean" not in refusal(tmp_path, "[store]\nzzzzzz = 1\n")


def test_the_worker_tells_the_setting_meant_as_it_does_for_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[worker]\nmodules = ['mypkg.tasks']\nconcurency = 4\n")
    assert worker_main(["--config", str(config)]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith("taskq-worker: error: worker: unknown key(s) concurency in [worker]")
    assert said.endswith("; did you mean concurrency?"), said
