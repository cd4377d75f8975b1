"""A run's log read from a byte offset, for the run page's live tail (issue 24): the page
shows the last LOG_TAIL bytes, then asks for what was written since (`/api/runs/<n>/log`).

Only files under the home's logs folder are read, never through a FIFO (no wait); text is cut
at a whole UTF-8 character so a multi-byte character split by a write is not garbled: the
next read starts at its first byte.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core import safe_fs
from ..core.records import dataclass

LOG_TAIL = 256 * 1024  # bytes of a log the page shows, and at most what one read returns


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    offset: int  # where the next read starts
    size: int  # the file's size when read
    skipped: bool = False  # bytes between the asked offset and `text` were left out


def whole_chars(data: bytes) -> int:
    """How many leading bytes of `data` end on a UTF-8 character boundary."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)  # ASCII: complete
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)  # continuation bytes only: not UTF-8 anyway; replace, do not stall


def read_chunk(path: Path | str, logs_dir: Path, offset: int | None, *,
               final: bool = False, limit: int = LOG_TAIL) -> Chunk | None:
    """From `offset` (None: the last `limit` bytes) to the end, at most `limit` bytes (the
    latest ones: a reader far behind skips ahead). None when the file is not a log of this
    home or cannot be read. `final`: the writer is done, a cut character is kept (replaced)."""
    try:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(logs_dir)):
            return None
        fd = safe_fs.open_at(None, str(real), os.O_RDONLY)  # a FIFO there: refused, no wait
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - limit) if offset is None or offset > size else offset
        skipped = size - start > limit
        if skipped:
            start = size - limit
        fh.seek(start)
        data = fh.read(limit)
    if start and not skipped and offset is None:
        skipped = True  # the page's first view: the head of a long log is left out
    keep = len(data) if final else whole_chars(data)
    return Chunk(data[:keep].decode("utf-8", "replace"), start + keep, max(size, start + keep),
                 skipped or (offset is not None and start != offset))


def read_tail_bytes(path: Path | str, logs_dir: Path, limit: int) -> bytes | None:
    """The file's last `limit` bytes (all of a shorter one), for the log download; None when
    it is not a log of this home or cannot be read (the same rules as read_chunk)."""
    try:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(logs_dir)):
            return None
        fd = safe_fs.open_at(None, str(real), os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - limit))
        return fh.read(limit)
