"""What a task file says, as one hash that ignores what the scheduler writes into it (issue 23).

A suspension made on one host holds on every host until the task is enabled again or its file
is really edited (hosts/peers.py). "Edited" cannot be the file's mtime: a fresh `git clone` or
`cp` of the same file on another host is newer without saying anything new. So the suspension
keeps a hash of the file as suspended, and a host compares it with its own copy's. The
suspension itself writes `enabled: false` and `disabled_reason` into the suspending host's copy
(frontmatter_edit.py) while another host's copy still says `enabled: true`: those keys' lines
are left out of the hash, as are a byte-order mark and CRLF line endings (a checkout may add
them), so both copies hash alike while a change of the command, schedule or body does not.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from .frontmatter_edit import EditError, find_frontmatter, key_lines, split_lines
from .taskfile import MAX_BYTES

SCHEDULER_KEYS = frozenset({"enabled", "disabled_reason"})


def content_hash(data: bytes) -> str:
    """Pure: SHA-256 of the file's text without the scheduler's keys (any frontmatter
    problem: of the normalised text as it is)."""
    text = data.decode("utf-8", "surrogateescape").lstrip("\ufeff").replace("\r\n", "\n")
    lines = split_lines(text)
    try:
        opening, closing = find_frontmatter(lines)
    except EditError:
        keep = lines
    else:
        drop = {i for k in key_lines(lines, opening + 1, closing) if k.key in SCHEDULER_KEYS
                for i in range(k.start, k.end)}
        keep = [line for i, line in enumerate(lines) if i not in drop]
    return hashlib.sha256("".join(keep).encode("utf-8", "surrogateescape")).hexdigest()


def file_hash(path: Path) -> str | None:
    """content_hash of the file, or None when it cannot be read as a task file (missing, not
    a regular file, too large): such a copy is no edit. Opened non-blocking: a FIFO in its
    place does not hang the tick."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return content_hash(data) if len(data) <= MAX_BYTES else None
