"""The "did you mean" of a refusal: the known names closest to those given."""

from __future__ import annotations

from collections.abc import Collection, Iterable


def did_you_mean(given: Iterable[str], known: Collection[str], *, prefix: str = "") -> str:
    """`` (did you mean NAME?)``: for each name of ``given``, the one of ``known`` closest to
    it, if any is close; nothing when none is. ``prefix``, which every name starts with
    (``--`` of a command's options), is left out of the likeness: two shared characters
    would make ``--delay`` look like ``--replace``."""
    import difflib  # Imported here, not with the module: only a refusal needs it

    bare = {name.removeprefix(prefix): name for name in known}
    close = [
        bare[match]
        for name in given
        for match in difflib.get_close_matches(name.removeprefix(prefix), bare, n=1)
    ]
    return f" (did you mean {' and '.join(dict.fromkeys(close))}?)" if close else ""
