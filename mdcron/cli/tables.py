"""`list` and `history` as tables that fit the terminal (issue 25; fit.py lays them out).

At 80 columns `list` is one line per task: id, status, next run, last run, with relative times
("in 4 min", "3 min ago") and a missed fire said as "due 6 min ago, not run"; a wider terminal
adds the schedule, title, absolute times (zone named), failures, tags, the command; `--wide`
shows every column uncut. Invalid files follow, one line each, pointing to `validate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo
from pathlib import Path

from ..core.problems import Problem
from ..core.units import format_duration
from .fit import Column, cut, paint, render, wants_colour
from .timefmt import as_dt, relative, short_absolute

STATUS_COLOURS = {"success": "green", "failed": "red", "timeout": "red", "crashed": "magenta",
                  "lost": "magenta", "skipped": "yellow", "running": "cyan", "overdue": "red",
                  "disabled": "yellow"}

LIST_COLUMNS = (
    Column("id", 0, least=12, most=32, first=True),
    Column("title", 6, least=12, most=40),
    Column("schedule", 5, least=9, most=24),
    Column("status", 0),
    Column("next run", 0, least=10),
    Column("next at", 4),
    Column("last run", 0),
    Column("last at", 8),
    Column("fails", 7, right=True),
    Column("zone", 9),
    Column("off because", 10, least=8, most=24),
    Column("tags", 12, least=8, most=24),
    Column("command", 13, least=12, most=48),
    Column("file", 14, least=12),
)


def _status(row: dict) -> str:
    if row.get("running_since"):
        return "running"
    if not row["enabled"]:
        return "disabled"
    return str(row["last_status"] or "never run")


def _next(row: dict, now: float, when: datetime | None) -> str:
    """`when`: the overdue fire, else the next run, parsed once (list_cells)."""
    if row.get("overdue_since"):
        return f"due {relative(when, now).removesuffix(' ago')} ago, not run"
    if row.get("next_run"):
        return relative(when, now)
    if row.get("after") and row["enabled"]:
        return "after " + ", ".join(row["after"])
    return "—"


def list_cells(row: dict, now: float, zone: tzinfo | None, shared: bool,
               fires: dict[tuple[str, bool], tuple[str, str]] | None = None) -> list[str]:
    """One task's cells in LIST_COLUMNS order (each time parsed once: 10,000 rows, issue 27).
    `fires`: the next run's two cells by (fire, overdue), shared by the rows of one table: they
    depend on nothing else, and 10,000 tasks have a few distinct fires (1,439 in the bench)."""
    last = as_dt(row["last_run"] or None)
    due = row.get("overdue_since")
    fire = due or row["next_run"]
    if fire:
        key = (fire, not due)
        cells = fires.get(key) if fires is not None else None
        if cells is None:
            when = as_dt(fire)
            cells = (_next(row, now, when), short_absolute(when, zone, now))
            if fires is not None:
                fires[key] = cells
        next_run, next_at = cells
    else:
        next_run, next_at = _next(row, now, None), ""
    return [
        row["id"], row["title"] if row["title"] != row["id"] else "", row["schedule"] or "",
        _status(row), next_run, next_at,
        (relative(last, now) + (f" on {row['last_host']}" if shared and row.get("last_host")
                                else "")) if last else "never",
        short_absolute(last, zone, now) if last else "",
        str(row["consecutive_failures"] or ""), row["timezone"] or "",
        "" if row["enabled"] else (row["disabled_reason"] or "by_choice"),
        ", ".join(row["tags"]), row.get("command") or "", row["file"],
    ]


def _colour(name: str, cell: str) -> str:
    if name == "status":
        return paint(cell, STATUS_COLOURS.get(cell.strip()))
    if name == "next run" and cell.startswith("due "):
        return paint(cell, "red")
    return cell


def list_lines(rows: Sequence[dict], problems: Sequence[Problem], tasks_dir: Path, now: float,
               zone: tzinfo | None, width: int, wide: bool, shared: bool) -> list[str]:
    """The table of valid tasks, then one line per invalid file."""
    valid = [r for r in rows if r["valid"]]
    fires: dict[tuple[str, bool], tuple[str, str]] = {}
    cells = [list_cells(r, now, zone, shared, fires) for r in valid]
    lines: list[str] = []
    if valid:
        lines += render(LIST_COLUMNS, cells, width, wide, _colour if wants_colour() else None)
    lines += invalid_lines(problems, tasks_dir, width, wide)
    return lines


def invalid_lines(problems: Sequence[Problem], tasks_dir: Path, width: int,
                  wide: bool) -> list[str]:
    """'bad.md:3: schedule: … (+1 more)', one line per invalid file, and where the rest is."""
    by_file: dict[Path, list[Problem]] = {}
    for p in problems:
        if p.severity == "error" and p.path != tasks_dir:
            by_file.setdefault(p.path, []).append(p)
    if not by_file:
        return []
    out = [f"{len(by_file)} invalid file(s), not run (`validate` shows every problem):"]
    for path in sorted(by_file):
        first, more = by_file[path][0], len(by_file[path]) - 1
        try:
            name = str(path.relative_to(tasks_dir))
        except ValueError:
            name = str(path)
        where = name + (f":{first.line}" if first.line else "")
        tail = f" (+{more} more)" if more else ""
        text = f"  {where}: {first.message}"
        out.append(text + tail if wide else cut(text, width - len(tail)) + tail)
    return out


HISTORY_COLUMNS = (
    Column("run", 0, right=True),
    Column("task", 0, least=10, most=28, first=True),
    Column("status", 0),
    Column("started", 0),
    Column("took", 1, right=True),
    Column("error", 2, least=12),
    Column("exit", 5, right=True),
    Column("trigger", 4),
    Column("attempt", 7, right=True),
    Column("kind", 6),
    Column("slot", 8),
    Column("host", 3),
)


def history_lines(rows: Sequence[dict], now: float, zone: tzinfo | None, width: int,
                  wide: bool, shared: bool, error_text) -> list[str]:
    """Recent runs, newest first; `error_text(row)` is the error column's words."""
    columns = [c for c in HISTORY_COLUMNS if shared or c.name != "host"]
    cells = []
    for r in rows:
        took = format_duration(r["duration_ms"] / 1000) if r["duration_ms"] is not None else ""
        row = [str(r["id"]), r["task_id"], str(r["status"] or ""),
               short_absolute(r["started_at"], zone, now), took, error_text(r),
               "" if r["exit_code"] is None else str(r["exit_code"]), r["trigger"] or "",
               str(r["attempt"]), r["kind"] or "", short_absolute(r["scheduled_for"], zone, now)]
        cells.append(row + ([str(r.get("host") or "")] if shared else []))
    return render(columns, cells, width, wide, _colour if wants_colour() else None)
