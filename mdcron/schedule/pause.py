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

MAINTENANCE = "maintenance.json"
PAUSES = "paused_until.json"


def _state(home: str) -> str:
    return os.path.join(home, "state")


def maintenance(home: str) -> dict | None:
    """The marker's content ({} when unreadable), or None when not in maintenance."""
    path = os.path.join(_state(home), MAINTENANCE)
    if not os.path.exists(path):
        return None
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_json(path: str, data: object) -> None:
    import json

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def start_maintenance(home: str, since: str, by: str) -> None:
    _write_json(os.path.join(_state(home), MAINTENANCE), {"since": since, "by": by})


def end_maintenance(home: str) -> bool:
    try:
        os.unlink(os.path.join(_state(home), MAINTENANCE))
        return True
    except FileNotFoundError:
        return False


def pauses(home: str) -> dict[str, dict]:
    import json

    try:
        with open(os.path.join(_state(home), PAUSES), encoding="utf-8") as fh:
            data = json.load(fh)
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
    _write_json(os.path.join(_state(home), PAUSES), data)


def idle_blocked(home: str, now: float) -> bool:
    """For fastpath.idle_tick: True when the full tick has a duty here (maintenance mode to
    report, or a timed pause to end)."""
    if os.path.exists(os.path.join(_state(home), MAINTENANCE)):
        return True
    if not os.path.exists(os.path.join(_state(home), PAUSES)):
        return False
    return any(p["until"] <= now for p in pauses(home).values())
