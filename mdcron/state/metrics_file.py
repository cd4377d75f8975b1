"""Issue 26: the Prometheus textfile for node_exporter's textfile collector (`metrics_file:`),
written atomically (a temporary file in the same folder, fsync, rename), so the collector never
reads half a file. Standard library only: the idle tick (idle.py) rewrites the file with its own
tick figures and the task figures the last full tick left beside it (`<file>.tasks`), without
loading anything else. The text exposition format is written by hand here, never through
prometheus_client (the web's /metrics uses that, from the same figures: metrics.py).
"""

from __future__ import annotations

import os

TASKS_SUFFIX = ".tasks"  # the full tick's task and home figures, beside the file
TICK_HELP = (
    ("mdcron_tick_lag_seconds", "Seconds after the start of its minute the last tick began."),
    ("mdcron_tick_duration_seconds", "Seconds the last tick took until its figures were written."),
    ("mdcron_tick_last_timestamp_seconds", "Unix time of the last tick."),
)


def tick_lines(now: float, duration: float) -> str:
    """The tick's own figures in the text exposition format."""
    values = (now % 60.0, duration, now)
    out = []
    for (name, text), value in zip(TICK_HELP, values, strict=True):
        out += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name} {float(value)!r}"]
    return "\n".join(out) + "\n"


def write_atomic(path: str, text: str) -> None:
    """Replace `path` with `text`: write a temporary file beside it, fsync, rename. A reader
    sees the old file or the new one, never a part; mode 0644 (node_exporter reads it)."""
    folder = os.path.dirname(path) or "."
    temp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temp)
        raise
    os.close(fd)
    os.replace(temp, path)


def write(path: str, body: str, now: float, duration: float) -> None:
    """The whole file: `body` (the task and home figures), then the tick's; `body` is also kept
    beside it for the idle ticks."""
    write_atomic(path + TASKS_SUFFIX, body)
    write_atomic(path, body + tick_lines(now, duration))


def idle_write(path: str, now: float, duration: float) -> str | None:
    """The idle tick's part: the last full tick's figures (nothing else changed, or the tick
    would not be idle) with this tick's own. Returns an error line, or None; never raises."""
    try:
        with open(path + TASKS_SUFFIX, encoding="utf-8") as f:
            body = f.read()
        write_atomic(path, body + tick_lines(now, duration))
        return None
    except OSError as exc:
        return f"mdcron: metrics_file {path}: {exc.strerror or exc}"
