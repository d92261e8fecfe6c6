"""A Ctrl-C while the demo submits its batch waits for the submit's ids, so that the
demo can cancel the jobs it wrote; an ignored SIGINT stays ignored."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from taskq.cli.demo import _ctrl_c_after_the_submit


@pytest.fixture
def interruptible() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _submit_interrupted(reached: list[str]) -> None:
    with _ctrl_c_after_the_submit():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("the rest of the submit")


def test_a_ctrl_c_during_the_submit_comes_once_it_has_returned(interruptible: None) -> None:
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _submit_interrupted(reached)
    assert reached == ["the rest of the submit"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_nothing_is_raised(interruptible: None) -> None:
    with _ctrl_c_after_the_submit():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _ctrl_c_after_the_submit():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
