"""A task lock's holder, as read from outside: the record in state/locks/<id>.lock (the tick,
its pid, start time and boot id, the task's process group, its deadline) and whether that holder
still runs. Every layer reads it (chains wait for a running upstream, leases find the run to
stop, `list` and the dashboard say what runs); taking the lock and killing a holder are the run
layer's (run/locks.py).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from . import safe_fs
from .clock import monotonic
from .records import dataclass, fields

STALE_GRACE = 60.0  # a live holder past its deadline + this many seconds is stale
INFO_LIMIT = 64 * 1024  # bytes of a lock file read: a holder record is ~300


@dataclass(frozen=True)
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
        # its fields are plain values: read directly, not copied by asdict's walk (issue 27:
        # three records per run)
        return json.dumps({name: getattr(self, name) for name in _NAMES}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LockInfo | None:
        try:
            data = json.loads(text)
            return cls(**data)
        except (ValueError, TypeError):
            return None


_NAMES = tuple(f.name for f in fields(LockInfo))


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


def held_lock_files(locks_dir: Path) -> set[str]:
    """Names of the lock files with a record in them (a released lock is emptied): only those
    can name a running holder. One directory read instead of a read per task."""
    try:
        with os.scandir(locks_dir) as entries:
            return {e.name for e in entries if e.name.endswith(".lock")
                    and e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_size}
    except OSError:
        return set()
