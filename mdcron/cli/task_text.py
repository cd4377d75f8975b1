"""A task and its times as one-line text, for `show`, `why`, `list` and the dashboard.

Apart from queries.py (which re-exports these): `show` and `history --json` need only these,
not the cron maths, chains and cache loader queries.py imports (~13 ms at start-up).
"""

from __future__ import annotations

from ..core.clock import to_dt
from ..settings.config import Config
from ..tasks.task import Task


def zone_name(task: Task, config: Config) -> str:
    if task.timezone or config.timezone:
        return task.timezone or config.timezone  # type: ignore[return-value]
    from ..core.cron import resolve_zone  # lazy: the local zone's name, only when none is set

    return str(resolve_zone(None))


HELD_REASON = "auto_suspended, held in the state"  # a `list` row's disabled_reason when held


def schedule_text(task: Task) -> str | None:
    """A `list` row's schedule: a chain's upstreams, else the task's schedule."""
    return "after " + ", ".join(task.after) if task.after else task.schedule


def iso(ts: float | None) -> str | None:
    return to_dt(ts).isoformat() if ts is not None else None


def command_text(task: Task) -> str:
    """What the task runs, in one line: its command, or the model and the prompt's start."""
    if task.run_as == "claude":
        text = " ".join((task.prompt or task.body or "").split())
        return f"claude: {text}"
    return f"{task.run_as}: {task.command}" if task.run_as != "shell" else str(task.command or "")


def outside_lines(task: Task) -> list[str]:
    """Issue 26, for `show` and `why`: the limits the task's process runs under and where its
    ping goes (scheme and host only: the path of a ping URL is its key)."""
    from ..tasks.outside_keys import describe_limits  # lazy: only for show and why

    lines = []
    limits = describe_limits(task.memory_max, task.nice, task.io_class)
    if limits:
        how = (" (cgroup memory.max where the tick can make one, else RLIMIT_AS)"
               if task.memory_max is not None else "")
        lines.append(f"limits: {limits}{how}")
    if task.ping_url:
        scheme, _, rest = task.ping_url.partition("://")
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
        lines.append(f"pings: {scheme}://{host}/… at the start (/start) and the end (the URL"
                     " on success, /fail or /<exit code> on failure)")
    return lines
