"""What the pages show, read through the same core functions as the CLI (queries, store,
cache, heal, comments, incidents, doctor). Pure reads: nothing here changes state, except the
parse cache's own rows that `load_all` refreshes exactly as `list` does.

Lazy imports: each page's view loads the core modules it reads (cache, pauses, comments, heals,
incidents, doctor, locks) when that page is asked for, so the server starts without them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path

from ..cli.queries import Loaded, explain, iso, list_rows, loaded_with_state
from ..core import safe_fs
from ..core.clock import to_dt
from ..core.limits import check_instant
from ..settings.config import Config, ConfigError, load_config
from ..state.runs import RunFilter
from ..state.store import state_store
from ..tasks.run_keys import start_offset
from ..tasks.task import Task

STALE_TICK = 180.0  # seconds without a tick before the banner says so (issue 10: > 3 min)
PAGE = 50
LOG_TAIL = 256 * 1024  # bytes of a log shown on the run page


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
    return loaded_with_state(config, view, tasks)


def history_json(row: dict) -> dict:
    from ..cli.commands import _history_json

    return _history_json(row)


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
    from ..tasks.taskfile import find_duplicate_ids

    out: dict = {"duplicates": {k: [str(p) for p in v]
                                for k, v in find_duplicate_ids(loaded.tasks).items()},
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
               status: str | None = None) -> dict:
    """Rows as `list --json` gives them, filtered; plus what the banners need."""
    from ..schedule.pause import pauses

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
    from ..schedule.pause import pauses
    from ..selfheal.healer import heal_history

    loaded = load_all(config)
    task = next((t for t in loaded.tasks if t.id == task_id), None)
    if task is None:
        raise NotFound(f"no task with id {task_id!r}")
    runs: list[dict] = []
    heals: list[dict] = []
    comments: list[dict] = []
    state = loaded.states.get(task.id)
    if config.state_exists:
        with state_store(config) as store:
            runs = store.history(50, task.id)
            heals = heal_history(store, task.id, 10)
            comments = thread(store, task.id)
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
    return {
        "task": fields, "state": asdict(state) if state else None,
        "held": loaded.held.get(task.id),  # issue 22: a suspension its file could not take
        "runs": [history_json(r) for r in runs], "heals": heals,
        "comments": [{**c, "created_at": iso(c["created_at"]),  # type: ignore[arg-type]
                      "read_at": iso(c["read_at"])} for c in comments],  # type: ignore[arg-type]
        "why": explain(config, task, state, now), "next": fires,
        "frontmatter": front.removeprefix("---").strip("\n"), "body": task.body,
        "paused_until": iso(p["until"]) if p else None,
        "schedule_words": words(task.schedule),
    }


def run_view(config: Config, run_id: int) -> dict:
    if not config.state_exists:
        raise NotFound(f"no run {run_id}")
    with state_store(config) as store:
        row = store.run(run_id)
        if row is None:
            raise NotFound(f"no run {run_id}")
        ladder_rows = store.slot_rows(str(row["task_id"]), float(row["scheduled_for"]))
    log, truncated = "", False
    path = row.get("log_path")
    if path:
        log, truncated = _tail(Path(str(path)), config)
        if not log and row.get("output_tail"):
            log = str(row["output_tail"])
    return {"run": history_json(row), "ladder": [history_json(r) for r in ladder_rows if r],
            "log": log, "log_truncated": truncated, "running": row["status"] == "running"}


def _tail(path: Path, config: Config) -> tuple[str, bool]:
    """The end of a run's log, as text; only files under the home's logs folder."""
    try:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(config.logs_dir)):
            return "", False
        fd = safe_fs.open_at(None, str(real), os.O_RDONLY)  # a FIFO there: refused, no wait
        size = os.fstat(fd).st_size
        with os.fdopen(fd, "rb") as fh:
            fh.seek(max(0, size - LOG_TAIL))
            return fh.read().decode("utf-8", "replace"), size > LOG_TAIL
    except OSError:
        return "", False


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


def upcoming_view(config: Config, now: float, days: int) -> dict:
    """Fires of every enabled task in the next `days`, grouped by local hour.

    A downstream (`after:`) has no fires of its own: it is listed under each fire of its
    upstreams as "then …"; a `once_per` task is marked, since only its first success counts."""
    from ..core.cron import schedule_of

    loaded = load_all(config)
    end = to_dt(now + days * 86400)
    hours: dict[str, list[dict]] = {}
    cap = 48 if days <= 1 else 30  # per task: an every-minute task would fill the page
    total = 0
    enabled = [t for t in loaded.tasks if t.enabled]
    downstream: dict[str, list[str]] = {}
    for task in enabled:
        for up in task.after:
            downstream.setdefault(up, []).append(task.id)
    for task in enabled:
        if task.after:
            continue
        sched = schedule_of(task, config)
        offset = timedelta(seconds=start_offset(task, config))  # issue 26: the real start
        t, n = to_dt(now), 0
        while n < cap:
            nxt = sched.next_after(t)
            if nxt is None or nxt > end:
                break
            local = (nxt + offset).astimezone()
            hours.setdefault(local.strftime("%Y-%m-%d %H:00"), []).append(
                {"id": task.id, "at": local.strftime("%H:%M:%S" if offset else "%H:%M"),
                 "iso": (nxt + offset).isoformat(),
                 "once_per": task.once_per, "then": sorted(downstream.get(task.id, []))})
            t, n = nxt, n + 1
            total += 1
    for items in hours.values():
        items.sort(key=lambda i: i["at"])
    return {"hours": dict(sorted(hours.items())), "total": total, "days": days, "cap": cap}


def health_view(home: Path, config: Config | None, now: float) -> dict:
    from ..cli.doctor import run_doctor
    from ..run.locks import holder_alive, read_info
    from ..schedule.pause import maintenance

    checks = [c.to_json() for c in run_doctor(home, dict(os.environ), now)]
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
    from .hosts import hosts_view  # issue 11: None unless the state is shared

    return {"checks": checks, "outbox": outbox, "locks": locks,
            "maintenance": maintenance(str(home)),
            "hosts": hosts_view(config) if config is not None else None}
