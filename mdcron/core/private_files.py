"""Owner-only folders and files, whatever the umask says: run logs, transcripts and heal backups
may hold a task's secrets. Shared by the runner, the Claude client and self-heal's tools.

Every path is walked from `root` (the home) without following a symlink (safe_fs.py): a
`logs/` or `logs/runs/<id>` swapped for a link to elsewhere is refused, never written through.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import safe_fs


def open_private(path: Path, flags: int, *, root: Path | None) -> int:
    """os.open(path, flags) for an owner-only file (0600) under `root`, its folders made 0700.
    Without a root (tests, a path a caller chose) the folder is taken as given and only the
    file itself is not followed."""
    if root is None:
        _make_as_given(path.parent)
        root = path.parent
    return safe_fs.open_file(path, flags, 0o600, root=root, create_dirs=True)


def _make_as_given(folder: Path) -> None:
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


def make_private_dirs(folder: Path, *, root: Path) -> None:
    """Create missing folders under `root` owner-only (0700), whatever the umask says."""
    safe_fs.ensure_dir(folder, root=root, mode=0o700)


def write_private(path: Path, data: bytes, *, root: Path) -> None:
    """Write a file readable by its owner only (folders created 0700), under `root`."""
    fd = safe_fs.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, root=root,
                           create_dirs=True)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
    finally:
        os.close(fd)


def append_private(path: Path, data: bytes, *, root: Path) -> None:
    """Append `data` in one write (O_APPEND) to an owner-only file under `root`."""
    fd = safe_fs.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, root=root,
                           create_dirs=True)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
