"""The "did you mean" of a refusal: the known names closest to those given.

Here, at the bottom of the package, so that every refusal says it alike: a
command's options, a config file's keys, a job's limits and options.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable


def closest(name: str, known: Collection[str], *, prefix: str = "") -> str | None:
    """The one of ``known`` closest to ``name``, if one is close. ``prefix``, which every
    name starts with (``--`` of a command's options), is left out of the likeness: two
    shared characters would make ``--delay`` look like ``--replace``."""
    import difflib  # Imported here, not with the module: only a refusal needs it

    bare = {each.removeprefix(prefix): each for each in known}
    given = name.removeprefix(prefix)
    match = difflib.get_close_matches(given, bare, n=1)
    if match:
        return bare[match[0]]
    # A name written without its unit (``memroy`` for ``memory_bytes``) is close to the
    # first word of the one meant, not to the whole of it.
    heads: dict[str, str] = {}
    for each in bare:
        heads.setdefault(each.split("_")[0], bare[each])
    match = difflib.get_close_matches(given, heads, n=1)
    return heads[match[0]] if match else None


def did_you_mean(given: Iterable[str], known: Collection[str], *, prefix: str = "") -> str:
    """`` (did you mean NAME?)``: for each name of ``given``, the one of ``known`` closest to
    it (:func:`closest`), if any is close; nothing when none is."""
    close = [match for name in given if (match := closest(name, known, prefix=prefix))]
    return f" (did you mean {' and '.join(dict.fromkeys(close))}?)" if close else ""
