"""How a job's parents ended, handed to its child as a file of JSON lines, one parent a line.

A job never reaches the store: the worker reads its parents' outcomes a page
at a time and writes them to a file before the job starts
(``taskq.worker.parent_results``), never holding more than a page; the
child reads the file one line at a time, as the job's loop asks
(``taskq.current_job().parent_results()``). A file works alike for a fresh
child and a pool child, whatever the size. This module is the format both
sides share; the child imports it, so it imports little.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from taskq.broker.records import ParentResult

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(ParentResult)


def encode(parents: Iterable[ParentResult]) -> bytes:
    """Lines of the file, one parent each."""
    buffer = bytearray()
    for parent in parents:
        _ENCODER.encode_into(parent, buffer, -1)
        buffer += b"\n"
    return bytes(buffer)


def read(path: str) -> Iterator[ParentResult]:
    """The outcomes in the file, one line at a time (in the child)."""
    with open(path, "rb") as file:
        for line in file:
            yield _DECODER.decode(line)
