"""The tick's own log lines: every line carries the wall time (ISO 8601, seconds, with the UTC
offset) and the tick's id, so the lines of two overlapping ticks in `logs/tick.log` can be told
apart. Plain text by default; `json` writes one object per line (ts, tick, level, event, task,
message) for log shippers. The daemon reuses `format_line` / `TickLog` for its own lines.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from datetime import datetime

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import TextIO

FORMATS = ("text", "json")
# lines about one task start with its id (tasks/key_checks.ID_PATTERN): "backup: success in 2s";
# compiled by `re` on its first use (json lines only: issue 27, not before a tick's first task)
_TASK_PREFIX = r"([A-Za-z0-9][A-Za-z0-9._-]{0,63}): "


def stamp(ts: float) -> str:
    """'2026-11-23T08:41:07+01:00': local time, seconds, with the offset."""
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def format_line(message: str, *, tick: str, ts: float, level: str = "info",
                event: str = "message", task: str | None = None, fmt: str = "text") -> str:
    """One log record as text (every physical line prefixed) or as one JSON object."""
    if fmt == "json":
        if task is None and not message.startswith("mdcron:"):
            match = re.match(_TASK_PREFIX, message)
            task = match.group(1) if match else None
        return json.dumps({"ts": stamp(ts), "tick": tick, "level": level, "event": event,
                           "task": task, "message": message}, ensure_ascii=False)
    if fmt != "text":
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    prefix = f"{stamp(ts)} [{tick}] "
    return "\n".join(prefix + line for line in (message.splitlines() or [""]))


def default_tick_id() -> str:
    """Short and distinct among ticks alive at the same time: the process id."""
    return f"t{os.getpid()}"


class TickLog:
    """A `say` callable: lines are written whole (threads of one tick never interleave
    within a line) and flushed at once, so they land in the log in event order."""

    def __init__(self, tick: str | None = None, fmt: str = "text", out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        self.tick = tick or default_tick_id()
        self.fmt = fmt
        self._out, self._err = out, err
        self._lock = threading.Lock()

    def __call__(self, message: str, *, level: str = "info", event: str = "message",
                 task: str | None = None) -> None:
        stream = (self._err or sys.stderr) if level in ("error", "warning") else (
            self._out or sys.stdout)
        line = format_line(message, tick=self.tick, ts=time.time(), level=level, event=event,
                           task=task, fmt=self.fmt)
        with self._lock:
            stream.write(line + "\n")
            stream.flush()

    def error(self, message: str, **fields: str) -> None:
        self(message, level="error", **fields)

    def warning(self, message: str, **fields: str) -> None:
        self(message, level="warning", **fields)
