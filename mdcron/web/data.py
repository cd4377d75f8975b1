"""What the pages show, read through the same core functions as the CLI (queries, store,
cache, heal, comments, incidents, doctor). Pure reads: nothing here changes state, except the
parse cache's own rows that `load_all` refreshes exactly as `list` does.

Lazy imports: each page's view loads the core modules it reads (cache, pauses, comments, heals,
incidents, doctor, locks) when that page is asked for, so the server starts without them.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path

from ..cli.history_rows import history_json
from ..cli.queries import Loaded, explain, iso, list_rows, loaded_with_state, outside_lines
from ..core import safe_fs
from ..core.clock import to_dt
from ..core.limits import check_instant
from ..core.records import asdict, replace
from ..settings.config import Config, ConfigError, load_config
from ..state.runs import RunFilter
from ..state.store import state_store
from ..tasks.task import Task, TaskSet

STALE_TICK = 180.0  # seconds without a tick before the banner says so (issue 10: > 3 min)
PAGE = 50
LOG_TAIL = 256 * 1024  # bytes of a log shown on the run page
ACTIVITY = 20  # the newest actions people took on a task (its page's "Activity")
INTEGRITY_AGE = 600.0  # seconds a passed database integrity check serves the polled Health


class NotFound(LookupError):
    """An id the page cannot show: a 404 with this message."""


def config_or_problems(home: Path) -> tuple[Config | None, list[str]]:
    """The config and its warnings, or None and its problems (the page shows them)."""
    try:
        config, warnings = load_config(home)
    except ConfigError as exc:
        return None, [str(p) for p in exc.problems]
    return config, [str(w) for w in warnings]


# Tasks this process decoded, by file: (stat the cache row was taken at, Task). A file whose
# stat is unchanged since is the same task: no JSON decode (and no query) per file per poll.
_TASKS: dict[str, tuple[object, Task]] = {}


def load_all(config: Config) -> Loaded:
    """queries.load_all, with the decoded tasks kept between requests (same cache, same
    problems, same rows)."""
    from ..schedule.cache import load

    view = load(config)
    return loaded_with_state(config, view, _decoded(view))


def task_set(config: Config) -> TaskSet:
    """The task set doctor reads, from the same cache and decoded tasks as load_all, without
    the state rows (the Health page needs none)."""
    from ..schedule.cache import load

    view = load(config)
    try:
        tasks = _decoded(view)
    finally:
        view.close()
    return TaskSet(tasks, view.problems, duplicate_ids(tasks))


def duplicate_ids(tasks: list[Task]) -> dict[str, list[str]]:
    """find_duplicate_ids, asked only about the ids that are there twice (1,000 Paths less)."""
    from collections import Counter

    from ..tasks.task import find_duplicate_ids

    seen = Counter(t.id for t in tasks)
    return find_duplicate_ids([t for t in tasks if seen[t.id] > 1])  # type: ignore[return-value]


def _decoded(view) -> list[Task]:
    """The view's valid tasks, decoded ones reused from _TASKS while their file is unchanged."""
    tasks = []
    for e in view.valid:
        mine = _TASKS.get(e.path)
        if (mine is not None and e.stat is not None and mine[0] == e.stat and not e.parsed
                and mine[1].id == e.id and mine[1].enabled == e.enabled):
            tasks.append(mine[1])
        elif (t := view.task(e)) is not None:
            tasks.append(t)
            if e.stat is not None:
                _TASKS[e.path] = (e.stat, t)
    if len(_TASKS) > 2 * len(view.entries) + 100:
        _TASKS.clear()
    return tasks



@lru_cache(maxsize=4096)
def words(schedule: str | None) -> str:
    """A few common schedules in plain words; the expression itself otherwise."""
    if not schedule:
        return ""
    s = schedule.strip()
    named = {"@hourly": "every hour", "@daily": "every day at midnight",
             "@midnight": "every day at midnight", "@weekly": "every Sunday at midnight",
             "@monthly": "on the 1st of every month", "@yearly": "every 1 January",
             "@annually": "every 1 January", "* * * * *": "every minute"}
    if s in named:
        return named[s]
    parts = s.split()
    if len(parts) == 5:
        m, h, dom, mon, dow = parts
        if m.startswith("*/") and h == dom == mon == dow == "*":
            return f"every {m[2:]} minutes"
        if m.isdigit() and h == dom == mon == dow == "*":
            return f"every hour at :{int(m):02d}"
        if m.isdigit() and h.isdigit() and dom == mon == "*":
            at = f"{int(h):02d}:{int(m):02d}"
            days = {"*": "every day", "1-5": "weekdays", "0,6": "weekends", "6,0": "weekends",
                    **{str(i): n + "s" for i, n in enumerate(("Sunday", "Monday", "Tuesday",
                       "Wednesday", "Thursday", "Friday", "Saturday"))}, "7": "Sundays"}
            return f"{days.get(dow, 'days ' + dow)} at {at}"
    return s


def banners(config: Config, loaded: Loaded, now: float) -> dict:
    from ..schedule.pause import maintenance

    out: dict = {"duplicates": {k: [str(p) for p in v]
                                for k, v in duplicate_ids(loaded.tasks).items()},
                 "stale_tick": None, "open_incidents": 0,
                 "maintenance": maintenance(str(config.home))}
    if config.state_exists:
        from ..state.store import last_tick

        with state_store(config) as store:
            last = last_tick(config, store)
            out["open_incidents"] = store.open_incident_count()
        if last is not None and now - float(last) > STALE_TICK:
            out["stale_tick"] = now - float(last)
    return out


def tasks_view(config: Config, now: float, tag: str | None = None,
               status: str | None = None, q: str | None = None, sort: str | None = None,
               desc: bool = False) -> dict:
    """Rows as `list --json` gives them, filtered (tag, status, the search `q`) and sorted;
    each with its last runs (`recent`); plus what the banners need."""
    from ..schedule.pause import pauses
    from .find import matches, recent_runs, sort_keys, sort_rows

    loaded = load_all(config)
    _reuse_next_fires(config, loaded, now)
    rows = list_rows(config, loaded, now, tag or None)
    _remember_next_fires(config, loaded, rows, now)
    paused = pauses(str(config.home))
    for r in rows:
        r["schedule_words"] = words(r["schedule"])
        p = paused.get(r["id"])
        r["paused_until"] = iso(p["until"]) if p else None
    if status:
        rows = [r for r in rows if _status_of(r) == status]
    if q and q.strip():
        rows = [r for r in rows if matches(r, q)]
    dots = recent_runs(config, [r["id"] for r in rows if r["valid"]])
    for r in rows:
        r["status"] = _status_of(r)
        r["keys"] = sort_keys(r, r["status"])
        r["recent"] = dots.get(r["id"]) or {"groups": [], "n": 0, "summary": ""}
    rows = sort_rows(rows, sort, desc)
    tags = sorted({t for task in loaded.tasks for t in task.tags})
    return {"rows": rows, "tags": tags, **banners(config, loaded, now)}


# The next fire of each task as this process last computed it: (schedule, zone) -> (asked at,
# fire). Valid while the fire is still ahead; it feeds next_fire's `due` hint exactly like the
# cache's (floor, next_due): the first fire after `floor`. Saves a cron scan per task per poll.
_NEXT: dict[tuple[str, str, str | None], tuple[float, float | None]] = {}


def _reuse_next_fires(config: Config, loaded: Loaded, now: float) -> None:
    for task in loaded.tasks:
        hint = loaded.due.get(task.id)
        if hint is not None and hint[0] <= now and (hint[1] is None or now < hint[1]):
            continue  # the tick's own hint holds
        mine = _NEXT.get((task.id, task.schedule, task.timezone or config.timezone))
        if mine is not None and mine[0] <= now and (mine[1] is None or now < mine[1]):
            loaded.due[task.id] = mine


def _remember_next_fires(config: Config, loaded: Loaded, rows: list[dict], now: float) -> None:
    by_id = {t.id: t for t in loaded.tasks}
    for r in rows:
        task = by_id.get(r["id"])
        if task is not None and task.enabled and r["valid"]:
            fire = datetime.fromisoformat(r["next_fire"]).timestamp() if r["next_fire"] else None
            _NEXT[(task.id, task.schedule, task.timezone or config.timezone)] = (now, fire)
    if len(_NEXT) > 4 * len(by_id) + 100:  # renamed tasks: drop the stale keys now and then
        _NEXT.clear()


def _status_of(row: dict) -> str:
    if not row["valid"]:
        return "invalid"
    if not row["enabled"]:
        return "disabled"
    return str(row["last_status"] or "never")


def task_view(config: Config, task_id: str, now: float) -> dict:
    """`show --json` plus why, the next 5 fires, 50 runs, heals, comments and the file."""
    from ..claude.comments import thread
    from ..core.cron import schedule_of
    from ..schedule.pause import maintenance, pauses
    from ..selfheal.healer import heal_history

    loaded = load_all(config)
    task = next((t for t in loaded.tasks if t.id == task_id), None)
    if task is None:
        raise NotFound(f"no task with id {task_id!r}")
    runs: list[dict] = []
    heals: list[dict] = []
    comments: list[dict] = []
    activity: list[dict] = []
    state = loaded.states.get(task.id)
    if config.state_exists:
        with state_store(config) as store:
            runs = store.history(50, task.id)
            heals = heal_history(store, task.id, 10)
            comments = thread(store, task.id)
            activity = store.audit_rows(task.id, ACTIVITY)
    fires = []
    if task.enabled and not task.after:  # a downstream has no fires of its own: `why` says
        sched = schedule_of(task, config)
        t = to_dt(now)
        for _ in range(5):
            nxt = sched.next_after(t)
            if nxt is None:
                break
            fires.append(nxt.astimezone(sched.zone).isoformat())
            t = nxt
    try:
        raw = safe_fs.read_regular(task.path, LOG_TAIL)[:LOG_TAIL].decode("utf-8", "replace")
    except OSError:
        raw = ""
    front, _, _ = raw.partition("\n---")
    p = pauses(str(config.home)).get(task.id)
    fields = {k: (str(v) if k == "path" else v) for k, v in asdict(task).items() if k != "body"}
    shown = [history_json(r) for r in runs]
    return {
        "task": fields, "state": asdict(state) if state else None,
        "held": loaded.held.get(task.id),  # issue 22: a suspension its file could not take
        "runs": shown, "heals": heals,
        # issue 24: why self-heal was not attempted, from the newest run that says so
        "heal_note": next(({"run_id": r["run_id"], "note": r["note"]} for r in shown
                           if r.get("note")), None),
        "holders": _holders_of(config, task.uses),
        "maintenance": maintenance(str(config.home)),
        "comments": [{**c, "created_at": iso(c["created_at"]),  # type: ignore[arg-type]
                      "read_at": iso(c["read_at"])} for c in comments],  # type: ignore[arg-type]
        "why": [*explain(config, task, state, now), *outside_lines(task)],  # issue 26: limits
        "next": fires,
        "frontmatter": front.removeprefix("---").strip("\n"), "body": task.body,
        "paused_until": iso(p["until"]) if p else None,
        "schedule_words": words(task.schedule),
        "activity": [{**a, "at": iso(a["at"])} for a in activity],  # type: ignore[arg-type]
    }


def _holders_of(config: Config, uses: tuple[str, ...] | list[str]) -> dict[str, list[dict]]:
    """Who holds each of the task's `uses:` resources now (issue 24)."""
    if not uses:
        return {}
    from .find import resource_holders

    held = resource_holders(config)
    return {name: held.get(name, []) for name in uses}


def run_row(config: Config, run_id: int) -> dict:
    """The run's row; NotFound (a 404) when there is none."""
    row = None
    if config.state_exists:
        with state_store(config) as store:
            row = store.run(run_id)
    if row is None:
        raise NotFound(f"no run {run_id}")
    return row


def run_view(config: Config, run_id: int) -> dict:
    from .logread import read_chunk

    row = run_row(config, run_id)
    with state_store(config) as store:
        ladder_rows = store.slot_rows(str(row["task_id"]), float(row["scheduled_for"]))
        prev_id, next_id = store.neighbour_runs(str(row["task_id"]), run_id)
    running = row["status"] == "running"
    log, truncated, offset = "", False, 0
    path = row.get("log_path")
    chunk = read_chunk(str(path), config.logs_dir, None, final=not running) if path else None
    if chunk is not None:
        log, truncated, offset = chunk.text, chunk.skipped, chunk.offset
    if not log and row.get("output_tail"):
        log = str(row["output_tail"])
    return {"run": history_json(row), "ladder": [history_json(r) for r in ladder_rows if r],
            "log": log, "log_truncated": truncated, "log_offset": offset, "running": running,
            "prev_run": prev_id, "next_run": next_id,
            "timeout": _timeout_of(config, row) if running else None}


LOG_FILE_MAX = 64 * 1024 * 1024  # bytes of a log download; a longer log is cut at its start


def run_log_bytes(config: Config, run_id: int) -> bytes:
    """The run's log file as it is now (its tail past LOG_FILE_MAX), else the output tail
    the state kept. Read like the page reads it: only a regular file inside the logs folder."""
    from .logread import read_tail_bytes

    row = run_row(config, run_id)
    path = row.get("log_path")
    body = read_tail_bytes(str(path), config.logs_dir, LOG_FILE_MAX) if path else None
    if body is None:
        body = str(row.get("output_tail") or "").encode()
    return body


def _timeout_of(config: Config, row: dict) -> float | None:
    """The running run's timeout in seconds, as its lock records it (the holder's deadline)."""
    from ..core.lock_info import lock_path, read_info

    info = read_info(lock_path(config.locks_dir, str(row["task_id"])))
    if info is None or info.run_id != row["id"]:
        return None
    return max(0.0, info.deadline - info.started_at)


def history_view(config: Config, *, task: str | None, status: str | None,
                 trigger: str | None, day: str | None, before: int | None) -> dict:
    """A page of runs, newest first (keyset pagination on id: fast at any depth)."""
    where = RunFilter(task_id=task, status=status, trigger=trigger, before=before)
    if day:
        start = datetime.fromisoformat(day).astimezone()  # a local day (ValueError: 400)
        check_instant(start)  # 9999-12-31 + 1 day would overflow (InstantError: a ValueError)
        where = replace(where, started_from=start.timestamp(),
                        started_until=(start + timedelta(days=1)).timestamp())
    rows: list[dict] = []
    if config.state_exists:
        with state_store(config) as store:
            rows = store.history_page(where, PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    return {"runs": [history_json(r) for r in rows],
            "next_before": rows[-1]["id"] if more and rows else None}


def incidents_view(config: Config) -> list[dict]:
    from ..alerts.incidents import incident_json, list_incidents

    if not config.state_exists:
        return []
    with state_store(config) as store:
        return [incident_json(r) for r in list_incidents(store, include_resolved=True)]


def health_view(home: Path, config: Config | None, now: float) -> dict:
    """Doctor's checks (from this process's cached task set, read once), the tick's own view
    of its secrets, the outbox, the locks, the resources, maintenance mode, the hosts."""
    from ..cli.doctor import run_doctor
    from ..core.lock_info import holder_alive, read_info
    from ..schedule.pause import maintenance

    found = None
    tick_env = None
    if config is not None:
        found = task_set(config)
        tick_env = _tick_env(config)
    environ = dict(os.environ)
    if tick_env is not None:  # the key as the tick saw it, not as this process has it
        environ.pop("ANTHROPIC_API_KEY", None)
        if tick_env["names"].get("ANTHROPIC_API_KEY"):
            environ["ANTHROPIC_API_KEY"] = "set where the tick runs"
    checks = [c.to_json() for c in run_doctor(home, environ, now, found, INTEGRITY_AGE)]
    outbox: list[dict] = []
    locks: list[dict] = []
    if config is not None and config.state_exists:
        with state_store(config) as store:
            outbox = store.outbox_unsent(100)
        for r in outbox:
            r["created_at"] = iso(r["created_at"])
            r["next_attempt_at"] = iso(r["next_attempt_at"])
    if config is not None and config.locks_dir.is_dir():
        for path in sorted(config.locks_dir.glob("*.lock"))[:200]:
            info = read_info(path)
            if info is not None and holder_alive(info):
                locks.append({"task_id": info.task_id, "run_id": info.run_id,
                              "pid": info.tick_pid, "since": iso(info.started_at)})
    from .find import resource_holders
    from .hosts import hosts_view  # issue 11: None unless the state is shared

    return {"checks": checks, "outbox": outbox, "locks": locks,
            "maintenance": maintenance(str(home)), "tick_env": tick_env,
            "resources": resource_holders(config) if config is not None else {},
            "hosts": hosts_view(config) if config is not None else None}


def _tick_env(config: Config) -> dict | None:
    """{names: {NAME: set?}, since}: the secret names the tick last saw (run/environment.py),
    None before a tick recorded them."""
    import json

    from ..run.environment import TICK_ENV

    if not config.state_exists:
        return None
    with state_store(config) as store:
        raw = store.get_meta(TICK_ENV)
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("names"), dict):
        return None
    return {"names": {str(k): bool(v) for k, v in data["names"].items()},
            "since": iso(data.get("since"))}
