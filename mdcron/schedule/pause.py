"""Pauses: maintenance mode (nothing runs) and timed pauses (`disable --until`) that end by
themselves.

Both live as small JSON files in the state folder, so the idle fast path can see them with the
standard library alone (os, json) and hand the tick to the full path when one needs doing:
  - state/maintenance.json {"since": ISO, "by": name}: while it exists the tick runs nothing;
  - state/paused_until.json {task_id: {"until": epoch, "path": task file}}: the tick enables
    the task again (byte-preserving edit, as `enable`) once `until` has passed.

Lazy imports: json is imported inside the functions that read or write a file: the idle tick
imports this module for two os.path.exists and never loads json (which loads re: ~5 ms).
"""

from __future__ import annotations

import os

from ..core import safe_fs
from ..state.idle import PAUSE_FILES

MAINTENANCE, PAUSES = PAUSE_FILES  # the idle tick looks for both (state/idle.py)
READ_LIMIT = 1 << 20  # bytes of a marker read


def _read_json(home: str, name: str) -> object:
    """A marker's JSON, walked from the home without following a symlink or waiting on a FIFO
    (OSError, ValueError when it cannot be used)."""
    import json

    return json.loads(safe_fs.read_regular(os.path.join(_state(home), name), READ_LIMIT,
                                           root=home))


def _state(home: str) -> str:
    return os.path.join(home, "state")


def maintenance(home: str) -> dict | None:
    """The marker's content ({} when unreadable), or None when not in maintenance."""
    path = os.path.join(_state(home), MAINTENANCE)
    if not os.path.exists(path):
        return None
    try:
        data = _read_json(home, MAINTENANCE)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_json(home: str, name: str, data: object) -> None:
    """Replace state/<name> atomically, inside the state folder walked from the home."""
    import json

    text = json.dumps(data, indent=1, sort_keys=True)
    safe_fs.replace_file(os.path.join(_state(home), name), text.encode("utf-8"), root=home,
                         create_dirs=True)


def start_maintenance(home: str, since: str, by: str) -> None:
    _write_json(home, MAINTENANCE, {"since": since, "by": by})


def end_maintenance(home: str) -> bool:
    try:
        dir_fd, name = safe_fs.open_parent(os.path.join(_state(home), MAINTENANCE), root=home)
    except FileNotFoundError:
        return False
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(dir_fd)


def pauses(home: str) -> dict[str, dict]:
    try:
        data = _read_json(home, PAUSES)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)
            and isinstance(v.get("until"), (int, float))}


def set_pause(home: str, task_id: str, until: float | None, path: str | None = None) -> None:
    """Record (until given) or forget (None) a task's timed pause."""
    data = pauses(home)
    if until is None:
        if data.pop(task_id, None) is None:
            return
    else:
        data[task_id] = {"until": until, "path": path}
    _write_json(home, PAUSES, data)


def idle_blocked(home: str, now: float) -> bool:
    """For fastpath.idle_tick: True when the full tick has a duty here (maintenance mode to
    report, or a timed pause to end)."""
    if os.path.exists(os.path.join(_state(home), MAINTENANCE)):
        return True
    if not os.path.exists(os.path.join(_state(home), PAUSES)):
        return False
    return any(p["until"] <= now for p in pauses(home).values())
