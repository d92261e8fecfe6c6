"""A running job's output that the store does not have yet: bounded, and cut into chunks.

Each piece the job writes is appended as it is read (in the event loop's
thread, so cheaply). A flush cuts what came into chunks of at most
``MOST_CHUNK_BYTES``, each ending on a whole UTF-8 character, and sends them;
they are held until the store has them, since the write may fail, and then
go with the next one. However fast the job prints, at most ``held_bytes`` are
held: the oldest go first, and the gap their positions leave is what a
reader is told was dropped. The first chunks taken say so: when they are
the job's last too, its report may store them in the attempt's row.
"""

from __future__ import annotations

import collections

from taskq.broker.ops.output import MOST_CHUNK_BYTES, AttemptOutput, OutputChunk
from taskq.broker.records import Lease

# UTF-8 encodes a character in at most this many bytes.
_LONGEST_CHARACTER = 4


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _character_start_at_or_before(data: bytes | bytearray, index: int) -> int:
    """The start of the character byte ``index`` is in (``index`` itself if not UTF-8)."""
    for back in range(min(_LONGEST_CHARACTER - 1, index) + 1):
        if not _is_continuation(data[index - back]):
            return index - back
    return index


def _whole_characters(data: bytearray) -> int:
    """How many bytes of ``data`` hold whole characters: all but a character cut at its end."""
    if not data:
        return 0
    last = _character_start_at_or_before(data, len(data) - 1)
    lead = data[last]
    length = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return last if len(data) - last < length and lead >= 0xC0 else len(data)


class HeldOutput:
    """What one attempt wrote that the store does not have yet, at most ``held_bytes`` of it."""

    def __init__(self, lease: Lease, *, keep_bytes: int, held_bytes: int) -> None:
        """``keep_bytes``: how much of the attempt's output the store keeps."""
        self._lease = lease
        self._keep_bytes = keep_bytes
        self._held_bytes = held_bytes
        self._chunks: collections.deque[OutputChunk] = collections.deque()
        self._chunk_bytes = 0  # in _chunks
        self._uncut = bytearray()  # what came after the chunks, not yet cut
        self.written = 0
        """All the bytes the job wrote: where the next byte goes."""
        self._taken = False  # chunks were taken to send: a write may have stored some

    def feed(self, data: bytes) -> None:
        """Hold ``data``, the job's newest output, dropping the oldest held beyond the bound."""
        self.written += len(data)
        if len(data) >= self._held_bytes:
            self._chunks.clear()
            self._chunk_bytes = 0
            self._uncut[:] = data[-self._held_bytes :]
        else:
            self._uncut += data
        while self._chunks and self._chunk_bytes + len(self._uncut) > self._held_bytes:
            self._chunk_bytes -= self._chunks.popleft().size
        excess = len(self._uncut) - self._held_bytes
        if excess > 0:
            # Start on a character, not in the middle of one.
            while excess < len(self._uncut) and _is_continuation(self._uncut[excess]):
                excess += 1
            del self._uncut[:excess]

    def take(self, *, final: bool = False) -> AttemptOutput | None:
        """The chunks to send now, all that is held (``final``: the job has ended, so a
        character cut at the end goes as it is); None when there are none."""
        self._cut(final=final)
        if not self._chunks:
            return None
        first, self._taken = not self._taken, True
        return AttemptOutput(self._lease, tuple(self._chunks), self._keep_bytes, first)

    def stored(self, sent: AttemptOutput) -> None:
        """The store has ``sent``: stop holding its chunks."""
        end = sent.chunks[-1].end
        while self._chunks and self._chunks[0].end <= end:
            self._chunk_bytes -= self._chunks.popleft().size

    def _cut(self, *, final: bool) -> None:
        whole = len(self._uncut) if final else _whole_characters(self._uncut)
        start = self.written - len(self._uncut)
        taken = 0
        while taken < whole:
            end = min(taken + MOST_CHUNK_BYTES, whole)
            if end < whole:
                # Cut between characters; a run of bytes that are no UTF-8 is cut anywhere.
                boundary = _character_start_at_or_before(self._uncut, end)
                end = boundary if boundary > taken else end
            piece = bytes(self._uncut[taken:end])
            self._chunks.append(
                OutputChunk(start + taken, len(piece), piece.decode(errors="replace"))
            )
            self._chunk_bytes += len(piece)
            taken = end
        del self._uncut[:taken]
