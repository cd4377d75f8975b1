"""The summary the idle tick reads instead of the parse cache's rows (meta cache_*: the key, the
seal, the problems' digest, counts, the tasks whose `hosts:` leave this host out), recomputed
from the rows by every save (cache.py).

Lazy imports: the `hosts:` matching (settings/state_url.py) only when the task rows changed.
"""

from __future__ import annotations

import json
import sqlite3

from ..core.problems import Problem
from ..settings.config import Config
from ..state import task_cache
from ..state.meta import read_meta
from .cache_json import Damaged, problems_digest, problems_from_json


def write_summary(db: sqlite3.Connection, key: str, config: Config,
                   hosts: bool = False) -> None:
    """What fastpath reads instead of the rows' problems, recomputed from the rows themselves
    (so that two ticks saving at once still leave a summary that matches the rows).
    `hosts`: task rows changed, so cache_elsewhere is recomputed too (it reads every task's
    JSON: not on a tick that only moved next_due)."""
    problems: list[Problem] = []
    damaged = False
    texts, tasks = task_cache.cached_problems(db)
    for text in texts:
        try:
            problems.extend(problems_from_json(text))
        except Damaged:
            damaged = True
    values = {
        "cache_key": key,
        "cache_sealed": "1",  # the rows are as save() wrote them (see the triggers, schema 3)
        "cache_problems": "damaged" if damaged else problems_digest(problems),
        "cache_errors": str(sum(p.severity == "error" for p in problems)),
        "cache_tasks": str(tasks),
        "cache_idle": "1",  # no config key gives every tick work (yet): state/idle.py reads it
        # the idle tick pings this itself (heartbeat.py, stdlib only): ${VAR}s unexpanded
        "cache_heartbeat": config.heartbeat_url or "",
    }
    if hosts or read_meta(db, "cache_elsewhere") is None:
        values["cache_elsewhere"] = _elsewhere(db, config)
    task_cache.seal(db, values)


def _elsewhere(db: sqlite3.Connection, config: Config) -> str:
    """JSON {id: hosts} of the enabled tasks whose `hosts:` leave this host out: due, they are
    still idle here (fastpath._idle_rows). Only rows naming hosts are decoded."""
    from ..settings.state_url import runs_here

    here, out = config.host_name, {}
    for task_id, text in task_cache.enabled_naming_hosts(db):
        try:
            hosts = json.loads(text)["hosts"]
        except (ValueError, TypeError, KeyError):
            continue  # not listed: due, it is not idle (the full tick looks)
        if isinstance(hosts, list) and hosts and not runs_here(tuple(hosts), here):
            out[task_id] = hosts
    return json.dumps(out, sort_keys=True, separators=(",", ":"))
