"""Read-only views of tasks and state for the commands: list rows, `why` explanations."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..core.clock import to_dt
from ..core.cron import decide, fires_between, schedule_of
from ..core.cron import next_fire as next_fire  # re-exported: `list` and the web use it
from ..core.lock_info import held_lock_files, holder_alive, lock_path, read_info
from ..core.problems import Problem
from ..core.records import NamedTuple, dataclass, field
from ..core.units import format_duration
from ..run.resources import describe_holders, holders
from ..schedule.cache import View, load
from ..schedule.chains import explain as explain_chain
from ..schedule.chains import schedule_zone
from ..schedule.held import held
from ..schedule.observe import observe
from ..schedule.once_per import last_successes, skip_reason
from ..settings.config import Config
from ..state.store import TaskState, state_store
from ..tasks.run_keys import decision_time
from ..tasks.task import Task
from .run_policy import OVERLAP_WORDS, next_start, policy_lines
from .task_text import HELD_REASON, schedule_text, zone_name
from .task_text import command_text as command_text  # used below; re-exported: the web
from .task_text import iso as iso  # used below; re-exported: the web
from .task_text import outside_lines as outside_lines  # re-exported: the web, why


@dataclass(frozen=True, slots=True)
class Loaded:
    tasks: list[Task]
    problems: list[Problem]
    states: dict[str, TaskState]
    last_runs: dict[str, dict[str, object]]
    due: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # cache.due_hints
    held: dict[str, dict] = field(default_factory=dict)  # issue 22: schedule/held.py


def load_all(config: Config) -> Loaded:
    """Task files through the cache (cache.py): only changed files are parsed."""
    view = load(config)
    return loaded_with_state(config, view, view.task_set().tasks)


def loaded_with_state(config: Config, view: View, tasks: list[Task]) -> Loaded:
    """The tasks of a loaded cache view with their state rows and last runs (closes the view)."""
    states: dict[str, TaskState] = {}
    last: dict[str, dict[str, object]] = {}
    holds: dict[str, dict] = {}
    dues: dict[str, tuple[float, float | None]] = {}
    if config.state_exists:
        with state_store(config) as store:
            states, last, holds = store.task_states(), store.last_runs(), held(store)
            dues = view.fill_dues(states)  # issue 27: once after a config change, then cached
            view.save(store)
    view.close()
    return Loaded(tasks, view.problems, states, last, dues, holds)


def list_rows(config: Config, loaded: Loaded, now: float, tag: str | None) -> list[dict]:
    row = task_rows(config, loaded, now).row
    rows = [row(task) for task in loaded.tasks if not tag or tag in task.tags]
    if tag is None:
        rows += invalid_rows(loaded.problems)
    return rows


class TaskRows(NamedTuple):
    """list_rows' row of one valid task (`row`), with what it looked up once for 10,000
    (issue 27): the resources each task holds now (issue 12) and the lock files with a record
    in them. cli/list_json.py writes most rows of `list --json` as text and calls `row` for the
    others. `facts`: what a row is made of (Facts), which `list`'s table cells are made from
    (tables.task_cells) without a row's dict and its times as text (issue 27)."""

    row: Callable[[Task], dict]
    held: dict[str, list[str]]
    held_locks: set[str]
    facts: Callable[[Task], Facts]


class Facts(NamedTuple):
    """What one task's row says, worked out once (task_rows.facts): its row's values are these,
    as JSON wants them."""

    last: dict[str, object]  # its last run: started_at, status, host ({}: none)
    state: TaskState | None
    held: bool  # suspended, held in the state (schedule/held.py)
    fire: datetime | None  # next_fire
    fire_text: str | None
    start: datetime | None  # the fire plus its jitter (next_start)
    start_text: str | None
    running_since: float | None
    overdue: float | None  # overdue_since, None while it runs or is held


def task_rows(config: Config, loaded: Loaded, now: float) -> TaskRows:
    held: dict[str, list[str]] = {}  # issue 12: task id -> resources it holds now
    if config.resources:
        for h in holders(config):
            if h.info is not None:
                held.setdefault(h.info.task_id, []).append(h.resource)
    locks_dir = config.locks_dir
    held_locks = held_lock_files(locks_dir)
    # looked up once, not per task (issue 27: 10,000 rows)
    last_runs, states, dues, suspended = loaded.last_runs, loaded.states, loaded.due, loaded.held
    zone = config.timezone or None
    fires: dict[float, tuple[datetime, str]] = {}
    new = tuple.__new__  # Facts._make without its checks: 10,000 rows

    def facts(task: Task) -> Facts:
        tid = task.id
        state = states.get(tid)
        due = dues.get(tid)
        is_held = tid in suspended
        first = due[1] if due is not None and due[0] <= now else None
        if (first is not None and now + 1e-6 < first and task.enabled and not task.after
                and not is_held):
            # next_fire's answer from the cache's hint, worked out once per distinct fire
            # (issue 27: 10,000 tasks share a few)
            nxt, next_text = fires.get(first) or fires.setdefault(first, _fire(first))
        else:
            nxt = None if is_held else next_fire(task, config, now, due)
            next_text = nxt.isoformat() if nxt else None
        if task.jitter:  # issue 26: the fire plus its jitter
            start = next_start(task, config, nxt)
            start_text = start.isoformat() if start else None
        else:
            start, start_text = nxt, next_text
        info = (read_info(lock_path(locks_dir, tid))  # as `why`: the lock says so
                if f"{tid}.lock" in held_locks else None)
        running_since = info.started_at if info is not None and holder_alive(info) else None
        overdue = (None if running_since is not None or is_held
                   else overdue_since(task, config, state, now, due))
        return new(Facts, (last_runs.get(tid) or {}, state, is_held, nxt, next_text, start,
                           start_text, running_since, overdue))

    def row(task: Task) -> dict:
        tid = task.id
        last, state, is_held, _, next_text, _, start_text, running_since, overdue = facts(task)
        started = last.get("started_at")
        return {
            "id": tid,
            "title": task.title,
            "schedule": schedule_text(task),
            "timezone": (task.timezone or zone) if task.timezone or zone
            else zone_name(task, config),
            "enabled": task.enabled and not is_held,
            "disabled_reason": HELD_REASON if is_held else task.disabled_reason,
            "last_run": iso(started) if started is not None else None,  # type: ignore[arg-type]
            "last_status": last.get("status"),
            "last_host": last.get("host"),  # issue 11: the host that ran it
            "running_since": iso(running_since) if running_since is not None else None,
            "next_run": start_text,
            "next_fire": next_text,
            "overdue_since": iso(overdue),
            "command": command_text(task),
            "consecutive_failures": state.consecutive_failures if state else 0,
            "tags": list(task.tags),
            "uses": list(task.uses),
            "holds": held.get(tid, []),
            "after": list(task.after),
            "file": str(task.path),
            "valid": True,
            "problem": None,
        }

    return TaskRows(row, held, held_locks, facts)


def _fire(first: float) -> tuple[datetime, str]:
    fire = to_dt(first)  # as next_fire makes it from the hint
    return fire, fire.isoformat()


def invalid_rows(problems: list[Problem]) -> list[dict]:
    """One row per invalid file, after the valid ones, in path order."""
    rows = []
    invalid = {p.path for p in problems if p.severity == "error"}
    for path in sorted(invalid):
        first = next(p for p in problems if p.path == path and p.severity == "error")
        rows.append({
            "id": path.stem, "title": None, "schedule": None, "timezone": None,
            "enabled": False, "disabled_reason": None, "last_run": None, "last_status": None,
            "last_host": None, "running_since": None, "next_fire": None,
            "next_run": None, "overdue_since": None, "command": None,
            "consecutive_failures": 0, "tags": [], "uses": [],
            "holds": [], "after": [], "file": str(path), "valid": False, "problem": str(first),
        })
    return rows


OVERDUE_AFTER = 90.0  # seconds: a tick claims its slot within the minute; later, it was missed


def overdue_since(task: Task, config: Config, state: TaskState | None, now: float,
                  due: tuple[float, float | None] | None = None) -> float | None:
    """The first fire the task has not run although it is OVERDUE_AFTER past (cron stopped, the
    tick crashed): `list` says "due 6 min ago, not run" rather than show only the next fire.
    None when nothing is missed, for a disabled task, a chain, or one no tick has seen yet."""
    if not task.enabled or task.after or state is None or not state.enabled:
        return None
    if due is not None:  # the cache's (floor, first fire after floor): no cron maths
        first = due[1]
    else:
        floor = state.not_before - 1e-6
        if state.last_slot is not None:
            floor = max(floor, state.last_slot)
        try:
            fire = schedule_of(task, config).next_after(to_dt(floor))
        except Exception:  # a state row out of range: `why` says it; the list stays readable
            return None
        first = fire.timestamp() if fire is not None else None
    return first if first is not None and now - first >= OVERDUE_AFTER else None





def explain(config: Config, task: Task, state: TaskState | None, at: float) -> list[str]:
    """`why`: the decision for this instant, in plain words, with what it rests on; first
    that nothing runs at all while maintenance mode lasts (issue 24)."""
    from ..schedule.pause import maintenance  # lazy: one stat, only when `why` is asked

    marker = maintenance(str(config.home))
    if marker is None:
        return _explain(config, task, state, at)
    return [f"paused: maintenance mode since {marker.get('since', '?')} (by"
            f" {marker.get('by', '?')}) — nothing runs until it is resumed (`scheduler.py"
            " resume`, or Resume on the dashboard's Health page); what follows is what would"
            " happen without it", *_explain(config, task, state, at)]


def _explain(config: Config, task: Task, state: TaskState | None, at: float) -> list[str]:
    if task.after:  # issue 12: a chain waits for its upstreams (chains.py)
        return explain_chain(config, task, at) + issue12_lines(config, task, at)
    sched = schedule_of(task, config)
    zone = sched.zone
    at_dt = to_dt(at)

    def local(dt: datetime | None) -> str:
        return dt.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z") if dt else "never"

    where = zone_name(task, config)
    lines = [f"{task.id} ({task.path.name}): schedule {task.schedule!r} in {where}"]
    lines.append(f"asked about {local(at_dt)}")
    if not task.enabled:
        reason = f" ({task.disabled_reason})" if task.disabled_reason else ""
        lines.append(f"not due: the task is disabled{reason}; `enable {task.id}` turns it on")
        return lines
    if task.hosts and config.host_name not in task.hosts:  # issue 11
        lines.append(f"not on this host: hosts: [{', '.join(task.hosts)}] and this host is"
                     f" {config.host_name!r} (`host:` in scheduler.yaml); one of those claims it")
        return lines
    try:
        return lines + _decision_lines(config, task, state, at, local)
    except Exception as exc:  # a state row out of range: one line, as the tick says it
        from ..schedule.cache import maths_problem  # lazy: only for a broken task

        return [*lines, str(maths_problem(task.id, task.path, exc))]


def _decision_lines(config: Config, task: Task, state: TaskState | None, at: float,
                    local: Callable[[datetime | None], str]) -> list[str]:
    """`why`'s decision part: the state, the fires since, what decide() says and why."""
    sched = schedule_of(task, config)
    at_dt = to_dt(at)
    lines: list[str] = []
    state = observe(state, task, at)
    last = to_dt(state.last_slot) if state.last_slot is not None else None
    not_before = to_dt(state.not_before)
    lines.append(f"last claimed slot: {local(last)}")
    lines.append(f"first seen / enabled at: {local(not_before)}")
    since = last or not_before
    fires = fires_between(sched, min(since, at_dt), at_dt, limit=10)
    if fires:
        lines.append("fire times since then: " + ", ".join(local(f) for f in fires))
    else:
        lines.append("no fire time between then and now")
    catchup = task.catchup if task.catchup is not None else config.catchup
    decision = decide(sched, now=to_dt(decision_time(task, config, at)), last_slot=last,
                      not_before=not_before, catchup=catchup)  # issue 26: jitter
    verdict = {"run": "due: runs", "skip": "skipped", "wait": "not due"}[decision.action]
    reason = decision.reason
    if decision.action == "run" and decision.slot is not None and task.once_per:
        once = _once_per_skip(config, task, decision.slot.timestamp())  # as the tick decides
        if once is not None:
            verdict, reason = "skipped", f"{once} (once_per: {task.once_per})"
    same = decision.action == "wait" and reason.startswith("not due")
    lines.append(f"decision: {reason}" if same else f"decision: {verdict} — {reason}")
    if decision.action == "run" and decision.missed:
        lines.append(f"({decision.missed} earlier missed fire(s) coalesce into this one run)")
    info = read_info(lock_path(config.locks_dir, task.id))
    if holder_alive(info) and info is not None:
        held = format_duration(max(0.0, at - info.started_at))
        lines.append(f"locked: a run started {held} ago is still going; "
                     f"{OVERLAP_WORDS[task.overlap]}")
    lines.append(f"next fire: {local(decision.next_fire)}")
    lines += policy_lines(config, task, decision.next_fire, local)
    return lines + issue12_lines(config, task, at)


def issue12_lines(config: Config, task: Task, at: float) -> list[str]:
    """`why` for issue 12: the resources a task uses and who holds them."""
    lines = []
    if task.uses:
        lines += [f"uses {line} (on_busy: {task.on_busy})"
                  for line in describe_holders(config, task)]
    if task.once_per:
        reason = _once_per_skip(config, task, at)
        lines.append(f"once_per: {task.once_per}: " + (
            f"{reason}: slots until the {task.once_per} ends are skipped" if reason else
            f"no success yet this {task.once_per}: slots run until one succeeds"))
    return lines


def _once_per_skip(config: Config, task: Task, slot: float) -> str | None:
    """once_per.py's reason to skip `slot` (a success already this period), or None."""
    last = None
    if config.state_exists:
        with state_store(config) as store:
            last = last_successes(store, [task.id], slot).get(task.id)
    return skip_reason(slot, last, schedule_zone(task, config), task.once_per or "day")
