"""Per-task locks: an flock (portalocker's; on Linux taken through fcntl, the same lock) on
state/locks/<id>.lock, with the holder written inside.

The flock belongs to the open file description, and the tick passes that descriptor to the task's
process. So the lock is held exactly as long as the tick or the task lives: a tick killed with -9
leaves it held by a task that is still running (nothing starts twice), and a dead holder frees it
by itself. The JSON inside names the holder by pid *and* process start time *and* boot id, so a
reused pid can never pass for the holder when a stale lock is killed.

The holder's record and whether that holder still runs are read below run/ too (chains, leases):
core/lock_info.py.

Lazy imports: fcntl and portalocker load when a lock is taken, the process runner, signal and
time only when a stale holder must be killed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..core import safe_fs
from ..core.lock_info import LockInfo, boot_id, process_matches, process_start_time

# The holder's record is read below run/ too (core/lock_info.py); its names stay importable
# from here, where the lock is taken.
from ..core.lock_info import holder_alive as holder_alive
from ..core.lock_info import is_stale as is_stale
from ..core.lock_info import lock_path as lock_path
from ..core.lock_info import read_info as read_info
from ..core.lock_info import run_lock_path as run_lock_path

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import IO

# On Linux portalocker's lock is fcntl.flock(fd, LOCK_EX | LOCK_NB) (its POSIX LOCKER), so the
# tick calls flock itself: the same lock, without portalocker's import (~25 ms idle, ~100 ms on
# a loaded 2-core machine, most of it importlib.metadata, which importing only
# portalocker.portalocker still pays). test_locks.py proves that both exclude each other.
FLOCK_DIRECT = sys.platform == "linux"


def _lock(fd: int) -> bool:
    """An exclusive lock on the open file, without waiting: False when someone holds it."""
    if FLOCK_DIRECT:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # EWOULDBLOCK: held; anything else: not ours either (as portalocker)
            return False
        return True
    import portalocker

    try:
        portalocker.lock(_file(fd),
                         portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
    except portalocker.exceptions.LockException:
        return False
    return True


def _unlock(fd: int) -> None:
    if FLOCK_DIRECT:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    import portalocker

    portalocker.unlock(_file(fd))


def _file(fd: int) -> IO[str]:
    """A file object on the lock's descriptor (portalocker's API), which stays open."""
    return os.fdopen(fd, "r", encoding="utf-8", closefd=False)


class TaskLock:
    """One task's lock file. try_acquire never blocks. With `root` (the home) the folders from
    it to the file are walked, and made, without following a symlink (safe_fs.py): a
    `state/locks` swapped for a link cannot make the tick truncate a file elsewhere.

    The lock is held on a read-only descriptor, the one a task inherits (fileno): a task that
    runs as another user (issue 21) must not rewrite the record (pgid, tick pid, deadline) that
    a later root tick trusts to kill a stale holder. The record goes through a second,
    write-only descriptor that stays in the tick."""

    def __init__(self, path: Path, root: Path | None = None):
        self.path = path
        self.root = root
        # issue 27: descriptors, no file objects (the text reader's fstat, ioctl and lseek)
        self._fd: int | None = None  # read-only: holds the flock, inherited by the task
        self._writer: int | None = None
        self._size: int | None = None  # of the record last written; None: unknown

    @property
    def held(self) -> bool:
        return self._fd is not None

    def fileno(self) -> int:
        if self._fd is None:
            raise RuntimeError("lock not held")
        return self._fd

    def try_acquire(self) -> bool:
        """Take the lock if free. OSError (safe_fs.UnsafePath: one line saying which folder is
        a symlink) when the file cannot be opened."""
        root = self.root
        if root is None:  # the folder as given (tests): only the file itself is not followed
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            root = self.path.parent
        folder, name = safe_fs.open_parent(self.path, root=root, create=True)
        try:  # both descriptors from one walked folder: the same file
            writer = safe_fs.open_at(folder, name, os.O_WRONLY | os.O_CREAT, 0o600,
                                     shown=str(self.path))
            try:
                fd = safe_fs.open_at(folder, name, os.O_RDONLY, shown=str(self.path))
            except OSError:
                os.close(writer)
                raise
        finally:
            os.close(folder)
        if not _lock(fd):
            os.close(fd)
            os.close(writer)
            return False
        self._fd, self._writer, self._size = fd, writer, None
        return True

    def write(self, info: LockInfo) -> None:
        """The holder's record, in place of the last. Issue 27: a run writes three, each
        longer as a rule (its mark, then its pgid): the file is cut only when the new one is
        shorter, or its length is unknown (the first; ~60 µs each, four per run before). A
        reader at that moment gets no record either way (an empty file then, a cut one now)."""
        if self._writer is None:
            raise RuntimeError("lock not held")
        data = info.to_json().encode("utf-8")
        os.pwrite(self._writer, data, 0)
        if self._size is None or len(data) < self._size:
            os.ftruncate(self._writer, len(data))
        self._size = len(data)

    def release(self) -> None:
        """Clear the holder record, then unlock. The descriptor may live on in a task's
        leftover process only if that process escaped its group (then the lock stays held
        until it exits, which is the safe side)."""
        if self._fd is None:
            return
        try:
            if self._writer is not None:
                os.ftruncate(self._writer, 0)
        except OSError:
            pass
        try:
            _unlock(self._fd)
        finally:
            os.close(self._fd)
            if self._writer is not None:
                os.close(self._writer)
            self._fd = self._writer = self._size = None


def kill_holder(info: LockInfo, grace: float) -> list[str]:
    """Kill a stale holder: the task's whole process group first, then, if the tick that holds
    the lock is itself still alive (hung), that tick. Only processes whose identity matches the
    record are touched. Returns what was done, for the log."""
    from .process_group import kill_process_group

    done: list[str] = []
    if info.pgid and process_matches(info.pgid, info.child_start, info.boot_id):
        kill_process_group(info.pgid, grace)
        done.append(f"killed task process group {info.pgid}")
    killed = kill_leftovers(info, grace)  # what left the group (setsid)
    if killed:
        done.append(f"killed what left its group: {', '.join(killed)}")
    if info.tick_pid != os.getpid() and process_matches(
        info.tick_pid, info.tick_start, info.boot_id
    ):
        kill_process_group_or_pid(info.tick_pid, grace)
        done.append(f"killed hung tick {info.tick_pid}")
    return done


def stop_run_tree(info: LockInfo, grace: float) -> list[str]:
    """Issue 26 (`overlap: replace`): stop a live run's processes (its group, then what left
    it), never its tick: the tick lives on, records the stop and ends the run's ladder."""
    from .process_group import kill_process_group

    done = []
    if info.pgid and process_matches(info.pgid, info.child_start, info.boot_id):
        kill_process_group(info.pgid, grace)
        done.append(f"stopped process group {info.pgid}")
    return done + kill_leftovers(info, grace)


def kill_leftovers(info: LockInfo, grace: float) -> list[str]:
    """Issue 21: end what is left of the recorded run, through its cgroup and its mark
    (proctree.py), when it ran since this boot. Returns the processes killed, named."""
    if not info.mark or (info.boot_id is not None and info.boot_id != boot_id()):
        return []
    from .proctree import sweep  # lazy: only when a run is over; `list` reads holders only

    return sweep(info.mark, info.cgroup, info.child_start, grace, info.uid)


def kill_process_group_or_pid(pid: int, grace: float) -> None:
    """The tick is not a group leader of its own (cron started it); kill just that pid."""
    import signal
    import time

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if process_start_time(pid) is None:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
