"""The parse cache's storage around its rows (cache.py): the key its rows hold for (a Config
tied to scheduler.yaml's bytes), its database opened read-only, and the summary the idle tick
reads instead of the rows (meta cache_*: the key, the seal, the problems' digest, counts, the
tasks whose `hosts:` leave this host out), recomputed from the rows by every save.

Lazy imports: the `hosts:` matching (settings/state_url.py) only when the task rows changed.
"""

from __future__ import annotations

import json
import sqlite3

from ..core.problems import Problem
from ..settings.config import Config, load_config
from ..state import cache_key as keys
from ..state import idle as fastpath
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


def cache_key_of(config: Config) -> str | None:
    """The cache key for this Config, or None when it cannot be tied to scheduler.yaml's bytes.
    cli.main reads the bytes before load_config; other callers (tests) are checked by loading
    the file again and comparing."""
    noted = keys.noted_config
    if noted is not None and noted[0] is config:
        text: str | None = noted[1]
    else:
        text = keys.config_text(str(config.home))
        try:
            if text is None or load_config(config.home)[0] != config:
                return None
        except Exception:
            return None
    try:
        return keys.cache_key(text)  # type: ignore[arg-type]
    except OSError:
        return None


def open_cache(config: Config) -> sqlite3.Connection | None:
    if not config.db_path.is_file():
        return None
    kept = fastpath.take_connection(str(config.db_path))  # issue 27: the idle check's, if it
    if kept is not None:  # declined for a due task (it only reads here)
        return kept
    try:
        return fastpath.connect_readonly(str(config.db_path))
    except sqlite3.Error:
        return None
