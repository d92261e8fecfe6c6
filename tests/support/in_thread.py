"""A call run in a thread of its own, so that a test waits for it with a bound."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Outcome:
    """What a call in a thread returned, or raised, once ``done`` is set."""

    def __init__(self) -> None:
        self.value: object = None
        self.error: BaseException | None = None
        self.done = threading.Event()


def in_thread(call: Callable[[], object]) -> Outcome:
    """``call`` started in a daemon thread: a call that never returns holds up no test."""
    outcome = Outcome()

    def run() -> None:
        try:
            outcome.value = call()
        except BaseException as exc:
            outcome.error = exc
        finally:
            outcome.done.set()

    threading.Thread(target=run, daemon=True).start()
    return outcome
