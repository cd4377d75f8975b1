"""Owner-only folders and files, whatever the umask says: run logs, transcripts and heal backups
may hold a task's secrets. Shared by the runner, the Claude client and self-heal's tools.
"""

from __future__ import annotations

import os
from pathlib import Path


def make_private_dirs(folder: Path) -> None:
    """Create missing folders owner-only (0700), whatever the umask says."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


def write_private(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only (folders created 0700)."""
    make_private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
    finally:
        os.close(fd)
