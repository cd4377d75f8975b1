"""`list` and `history` as tables that fit the terminal (issue 25; fit.py lays them out).

At 80 columns `list` is one line per task: id, status, next run, last run, with relative times
("in 4 min", "3 min ago") and a missed fire said as "due 6 min ago, not run"; a wider terminal
adds the schedule, title, absolute times (zone named), failures, tags, the command; `--wide`
shows every column uncut. Invalid files follow, one line each, pointing to `validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import tzinfo
from pathlib import Path

from ..core.clock import to_dt
from ..core.problems import Problem
from ..core.units import format_duration
from ..settings.config import Config
from ..tasks.task import Task
from .fit import Column, cut, paint, render, wants_colour
from .task_text import HELD_REASON, command_text, schedule_text, zone_name
from .timefmt import relative, short_absolute

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .queries import Facts

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


def table_cells(facts: Callable[[Task], Facts], tasks: Iterable[Task], config: Config,
                now: float, zone: tzinfo | None, shared: bool) -> list[list[str]]:
    """Each task's cells in LIST_COLUMNS order: what list_rows' row says of it, made from what
    the row is made of (queries.task_rows' facts), not from the row (issue 27: 10,000 rows,
    their dicts and their times written as text and read back were a fifth of `list`)."""
    fires: dict = {}  # the next run's two cells by fire: 10,000 tasks share a few (1,439)
    own = config.timezone or None
    out = []
    for task in tasks:
        zone_text = ((task.timezone or own) if task.timezone or own  # as the row's timezone
                     else zone_name(task, config))
        out.append(task_cells(task, facts(task), zone_text, now, zone, shared, fires))
    return out


def task_cells(task: Task, f: Facts, zone_text: str | None, now: float, zone: tzinfo | None,
               shared: bool, fires: dict) -> list[str]:
    """One task's cells; `fires`: the next run's two cells by (fire, overdue), shared by the
    rows of one table (they depend on nothing else)."""
    tid, overdue = task.id, f.overdue
    enabled = task.enabled and not f.held
    key = (overdue, True) if overdue is not None else (f.start, False) if f.start_text else None
    if key is not None:
        cells = fires.get(key)
        if cells is None:
            when = to_dt(overdue) if overdue is not None else f.start
            text = relative(when, now)
            if overdue is not None:
                text = f"due {text.removesuffix(' ago')} ago, not run"
            cells = fires[key] = (text, short_absolute(when, zone, now))
        next_run, next_at = cells
    elif task.after and enabled:
        next_run, next_at = "after " + ", ".join(task.after), ""
    else:
        next_run, next_at = "—", ""
    started = f.last.get("started_at")
    if started is not None:
        last = to_dt(started)  # type: ignore[arg-type]
        host = f.last.get("host")
        last_run = relative(last, now) + (f" on {host}" if shared and host else "")
        last_at = short_absolute(last, zone, now)
    else:
        last_run, last_at = "never", ""
    status = ("running" if f.running_since is not None else "disabled" if not enabled
              else str(f.last.get("status") or "never run"))
    fails = f.state.consecutive_failures if f.state else 0
    return [
        tid, task.title if task.title != tid else "", schedule_text(task) or "", status,
        next_run, next_at, last_run, last_at, str(fails or ""), zone_text or "",
        "" if enabled else ((HELD_REASON if f.held else task.disabled_reason) or "by_choice"),
        ", ".join(task.tags), command_text(task) or "", str(task.path),
    ]


def _colour(name: str, cell: str) -> str:
    if name == "status":
        return paint(cell, STATUS_COLOURS.get(cell.strip()))
    if name == "next run" and cell.startswith("due "):
        return paint(cell, "red")
    return cell


def table_lines(cells: Sequence[Sequence[str]], problems: Sequence[Problem], tasks_dir: Path,
                width: int, wide: bool) -> list[str]:
    """The table of valid tasks (table_cells), then one line per invalid file."""
    lines: list[str] = []
    if cells:
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
