"""Issue 26: the figures Prometheus reads, gathered once for both outputs: the web's /metrics
(prometheus_client, web/metrics.py) and the tick's textfile (the text format by hand,
metrics_file.py). Names follow Prometheus' conventions: `mdcron_` prefix, base units
(`_seconds`, Unix times as `_timestamp_seconds`), counters ending in `_total`, label `task`.

`mdcron_task_runs_total` counts the rows history keeps: retention (`retention_days`) deleting
old rows makes it go down, which Prometheus' rate() reads as a counter reset.
"""

from __future__ import annotations

from ..core.records import dataclass, field
from .db import Tables
from .metrics_file import write as write_file

FAILED = ("failed", "timeout", "crashed", "lost")


@dataclass(slots=True)
class TaskFigures:
    last_success: float | None = None  # Unix time the last successful run ended
    last_failure: float | None = None  # ... the last failed, timed out, crashed or lost one
    last_duration: float | None = None  # seconds, of the last finished run or retry
    runs: dict[str, int] = field(default_factory=dict)  # status -> rows
    suspended: bool = False
    interval: float | None = None  # seconds between its next two fires, when known


@dataclass(slots=True)
class Figures:
    tasks: dict[str, TaskFigures] = field(default_factory=dict)
    outbox_pending: int = 0
    incidents_open: int = 0
    tick: tuple[float, float, float] | None = None  # lag, duration, Unix time of the last tick


class MetricsTable(Tables):
    def metric_rows(self) -> dict[str, list[tuple]]:
        """The raw figures (figures() shapes them): runs per task and status with the last
        end, each task's last run's duration, suspensions, the fire interval from the parse
        cache, pending outbox messages, open incidents."""
        db = self.connect()
        out = {
            "runs": db.execute(
                "SELECT task_id, status, count(*), max(finished_at) FROM runs"
                " WHERE status != 'running' GROUP BY task_id, status").fetchall(),
            "duration": db.execute(
                "SELECT task_id, duration_ms FROM runs WHERE id IN (SELECT max(id) FROM runs"
                " WHERE finished_at IS NOT NULL AND duration_ms IS NOT NULL"
                " AND kind != 'heal' AND status != 'skipped' GROUP BY task_id)").fetchall(),
            "state": db.execute(
                "SELECT task_id, suspended_at IS NOT NULL FROM task_state").fetchall(),
            "counts": db.execute(
                "SELECT (SELECT count(*) FROM outbox WHERE status IN ('pending', 'held')),"
                " (SELECT count(*) FROM incidents WHERE status = 'open')").fetchall(),
            "tick": db.execute(
                "SELECT value FROM meta WHERE key = 'tick_figures'").fetchall(),
            "interval": [],
        }
        if self.url is None:  # the parse cache is this host's own SQLite (schema 3, 4)
            out["interval"] = db.execute(
                "SELECT task_id, due_after - next_due FROM task_cache WHERE task_id IS NOT NULL"
                " AND due_after IS NOT NULL AND next_due IS NOT NULL").fetchall()
        return out


def figures(rows: dict[str, list[tuple]]) -> Figures:
    """Pure: metric_rows shaped per task."""
    out = Figures()

    def task(task_id: object) -> TaskFigures:
        return out.tasks.setdefault(str(task_id), TaskFigures())

    for task_id, status, count, ended in rows["runs"]:
        one = task(task_id)
        one.runs[str(status)] = int(count)
        if ended is None:
            continue
        if status == "success":
            one.last_success = max(one.last_success or 0.0, float(ended))
        elif status in FAILED:
            one.last_failure = max(one.last_failure or 0.0, float(ended))
    for task_id, ms in rows["duration"]:
        task(task_id).last_duration = int(ms) / 1000.0
    for task_id, suspended in rows["state"]:
        task(task_id).suspended = bool(suspended)
    for task_id, seconds in rows["interval"]:
        if seconds is not None and float(seconds) > 0:
            task(task_id).interval = float(seconds)
    if rows["counts"]:
        out.outbox_pending, out.incidents_open = (int(n or 0) for n in rows["counts"][0])
    if rows["tick"]:
        try:
            lag, duration, at = (float(x) for x in str(rows["tick"][0][0]).split())
            out.tick = (lag, duration, at)
        except ValueError:
            pass
    return out


# (name, type, help, the TaskFigures attribute) of each per-task gauge
TASK_GAUGES = (
    ("mdcron_task_last_success_timestamp_seconds", "Unix time the task's last successful run "
     "ended.", "last_success"),
    ("mdcron_task_last_failure_timestamp_seconds", "Unix time the task's last failed, timed "
     "out, crashed or lost run ended.", "last_failure"),
    ("mdcron_task_last_duration_seconds", "Seconds the task's last finished run took.",
     "last_duration"),
    ("mdcron_task_suspended", "1 while the ladder has suspended the task, else 0.", "suspended"),
    ("mdcron_task_interval_seconds", "Seconds between the task's next two fire times.",
     "interval"),
)
RUNS = ("mdcron_task_runs", "Runs recorded in history, by status (retention removes old ones).")
HOME_GAUGES = (
    ("mdcron_outbox_pending", "Notifications waiting to be sent (pending or held).",
     "outbox_pending"),
    ("mdcron_incidents_open", "Open incidents.", "incidents_open"),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value))


def exposition(data: Figures) -> str:
    """The task and home figures in Prometheus' text format (the tick's own come from
    metrics_file.tick_lines)."""
    lines: list[str] = []
    ids = sorted(data.tasks)
    for name, text, attr in TASK_GAUGES:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        for task_id in ids:
            value = getattr(data.tasks[task_id], attr)
            if value is not None:
                lines.append(f'{name}{{task="{_label(task_id)}"}} {_number(value)}')
    name, text = RUNS
    lines += [f"# HELP {name}_total {text}", f"# TYPE {name}_total counter"]
    for task_id in ids:
        for status, count in sorted(data.tasks[task_id].runs.items()):
            lines.append(f'{name}_total{{task="{_label(task_id)}",status="{_label(status)}"}}'
                         f" {count}")
    for name, text, attr in HOME_GAUGES:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge",
                  f"{name} {getattr(data, attr)}"]
    return "\n".join(lines) + "\n"


def write_textfile(store: MetricsTable, path: str, now: float, duration: float) -> None:
    """The `metrics_file` of a full tick: every figure, with the tick's own (meta.record_tick,
    which writes the figures the web reads, calls it). OSError when it cannot be written."""
    write_file(path, exposition(figures(store.metric_rows())), now, duration)
