"""What is wrong with a SQLite state database that refused the tick, in one line.

A read-only file (chattr +i, a read-only mount, lost rights), a damaged page, a full disk or a
lock another process holds all surface as sqlite3 errors somewhere inside a tick. `describe`
turns one into the line a person acts on: the file, the cause and the fix, the same words
every minute (the direct alert collapses on them: cli/emergency.store_error_alert). It only
reads: stat, statvfs, the immutable flag.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

LOCK_BUDGET = 30.0  # seconds one Store may spend in total waiting for another writer's lock


class Locked(sqlite3.OperationalError):
    """Another connection held a lock past the store's budget (`budget`: LOCK_BUDGET unless
    shortened); `waited`: the seconds this store really waited, in SQLite's busy handler and
    in retries. `shown`: whole seconds waited, at most the budget: the same words every
    minute (the direct alert collapses on them), 30.0 and 30.9 s both 30."""

    def __init__(self, waited: float, budget: float = LOCK_BUDGET):
        self.waited = waited
        self.shown = int(min(waited, budget))
        super().__init__(f"database is locked (waited {self.shown} s)")


def is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in text or "busy" in text)


def is_trouble(exc: BaseException) -> bool:
    """An error of the database itself (its file, its disk, its lock), not of our SQL: the
    tick stops with `describe`'s line rather than a traceback."""
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return False
    if isinstance(exc, sqlite3.DatabaseError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT)


def describe(path: Path, exc: BaseException) -> str:
    """'the state database <path> <cause>; fix: <fix>', one line."""
    cause, fix = _cause_and_fix(path, exc)
    return f"the state database {path} {cause}; fix: {fix}"


def _cause_and_fix(path: Path, exc: BaseException) -> tuple[str, str]:
    text = str(exc).lower()
    folder = path.parent
    if isinstance(exc, Locked):
        return (f"is locked by another process (waited {exc.shown} s for it)",
                f"find the holder with `fuser -v {path}` (a sqlite3 shell, a backup?) and end"
                " its transaction")
    if is_busy(exc):  # store.py retries these within the budget: one here escaped that
        return (f"was locked for a moment, and SQLite gave up without waiting"
                f" ({exc}, {getattr(exc, 'sqlite_errorname', '?')})",
                "nothing to do if the next tick runs; if it repeats, run `scheduler.py"
                " doctor` and report it")
    if "full" in text or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return ("cannot grow: its disk is full",
                f"free space on the filesystem of {folder} (`df -h {folder}`)")
    if "readonly" in text or "read-only" in text or "unable to open" in text or (
            isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)):
        found = _why_unwritable(path)
        if found is not None:
            return found
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return (f"is damaged ({exc})",
                f"stop cron, then `mv {path} {path}.broken` and salvage it: `sqlite3"
                f" {path}.broken .recover | sqlite3 {path}` (or let the next tick start"
                " afresh: history is lost)")
    return (f"cannot be used ({exc})", "run `scheduler.py doctor` for what is wrong")


def _why_unwritable(path: Path) -> tuple[str, str] | None:
    folder = path.parent
    if any(immutable(p) for p in (path, folder)):
        return ("is marked immutable (chattr +i)", f"chattr -i {folder} {path}*")
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return ("is on a read-only filesystem", f"remount the filesystem of {folder}"
                    " read-write (`mount -o remount,rw …`)")
    except OSError:
        pass
    if not (os.access(folder, os.W_OK | os.X_OK)
            and (not path.exists() or os.access(path, os.R_OK | os.W_OK))):
        return ("is not writable by this user",
                f"chown/chmod u+rw {path}* and u+rwx {folder} for the user cron runs as")
    return None


def immutable(path: Path) -> bool:
    """The immutable attribute (chattr +i) stops even root from writing."""
    try:
        import fcntl  # lazy: only when a write was refused
        import struct  # lazy: as fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: no wait
        try:
            buf = fcntl.ioctl(fd, 0x80086601, struct.pack("l", 0))  # FS_IOC_GETFLAGS
        finally:
            os.close(fd)
        return bool(struct.unpack("l", buf)[0] & 0x10)  # FS_IMMUTABLE_FL
    except (OSError, ImportError):
        return False
