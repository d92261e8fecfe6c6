"""A request to stop a running job, which the code running it can hook into.

The worker sets it (a cancel from a user, a lost lease, a drain running out
of time); the sandbox reacts. Callbacks let the sandbox end a job from the
event loop without a task per job waiting for the request.
"""

from __future__ import annotations

from collections.abc import Callable


class StopRequest:
    """A one-way flag: once set, it stays set and has called every callback once."""

    def __init__(self) -> None:
        self._set = False
        self._callbacks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Ask for the stop; a no-op when already asked. Call from the event loop's thread."""
        if self._set:
            return
        self._set = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the stop is asked for (at once if it has been).

        Returns a function that withdraws the callback.
        """
        if self._set:
            callback()
            return _nothing
        self._callbacks.append(callback)

        def withdraw() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return withdraw


def _nothing() -> None:
    pass
