"""Per-task locks: an flock (portalocker's; on Linux taken through fcntl, the same lock) on
state/locks/<id>.lock, with the holder written inside.

The flock belongs to the open file description, and the tick passes that descriptor to the task's
process. So the lock is held exactly as long as the tick or the task lives: a tick killed with -9
leaves it held by a task that is still running (nothing starts twice), and a dead holder frees it
by itself. The JSON inside names the holder by pid *and* process start time *and* boot id, so a
reused pid can never pass for the holder when a stale lock is killed.

Lazy imports: `list`, `why` and the dashboard import this module to read holders only; fcntl and
portalocker load when a lock is taken, the process runner, signal and time only when a stale
holder must be killed.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO

from ..core import safe_fs
from ..core.clock import monotonic

STALE_GRACE = 60.0  # a live holder past its deadline + this many seconds is stale
INFO_LIMIT = 64 * 1024  # bytes of a lock file read: a holder record is ~300


@dataclass(frozen=True, slots=True)
class LockInfo:
    task_id: str
    run_id: int | None
    tick_pid: int  # the process holding the lock (the tick)
    tick_start: int | None  # its start time, in clock ticks since boot (/proc/<pid>/stat)
    boot_id: str | None
    pgid: int | None  # the task's own process group, once it started
    child_start: int | None
    started_at: float  # Unix seconds, in the tick's (possibly injected) time
    deadline: float  # when the holder itself would have given up (wall clock: for people)
    mark: str | None = None  # the run's MDCRON_RUN mark, once it started (proctree.py)
    cgroup: str | None = None  # the run's own cgroup, when it has one (proctree.py)
    uid: int | None = None  # the uid the task runs as (`user:`), when not the tick's
    mono_deadline: float | None = None  # the same on CLOCK_MONOTONIC of boot_id: what decides

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LockInfo | None:
        try:
            data = json.loads(text)
            return cls(**data)
        except (ValueError, TypeError):
            return None


def lock_path(locks_dir: Path, task_id: str) -> Path:
    # Task ids are validated ([A-Za-z0-9][A-Za-z0-9._-]*, no "..") before they get here.
    return locks_dir / f"{task_id}.lock"


def run_lock_path(locks_dir: Path, task_id: str, run_id: int) -> Path:
    """Issue 26, `overlap: allow`: the lock of one run beside the task's own (run/overlap.py)."""
    return locks_dir / f"{task_id}@{run_id}.lock"


@lru_cache(maxsize=1)
def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def process_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def process_matches(pid: int | None, start: int | None, boot: str | None) -> bool:
    """True when `pid` is alive and is the very process that was recorded."""
    if not pid or pid <= 0:
        return False
    if boot is not None and boot_id() is not None and boot != boot_id():
        return False
    current = process_start_time(pid)
    if current is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return start is None
    return start is None or current == start


# On Linux portalocker's lock is fcntl.flock(fd, LOCK_EX | LOCK_NB) (its POSIX LOCKER), so the
# tick calls flock itself: the same lock, without portalocker's import (~25 ms idle, ~100 ms on
# a loaded 2-core machine, most of it importlib.metadata, which importing only
# portalocker.portalocker still pays). test_locks.py proves that both exclude each other.
FLOCK_DIRECT = sys.platform == "linux"


def _lock(fh: IO[str]) -> bool:
    """An exclusive lock on the open file, without waiting: False when someone holds it."""
    if FLOCK_DIRECT:
        import fcntl

        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # EWOULDBLOCK: held; anything else: not ours either (as portalocker)
            return False
        return True
    import portalocker

    try:
        portalocker.lock(fh, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
    except portalocker.exceptions.LockException:
        return False
    return True


def _unlock(fh: IO[str]) -> None:
    if FLOCK_DIRECT:
        import fcntl

        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return
    import portalocker

    portalocker.unlock(fh)


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
        self._fh: IO[str] | None = None
        self._writer: int | None = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def fileno(self) -> int:
        if self._fh is None:
            raise RuntimeError("lock not held")
        return self._fh.fileno()

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
                fh = os.fdopen(safe_fs.open_at(folder, name, os.O_RDONLY, shown=str(self.path)),
                               "r", encoding="utf-8")
            except OSError:
                os.close(writer)
                raise
        finally:
            os.close(folder)
        if not _lock(fh):
            fh.close()
            os.close(writer)
            return False
        self._fh, self._writer = fh, writer
        return True

    def write(self, info: LockInfo) -> None:
        if self._writer is None:
            raise RuntimeError("lock not held")
        data = info.to_json().encode("utf-8")
        os.ftruncate(self._writer, 0)
        os.pwrite(self._writer, data, 0)

    def release(self) -> None:
        """Clear the holder record, then unlock. The descriptor may live on in a task's
        leftover process only if that process escaped its group (then the lock stays held
        until it exits, which is the safe side)."""
        if self._fh is None:
            return
        try:
            if self._writer is not None:
                os.ftruncate(self._writer, 0)
        except OSError:
            pass
        try:
            _unlock(self._fh)
        finally:
            self._fh.close()
            if self._writer is not None:
                os.close(self._writer)
            self._fh = self._writer = None


def read_info(path: Path) -> LockInfo | None:
    try:  # not followed, never waited on: a FIFO or link in a lock's place reads as no holder
        text = safe_fs.read_regular(path, INFO_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return LockInfo.from_json(text) if text.strip() else None


def holder_alive(info: LockInfo | None) -> bool:
    """Is the recorded holder (the tick or its task's process group leader) still running?"""
    if info is None:
        return False
    return _running(info.tick_pid, info.tick_start, info.boot_id) or _running(
        info.pgid, info.child_start, info.boot_id
    )


def _running(pid: int | None, start: int | None, boot: str | None) -> bool:
    """The recorded process, and not a zombie: an orphan's zombie lingers where PID 1 does not
    reap, holding no file or lock (issue 21: a run whose leader is a zombie is over)."""
    if not process_matches(pid, start, boot):
        return False
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True  # matched through kill(0): it exists
    return raw[raw.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def is_stale(info: LockInfo, now: float) -> bool:
    """A live holder past its deadline + STALE_GRACE, on the monotonic clock of its boot: a
    wall clock set forward (or a `tick --now` replay) never makes a healthy run stale. A record
    from another boot is never stale (no holder survives a reboot: recovery finds it crashed).
    Only a record written before mono_deadline existed falls back to the wall clock."""
    if info.mono_deadline is None:
        return now > info.deadline + STALE_GRACE
    if info.boot_id is not None and boot_id() is not None and info.boot_id != boot_id():
        return False
    return monotonic() > info.mono_deadline + STALE_GRACE


def kill_holder(info: LockInfo, grace: float) -> list[str]:
    """Kill a stale holder: the task's whole process group first, then, if the tick that holds
    the lock is itself still alive (hung), that tick. Only processes whose identity matches the
    record are touched. Returns what was done, for the log."""
    from .process import kill_process_group

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
    from .process import kill_process_group

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
