"""The daemon's lock file (state/daemon.lock): held by the daemon (DaemonLock, an flock whose
text names the holder and its last tick), read from outside it: who holds it, and whether that
process still runs (`doctor`, and a second daemon refusing to start).
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from ..core import safe_fs
from ..core.lock_info import process_matches
from ..core.private_files import open_private
from ..core.units import format_duration

LOCK_NAME = "daemon.lock"


def read_holder(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(safe_fs.read_regular(path, 1 << 16))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def daemon_alive(info: dict[str, object] | None) -> bool:
    """Is the daemon named in the lock's text still that same running process?"""
    if not info:
        return False
    # type: ignore[arg-type]
    return process_matches(info.get("pid"), info.get("start"), info.get("boot"))


def daemon_status(home: Path, now: float) -> tuple[str, str] | None:
    """For doctor: ("alive", detail) / ("gone", detail), or None when no daemon holds or left
    the lock (never ran, or stopped cleanly: it empties the lock's text on the way out)."""
    path = home / "state" / LOCK_NAME
    info = read_holder(path)
    if not info:
        return None
    pid = info.get("pid")
    if not daemon_alive(info):
        return "gone", f"the daemon (pid {pid}) ended without stopping (killed?); lock {path}"
    last = info.get("last_tick")
    since = now - float(info.get("started_at") or now)  # type: ignore[arg-type]
    ago = f"last tick {format_duration(max(0.0, now - float(last)))} ago" if last else "no tick yet"
    return "alive", f"pid {pid}, up {format_duration(max(0.0, since))}, {ago}"


class AlreadyRunning(Exception):
    """Another daemon holds this home's lock; the message names it."""


class DaemonLock:
    """flock on state/daemon.lock; the text inside names the holder and its last tick."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / LOCK_NAME
        self.root = state_dir.parent  # the home: state/ is walked from it, never followed
        self.fd: int | None = None
        self.info: dict[str, object] = {}

    def acquire(self, info: dict[str, object]) -> None:
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT, root=self.root)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise AlreadyRunning(describe_holder(read_holder(self.path), self.path)) from None
        self.fd = fd
        self.update(**info)

    def update(self, **info: object) -> None:
        if self.fd is None:
            return
        self.info.update(info)
        data = json.dumps(self.info, sort_keys=True).encode()
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, data)

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def describe_holder(info: dict[str, object] | None, path: Path) -> str:
    if not info:
        return f"another daemon holds {path} (it has not said who it is yet)"
    since = datetime.fromtimestamp(float(info.get("started_at", 0)), UTC)  # type: ignore[arg-type]
    return (f"a daemon already runs for this home: pid {info.get('pid')} since"
            f" {since.isoformat(timespec='seconds')} (lock {path})")
