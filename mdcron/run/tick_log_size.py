"""`logs/tick.log` does not grow forever: the tick rotates it by size (issue 25).

The crontab line appends the tick's output to `logs/tick.log` (`>> logs/tick.log 2>&1`): the
shell opens the file, so mdcron can only look at what its stdout is. At the start of a tick,
when stdout is that file and it holds `LIMIT` bytes or more, the tick renames `tick.log.2` to
`.3`, `.1` to `.2`, `tick.log` to `.1`, opens a new `tick.log` and points its own stdout and
stderr at it. Why here and not logrotate or the crontab line: no second tool to install and
configure, and the line stays the one `install` writes; `copytruncate` would lose lines other
ticks append meanwhile, and a shell `test -s … && mv` in the line runs before every tick with
no lock.

Concurrent ticks: the renames happen under a lock (flock on the `logs/` folder's descriptor,
each process its own) and only while `tick.log` is still the file this tick's stdout holds; a
tick that finds its stdout already renamed to `tick.log.1` (another tick rotated between its
shell's open and this check) follows to the new file too. A tick that was already running when
another rotated keeps writing to `tick.log.1` until it ends. Cheap when there is nothing to do:
one fstat of stdout (a log below the limit, a terminal, a pipe to journald).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import time
from pathlib import Path

from ..core import safe_fs

NAME = "tick.log"
LIMIT = 10 * 1024 * 1024  # 10 MiB
KEEP = 3  # tick.log.1 … tick.log.3
LOCK_WAIT = 2.0  # seconds: another tick renames a few files, never longer


def keep_small(home: Path, limit: int = LIMIT, keep: int = KEEP) -> str | None:
    """Rotate `logs/tick.log` when it is this process's stdout and has reached `limit`.
    Returns a line for the log when it rotated, else None. Never raises."""
    try:
        out = os.fstat(1)
    except OSError:
        return None
    if not stat.S_ISREG(out.st_mode) or out.st_size < limit:
        return None  # the idle path: a small log, a terminal, a pipe
    try:
        folder = safe_fs.open_dir(home, home / "logs")
    except OSError:
        return None
    try:
        return _rotate(folder, out, home, limit, keep)
    except OSError as exc:  # a full disk, a folder we may not write: the tick still runs
        return f"mdcron: could not rotate {home / 'logs' / NAME}: {exc.strerror or exc}"
    finally:
        os.close(folder)


def _rotate(folder: int, out: os.stat_result, home: Path, limit: int, keep: int) -> str | None:
    if not _lock(folder):
        return None
    try:  # the lock goes with the folder's descriptor (closed by the caller)
        current = _stat(folder, NAME)
        if not _same(out, current):  # renamed since our shell opened it: follow it
            if _same(out, _stat(folder, f"{NAME}.1")):
                _point_output_at(folder, out)
            return None
        if current is None or current.st_size < limit:
            return None
        for n in range(keep - 1, 0, -1):
            try:
                os.rename(f"{NAME}.{n}", f"{NAME}.{n + 1}", src_dir_fd=folder, dst_dir_fd=folder)
            except FileNotFoundError:
                pass
        os.rename(NAME, f"{NAME}.1", src_dir_fd=folder, dst_dir_fd=folder)
        _point_output_at(folder, out)
        size = current.st_size / (1024 * 1024)
        return (f"mdcron: {home / 'logs' / NAME} reached {size:.1f} MiB: the older lines are in"
                f" {NAME}.1 (the last {keep} kept)")
    finally:
        fcntl.flock(folder, fcntl.LOCK_UN)


def _lock(folder: int) -> bool:
    """The folder's flock, waited for at most LOCK_WAIT (another tick renaming)."""
    give_up = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
        if time.monotonic() >= give_up:
            return False
        time.sleep(0.01)


def _stat(folder: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _same(a: os.stat_result, b: os.stat_result | None) -> bool:
    return b is not None and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _point_output_at(folder: int, old: os.stat_result) -> None:
    """stdout (and stderr, when it was the same file) append to a new `tick.log` (0600, not
    through a symlink)."""
    fd = safe_fs.open_at(folder, NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600,
                         shown=f"logs/{NAME}")
    try:
        for stream, target in ((sys.stdout, 1), (sys.stderr, 2)):
            try:
                if stream is not None:
                    stream.flush()
                if _same(old, os.fstat(target)):
                    os.dup2(fd, target)
            except (OSError, ValueError):
                continue
    finally:
        os.close(fd)
