"""The daemon's lock file (state/daemon.lock) read from outside the daemon: who holds it, and
whether that process still runs (`doctor`, and a second daemon refusing to start).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core import safe_fs
from ..core.lock_info import process_matches
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
