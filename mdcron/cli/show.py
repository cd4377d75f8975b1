"""`show <id>` for people (issue 25): the schedule in words, the next 3 fires, the last 3 runs
with their status, the command, the settings that differ from the defaults in words (no Python
reprs), the file and its body; `--json` with ISO times and each run's `extra` as an object."""

from __future__ import annotations

from datetime import tzinfo

from ..core.clock import to_dt
from ..core.cron import schedule_of
from ..core.records import MISSING, asdict, fields
from ..core.units import format_duration
from ..state.task_state import TaskState
from ..tasks.task import Task
from .task_text import command_text, iso
from .timefmt import absolute, relative, words

FIRES = 3
RUNS = 3
SECONDS = ("timeout", "catchup", "busy_wait", "chain_window")  # shown as durations
SHOWN_APART = ("id", "title", "path", "schedule", "timezone", "command", "body", "prompt",
               "run_as", "enabled", "disabled_reason",
               "memory_max", "nice", "io_class", "ping_url",  # issue 26: outside_lines
               "retry", "retry_delay", "jitter", "overlap")  # issue 26: run_policy


def next_fires(task: Task, config, now: float, count: int = FIRES) -> list:
    """The task's next `count` fire instants (none for a chain or a disabled task)."""
    if task.after or not task.enabled:
        return []
    try:
        schedule = schedule_of(task, config)
        out, t = [], to_dt(now)
        while len(out) < count and (t := schedule.next_after(t)) is not None:
            out.append(t)
        return out
    except Exception:  # a schedule out of range: `why` explains; show stays readable
        return []


def _value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key in SECONDS and isinstance(value, (int, float)):
        return "always" if value == float("inf") else format_duration(float(value))
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def settings_lines(task: Task) -> list[tuple[str, str]]:
    """(key, words) for every key whose value differs from the default."""
    out = []
    for f in fields(task):
        if f.name in SHOWN_APART:
            continue
        value = getattr(task, f.name)
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)  # type: ignore[misc]
        if value == default or value in (None, "", (), {}):
            continue
        out.append((f.name.replace("_", " "), _value(f.name, value)))
    return out


def show_lines(task: Task, config, zone: tzinfo, zone_name: str, state: TaskState | None,
               runs: list[dict], now: float, error_text, width: int,
               notes: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """Everything `show` prints but the heals, top to bottom; wrapped to `width` (0: not).
    `notes`: (label, text) said after `enabled` (self-heal that is off for want of a key)."""
    lines = [f"{task.id}: {task.title}" if task.title != task.id else task.id]
    label = "{:<12}".format

    def add(key: str, text: str) -> None:
        lines.append(label(key) + text)

    add("file", str(task.path))
    if task.after:
        add("schedule", "after " + ", ".join(task.after)
            + (" (when it succeeds)" if len(task.after) == 1 else " (when they succeed)"))
    else:
        said = words(task.schedule)
        add("schedule", (f"{said} ({task.schedule})" if said != task.schedule else said)
            + f", in {zone_name}")
    enabled = "yes" if task.enabled else f"no ({task.disabled_reason or 'by_choice'})"
    add("enabled", enabled)
    for key, text in notes:
        add(key, text)
    if task.run_as == "claude":  # the prompt follows in full
        add("command", "claude: the prompt below")
    else:
        add("command", command_text(task) or "—")
    if state is not None and state.consecutive_failures:
        add("failures", f"{state.consecutive_failures} in a row")
    for key, text in settings_lines(task):
        add(key, text)
    from .task_text import outside_lines  # lazy: as explain; issue 26: limits, pings

    for line in outside_lines(task):
        key, _, text = line.partition(": ")
        add(key, text)
    fires = next_fires(task, config, now)
    for n, fire in enumerate(fires):
        add("next fires" if n == 0 else "", f"{absolute(fire, zone)}  ({relative(fire, now)})")
    if not fires:
        add("next fires", "none (disabled)" if not task.enabled else
            "when its upstreams succeed" if task.after else "none")
    for n, r in enumerate(runs[:RUNS]):
        took = format_duration(r["duration_ms"] / 1000) if r["duration_ms"] is not None else ""
        error = error_text(r)
        text = (f"#{r['id']} {r['status']} {absolute(r['started_at'], zone)}"
                f" ({relative(r['started_at'], now)}) {took}" + (f": {error}" if error else ""))
        add("last runs" if n == 0 else "", " ".join(text.split()))
    if not runs:
        add("last runs", "none yet")
    elif len(runs) > RUNS:
        add("", f"(`history --task {task.id}` for more)")
    body = (task.prompt if task.run_as == "claude" and task.prompt else task.body).strip()
    if width:  # a terminal: each line wrapped under its label
        import textwrap  # lazy: only for a terminal

        lines = [w for line in lines for w in (textwrap.wrap(
            line, width, subsequent_indent=" " * 12, break_long_words=False,
            break_on_hyphens=False) if len(line.split()) > 2 else [line]) or [""]]
    if body and not width:
        lines += ["", *body.splitlines()]
    return lines


def print_body(task: Task) -> None:
    """A terminal gets the task's Markdown body rendered by rich (headings, lists, code); a
    pipe gets the text as written (show_lines adds it there)."""
    body = (task.prompt if task.run_as == "claude" and task.prompt else task.body).strip()
    if not body:
        return
    from rich.console import Console  # lazy: only `show` in a terminal
    from rich.markdown import Markdown  # lazy: as Console

    print()
    Console(highlight=False).print(Markdown(body))


def show_json(task: Task, state: TaskState | None, hold: object, runs: list[dict],
              heals: list[dict], now: float, config, history_json) -> dict:
    """`show --json`: plain JSON types, times as ISO-8601, each run's extra an object."""
    out_task = {k: (str(v) if k == "path" else list(v) if isinstance(v, tuple) else v)
                for k, v in asdict(task).items()}
    for key in SECONDS:  # inf (catchup: always) is not JSON
        if out_task.get(key) == float("inf"):
            out_task[key] = "always"
    state_json = None
    if state is not None:
        state_json = asdict(state)
        for key in ("first_seen", "not_before", "last_slot"):
            state_json[key] = iso(state_json[key])
    out_runs = [history_json(r) for r in runs]  # `extra` as an object
    out_heals = [{k: (iso(v) if k.endswith("_at") and isinstance(v, (int, float)) else v)
                  for k, v in h.items()} for h in heals]
    return {"task": out_task, "schedule_words": words(task.schedule) if not task.after else
            "after " + ", ".join(task.after),
            "next": [f.astimezone(schedule_of(task, config).zone).isoformat()
                     for f in next_fires(task, config, now)],  # as the web's /api/tasks/<id>
            "state": state_json, "held": hold, "runs": out_runs, "heals": out_heals}
