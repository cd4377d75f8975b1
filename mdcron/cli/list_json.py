"""`list --json` at 10,000 tasks (issue 27: ≤ 300 ms): a plain task's row written as text.

The cache keeps each task's listed fields as the JSON `list --json` writes them
(state/task_cache.listing_of); the row of a task whose row holds, and whose every other value
is one of the few plain ones, is those texts with the values that change (its last run, its
next fire, its failures) put between them, never a dict built and encoded. The plain case:
a shell task with a command, no `after:`, no jitter, no hold, no lock with a holder's record,
no resource held, and, when enabled, a next fire the cache's due hint answers. The hint answers
only while now is before that fire, so such a task is never overdue. Anything else, a listing
that fails its checks (checksum, id, enabled flag, file) or a task read from its file in this
pass, takes queries.task_rows, the one definition of a row; tests/test_cmds_scale.py holds the
two to the same bytes. The listings are checked, and the other rows' tasks decoded, before the
state rows are read (prepare): the cache's save after them closes its database.

Lazy imports: the rows that are not plain (queries.task_rows, schedule/listing.py) and the
machine's zone (core/cron.py) load only when a row needs them: the rows of lean_items are
most often all plain (issue 27: ~5 ms of imports).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii as _text

from ..core.lock_info import held_lock_files
from ..settings.config import Config
from ..state.task_cache import LISTED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..schedule.cache import View
    from ..schedule.cache_entry import Entry
    from ..schedule.cache_listed import Row
    from ..state.task_state import StateRow
    from .queries import Loaded, TaskRows

_ID, _TITLE, _SCHEDULE, _ZONE, _ENABLED, _REASON, _RUN_AS, _COMMAND, _TAGS, _USES, _AFTER, \
    _PATH, _JITTER = map(LISTED.index, ("id", "title", "schedule", "timezone", "enabled",
                                        "disabled_reason", "run_as", "command", "tags", "uses",
                                        "after", "path", "jitter"))


def _value(value: object, texts: dict) -> str | None:
    """A string or null as JSON, kept in `texts`; None for anything else (the row is left to
    task_rows)."""
    if value is None:
        return "null"
    if type(value) is not str:
        return None
    texts[value] = _text(value)
    return texts[value]


def prepare(view: View, listings: dict[str, str | None]) -> list[tuple[Entry, object]]:
    """Each valid entry with its listing's texts when the task is a plain one as far as its
    file goes, else its Task or TaskRecord, while the view's database is still open (the
    save after the state rows closes it); an entry that changed under us is left out, as
    listed() leaves it."""
    from ..schedule.listing import record_of_listing

    out: list[tuple[Entry, object]] = []
    for e in view.valid:
        item: object = e.task
        if item is None:
            listing = listings.get(e.path)
            item = _fields(e.id, e.path, e.enabled, listing)  # type: ignore[arg-type]
            if item is None:
                item = record_of_listing(view, listing, e) or view.task(e)
        if item is not None:
            out.append((e, item))
    return out


def json_items(config: Config, view: View, listings: dict[str, str | None],
               prepared: list[tuple[Entry, object]], loaded: Loaded, now: float,
               encode: Callable[[object], str]) -> list[str]:
    """Each valid task's row of `list --json` as text, in file-name order, then the invalid
    files' rows. `encode`: the encoder of a row that is not plain (render.item_encoder)."""
    from ..schedule.listing import record_of_listing
    from .queries import invalid_rows, task_rows

    rows = task_rows(config, loaded, now)
    default_zone, special = _zone_text(config), _special(config, loaded.held, rows)
    states, last_runs, dues = loaded.states, loaded.last_runs, loaded.due
    out = []
    texts: dict[str, str] = {}  # the JSON of statuses and hosts met before
    fires: dict[float, str] = {}  # and of fire times: a few for 10,000 rows
    for e, item in prepared:
        if type(item) is list:
            line = None if e.id in special else _plain(
                item, default_zone, states.get(e.id), last_runs.get(e.id), dues.get(e.id),
                now, texts, fires)
            if line is not None:
                out.append(line)
                continue
            item = record_of_listing(view, listings.get(e.path), e)  # a shell task: no query
            if item is None:
                continue
        out.append(encode(rows.row(item)))  # type: ignore[arg-type]  (a TaskRecord reads as a Task)
    out += map(encode, invalid_rows(loaded.problems))
    return out


def lean_items(config: Config, held: list[Row], states: dict[str, StateRow],
               last_runs: dict[str, dict], dues: dict[str, tuple[float, float | None]],
               holds: dict[str, dict], now: float, encode: Callable[[object], str],
               whole: Callable[[str], tuple[str, int] | None]) -> list[str] | None:
    """json_items for the rows of cache_listed.held_rows (no View, no Entry): the same rows,
    a plain one as text, another from its listing decoded (a Listed, as listed() makes it; a
    Claude task's from `whole`, its cached row) through queries.task_rows, made at the first
    such row; None when one fails its checks: the caller then takes the View, which reads
    that file. `states` ... `holds`: queries.Loaded's."""
    rows = None
    if config.resources:  # who holds a resource now: task_rows reads it
        rows = _task_rows(config, states, last_runs, dues, holds, now)
    default_zone, special = _zone_text(config), _special(config, holds, rows)
    out = []
    texts: dict[str, str] = {}
    fires: dict[float, str] = {}
    for r in held:
        tid = r.id
        f = _fields(tid, r.path, r.enabled, r.listing)
        line = None if f is None or tid in special else _plain(
            f, default_zone, states.get(tid), last_runs.get(tid), dues.get(tid), now, texts,
            fires)
        if line is None:
            from ..schedule.listing import listed_of  # lazy: only a row that is not plain

            item = listed_of(r.listing, tid, r.enabled, r.path, whole)
            if item is None:
                return None
            if rows is None:
                rows = _task_rows(config, states, last_runs, dues, holds, now)
            line = encode(rows.row(item))  # type: ignore[arg-type]  (a Listed reads as a Task)
        out.append(line)
    return out


def _task_rows(config: Config, states: dict, last_runs: dict, dues: dict, holds: dict,
               now: float) -> TaskRows:
    from .queries import Loaded, task_rows  # lazy: only a row that is not plain

    return task_rows(config, Loaded([], [], states, last_runs, dues, holds), now)


def _special(config: Config, holds: dict, rows: TaskRows | None) -> set[str]:
    """The ids whose row is never plain: suspended (`holds`), holding a resource (`rows`,
    task_rows': None when no resource is configured), a lock with a holder's record."""
    special = set(holds) | set(rows.held if rows is not None else ())
    special.update(name[:-5] for name in (  # "<id>.lock"
        rows.held_locks if rows is not None else held_lock_files(config.locks_dir)))
    return special


def _zone_text(config: Config) -> str:
    """The config's zone, else the machine's, as JSON: a row's zone when its task has none."""
    if config.timezone:
        return _text(config.timezone)
    from ..core.cron import resolve_zone  # lazy: only without a zone in scheduler.yaml

    return _text(str(resolve_zone(None)))


def _fields(task_id: str, path: str, enabled: bool, listing: str | None) -> list[str] | None:
    """The listing's texts, when its checks pass and the file makes a plain task."""
    if not listing:
        return None
    crc, _, body = listing.partition(" ")
    f = body.split("\n")
    if (len(f) != len(LISTED) or not crc.isdigit() or zlib.crc32(body.encode()) != int(crc)
            # the id and file as JSON when they need no escaping (else: not equal, not plain)
            or f[_ID] != f'"{task_id}"' or f[_PATH] != f'"{path}"'
            or f[_ENABLED] != ("true" if enabled else "false") or f[_RUN_AS] != '"shell"'
            or f[_COMMAND] == "null" or f[_AFTER] != "[]" or f[_JITTER] not in ("0.0", "0")):
        return None
    return f


def _plain(f: list[str], default_zone: str, state: object, last: dict | None,
           due: tuple[float, float | None] | None, now: float, texts: dict[str, str],
           fires: dict[float, str]) -> str | None:
    """The row as text, or None when the task's state makes it not a plain one."""
    nxt = "null"
    if f[_ENABLED] == "true":  # queries.next_fire from the hint; any other case: cron maths
        if due is None:
            return None
        floor, first = due
        if not (floor <= now and (first is None or now + 1e-6 < first)):
            return None
        if first is not None:
            nxt = fires.get(first)  # type: ignore[assignment]
            if nxt is None:
                nxt = fires[first] = f'"{datetime.fromtimestamp(first, UTC).isoformat()}"'
    if last:
        started = last.get("started_at")
        status, host = last.get("status"), last.get("host")
        status = texts.get(status) or _value(status, texts)
        host = texts.get(host) or _value(host, texts)
        if status is None or host is None:
            return None
        run = "null" if started is None else (  # task_text.iso
            f'"{datetime.fromtimestamp(started, UTC).isoformat()}"')  # type: ignore[arg-type]
    else:
        run = status = host = "null"
    fails = state.consecutive_failures if state is not None else 0  # type: ignore[attr-defined]
    if type(fails) is not int:
        return None
    zone = f[_ZONE] if f[_ZONE] not in ("null", '""') else default_zone
    return (f'{{"id": {f[_ID]}, "title": {f[_TITLE]}, "schedule": {f[_SCHEDULE]}, "timezone":'
            f' {zone}, "enabled": {f[_ENABLED]}, "disabled_reason": {f[_REASON]}, "last_run":'
            f' {run}, "last_status": {status}, "last_host": {host}, "running_since": null,'
            f' "next_run": {nxt}, "next_fire": {nxt}, "overdue_since": null, "command":'
            f' {f[_COMMAND]}, "consecutive_failures": {fails}, "tags": {f[_TAGS]}, "uses":'
            f' {f[_USES]}, "holds": [], "after": [], "file": {f[_PATH]}, "valid": true,'
            ' "problem": null}')
