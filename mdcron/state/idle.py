"""The idle tick: prove from the cache that nothing is due, in a few milliseconds.

Most ticks have nothing to do. This module answers "is this tick idle?" with the standard
library only (os, sqlite3): one stat per task file, a few SQLite queries, no parsing, no
dataclasses. When every condition below holds, the tick writes `last_tick` and exits with the
status the full tick would give; when any one fails, it returns None and the full tick
(tick.run_tick, fed by cache.py) runs instead. It never decides anything the full tick would
decide differently: it only recognises the case in which the full tick would do nothing.

Idle means all of:
  - the state database exists at schema SCHEMA_VERSION and its cache key matches: same cache
    format, mdcron version and source files, same scheduler.yaml bytes, same $HOME; and the
    cache is sealed (no row changed since cache.save wrote it: triggers, schema 3);
  - every task file (`tasks/*.md`, not hidden) is a regular file with a cache row whose stat
    (size, mtime_ns, inode, ctime_ns) is unchanged and not racily clean (modified less than
    RACY_NS before it was read: a later same-size edit could keep the same timestamps), and
    whose outside paths (a `cwd`, a script) resolve as they did; no row is left over;
  - no id is used twice; every valid task's task_state row agrees (enabled, path), so observe
    would write nothing; every enabled task's next_due was computed from the current
    (last_slot, not_before, system zone) and lies after now, except for a task whose `hosts:`
    leave this host out (meta cache_elsewhere): the full tick never runs it here;
  - nothing else is pending: no run marked running (recovery), no outbox message pending or
    held, the problems are those last reported, and retention is not due;
  - a chained task (`after:`, always a candidate) is idle only while its chains are settled
    (issue 27: chains_settled below): no upstream finished since the last full tick;
  - nothing is stamped after now + FUTURE_SLACK (last_tick, retention_at, a task's last_slot or
    not_before): the clock went back, and the full tick must clear and say it
    (run/clock_back.py), else a slot claimed "in 2027" would keep a task idle until 2027.
With a PostgreSQL state (issue 11) the task_state rows and retention_at read here are this
host's copy of the shared ones, and one more condition holds: the shared state is still the copy's
(pgidle.unchanged: one query through libpq, no psycopg), and each due task that runs
elsewhere has its "runs nowhere" alert row as the full tick would leave it (hosts/files.py).
A configured heartbeat_url is pinged by the idle tick itself (heartbeat.py, stdlib only, passed
in by cli/main.py), and
a `metrics_file` is rewritten by it with its own tick figures (metrics_file.py, stdlib only).
A per-tick duty added to the full tick must add its own condition here (or clear cache_idle).

Lazy imports: this module is the idle tick itself, measured in milliseconds, so each import
waits for the moment it is needed: sqlite3 once there is a cache to read, json only when due
tasks are checked against their `hosts:`, datetime only for a dry run's line, pgidle only with a
PostgreSQL state. The pause check and the heartbeat belong to layers above the state: cli/main.py
passes them in (idle_tick's `blocked` and `ping`), the heartbeat loaded only when one is set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from .cache_key import cache_key, config_text, zone_key
from .schema import SCHEMA_VERSION  # a module of SQL text: nothing imported, stdlib-only path

RETENTION_EVERY = 86400.0  # seconds between retention passes (tick._retention)
RACY_NS = 2_000_000_000  # a file changed this close to its reading is read again next time
FUTURE_SLACK = 120.0  # state stamped this far after now: the clock went back (run/clock_back.py;
# hosts may each be max_clock_skew, 30 s, off: a slot claimed a minute "early" is no jump)
DUE_SLACK = 1e-6  # a next_due this close to now counts as due: decide() has the final word
_REG, _DIR, _FMT = 0o100000, 0o040000, 0o170000

# Set when the idle check declined because a cached row says a task is due here (_due_here):
# the full tick then writes the lost-database marker ahead, while it loads (run/tick.py).
due_seen = False


Stat = tuple[int, int, int, int]  # size, mtime_ns, inode, ctime_ns


def scan(folder: str) -> dict[str, Stat | None]:
    """Every task file (`*.md`, not hidden) -> its stat; None when it is not a regular file or
    cannot be stat'ed. OSError when the folder cannot be listed. Listed through a descriptor
    of the folder: each stat is relative to it (fstatat), not a walk of the whole path again
    (issue 27: 1,100 files stat'ed at the daemon's go, ~10% quicker)."""
    found: dict[str, Stat | None] = {}
    prefix = os.path.join(folder, "")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                name = entry.name
                if name.endswith(".md") and not name.startswith("."):
                    try:
                        st = entry.stat()  # follows a symlink, as a path's stat does
                    except OSError:
                        found[prefix + name] = None
                        continue
                    found[prefix + name] = (
                        (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
                        if st.st_mode & _FMT == _REG else None)
    finally:
        os.close(fd)
    return found


def stat_of(path: str) -> Stat | None:
    """One task file's stat as scan() takes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_mode & _FMT != _REG:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns


_last_scan: tuple[str, int, dict[str, Stat | None]] | None = None


def take_scan(folder: str) -> tuple[int, dict[str, Stat | None]]:
    """(the real time just before, scan(folder)): the idle check's own scan when it has just
    made one in this process (a tick it declined), else a new one."""
    global _last_scan
    last, _last_scan = _last_scan, None
    if last is not None and last[0] == folder:
        return last[1], last[2]
    read_ns = time.time_ns()
    return read_ns, scan(folder)


def drop_scan() -> None:
    """Forget the idle check's scan: a tick held past it (cli/warm.py) must stat anew."""
    global _last_scan
    _last_scan = None


def racy(stat: Stat, read_ns: int) -> bool:
    """Git's racily-clean rule: a file whose mtime or ctime is not comfortably older than the
    moment it was read may change again without its stat changing (coarse timestamps)."""
    return max(stat[1], stat[3]) >= read_ns - RACY_NS


def row_holds(stat: Stat, size: int, mtime_ns: int, ino: int, ctime_ns: int, read_ns: int,
              deps: str) -> bool:
    """Whether a file's cache row still stands for it: the same stat, not racily clean (racy(),
    inlined: 10,000 rows a `list`, issue 27), its outside paths resolving as before. The one
    rule schedule/cache_entry.from_row and schedule/cache_listed.held_rows apply."""
    return ((size, mtime_ns, ino, ctime_ns) == stat
            and max(mtime_ns, ctime_ns) < read_ns - RACY_NS
            and (not deps or deps_ok(deps)))


def path_state(path: str) -> str:
    """Where `path` leads (symlinks resolved) and what is there: d(ir), f(ile), o(ther), -."""
    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode & _FMT
    except (OSError, ValueError):
        return real + "\0-"
    return real + "\0" + ("d" if mode == _DIR else "f" if mode == _REG else "o")


def deps_ok(deps: str) -> bool:
    """deps: path\\0real\\0kind, repeated ('' none, '*' never ok)."""
    if not deps:
        return True
    if deps == "*":
        return False
    items = deps.split("\0")
    for i in range(0, len(items) - 2, 3):
        if path_state(items[i]) != items[i + 1] + "\0" + items[i + 2]:
            return False
    return True


def connect_readonly(db_path: str):  # -> sqlite3.Connection
    import sqlite3

    quoted = db_path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    db = sqlite3.connect(f"file:{quoted}?mode=ro", uri=True, timeout=60, isolation_level=None,
                         check_same_thread=False)
    db.execute("PRAGMA busy_timeout = 60000")
    return db


_META = ("cache_key", "cache_sealed", "cache_problems", "cache_errors", "cache_tasks",
         "cache_idle", "problems_digest", "retention_at", "cache_elsewhere", "last_tick",
         "chains_settled")

# Rows that show no change, each with whether it is due. Valid tasks also need a task_state
# row that agrees. A due row is idle only for a task whose `hosts:` leave this host out.
_FRESH = """
SELECT c.path, c.size, c.mtime_ns, c.ino, c.ctime_ns, c.deps, c.task_id,
       c.enabled = 1 AND c.next_due IS NOT NULL AND c.next_due <= :now,
       coalesce(s.last_slot > :future OR s.not_before > :future, 0),
       c.next_due = 0
FROM task_cache c LEFT JOIN task_state s ON s.task_id = c.task_id
WHERE max(c.mtime_ns, c.ctime_ns) < c.read_ns - :racy AND c.deps != '*'
  AND (c.task_id IS NULL
       OR (s.enabled = c.enabled AND s.path = c.path
           AND (c.enabled = 0
                OR (c.due_nb = s.not_before AND c.due_last IS s.last_slot
                    AND c.due_zone IN ('', :zone)))))
"""


PAUSE_FILES = ("maintenance.json", "paused_until.json")  # in state/: schedule/pause.py's
Blocked = Callable[[str, float], bool]
Ping = Callable[[str, bool, Mapping[str, str]], "str | None"]


def idle_tick(home: str, now: float, dry_run: bool, started: float, quiet: bool = False,
              blocked: Blocked | None = None, ping: Ping | None = None) -> int | None:
    """The exit status of an idle tick at `now` (after writing last_tick, unless dry_run), or
    None when the tick may not be idle. `started`: time.monotonic() when `now` was read.
    quiet: a dry run that prints nothing (the daemon's warm tick asks about the next minute).
    What layers above the state do is passed down (cli/main.py): `blocked(home, now)` says
    whether the pause files give the full tick a duty (schedule/pause.idle_blocked; without
    it, any pause file does), `ping(url, failed, environ)` pings the heartbeat
    (alerts/heartbeat.ping; without it, a configured heartbeat hands the tick over)."""
    global due_seen
    due_seen = False
    db_path = os.path.join(home, "state", "mdcron.db")
    if not os.path.isfile(db_path) or os.path.islink(os.path.dirname(db_path)):
        return None  # a state/ swapped for a symlink: the full tick refuses it (store.py)
    if (blocked(home, now) if blocked is not None  # issue 10: maintenance, a pause now over
            else any(os.path.exists(os.path.join(home, "state", n)) for n in PAUSE_FILES)):
        return None  # the full tick reports maintenance / enables the task (commands._paused_tick)
    text = config_text(home)
    if text is None:
        return None
    shared = "state_url" in text or bool(os.environ.get("MDCRON_STATE_URL"))  # issue 11
    if shared and dry_run:
        return None
    key = cache_key(text)
    folder = os.path.join(home, "tasks")
    read_ns = time.time_ns()
    try:
        files = scan(folder)
    except OSError:
        return None
    global _last_scan
    _last_scan = (folder, read_ns, files)  # for the full tick, should it run
    if None in files.values():
        return None
    db = connect_readonly(db_path) if dry_run else _connect(db_path)
    global _kept
    if _kept is not None:  # an earlier check's, never taken: this one replaces it
        _kept[1].close()  # type: ignore[attr-defined]
        _kept = None
    try:
        db.execute("BEGIN")  # one snapshot for every read below
        count = _idle_rows(db, key, files, now, dry_run)
        db.execute("COMMIT")
        if count is None:
            return None
        tasks, errors, elsewhere = count
        if shared:  # PostgreSQL: the local copy of the shared state must still hold
            from .pgidle import unchanged

            if not unchanged(db, text, home, elsewhere):
                return None
        if dry_run and quiet:
            return 0
        if dry_run:
            from datetime import UTC, datetime

            when = datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds")
            print(f"{when}: nothing due among {tasks} task(s)")
            return 0
        beat = db.execute("SELECT value FROM meta WHERE key = 'cache_heartbeat'").fetchone()
        if beat and beat[0] and ping is None:
            return None  # a heartbeat to ping, and no one to ping it: the full tick does
        took = time.monotonic() - started  # issue 26: the tick's figures (state/metrics.py)
        db.execute(
            "INSERT INTO meta(key, value) VALUES ('last_tick', ?), ('tick_figures', ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (repr(now + took), f"{now % 60.0!r} {took!r} {now!r}"),
        )
        row = db.execute("SELECT value FROM meta WHERE key = 'cache_metrics'").fetchone()
        if row and row[0]:  # issue 26: metrics_file, with this tick's own figures
            from .metrics_file import idle_write  # stdlib only

            error = idle_write(row[0], now, time.monotonic() - started)
            if error:
                print(error, flush=True)
        if beat and beat[0] and ping is not None:  # the dead man's switch, as the full tick's
            error = ping(beat[0], bool(errors), os.environ)
            if error:
                print(f"mdcron: heartbeat: {error}", flush=True)
        return 1 if errors else 0
    finally:
        if due_seen:  # declined for a due task: the full tick reads its cache through it
            _kept = (db_path, db)
        else:
            db.close()


_kept: tuple[str, object] | None = None  # idle_tick's connection, for take_connection


def take_connection(db_path: str):  # -> sqlite3.Connection | None
    """The connection of the idle check that declined because a task is due (due_seen), for
    the full tick's reads of the cache (cache.load), set up as connect_readonly sets its own;
    None when there is none for this database. Issue 27: the tick sets up one connection less
    before its first task, and the write-ahead log the check opened is not removed and made
    again (the last connection's close removes it)."""
    global _kept
    kept, _kept = _kept, None
    if kept is None:
        return None
    path, db = kept
    try:
        if path != db_path or db.in_transaction:  # type: ignore[attr-defined]
            db.close()  # type: ignore[attr-defined]  (left mid-transaction: not ours to use)
            return None
        db.execute("PRAGMA busy_timeout = 60000")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001  # a connection in trouble: the caller opens its own
        return None
    return db


def chains_settled(db, settled: str | None) -> bool:
    """An `after:` task (next_due 0: it may always be due) leaves the tick idle when the last
    full tick found no downstream owed and no upstream running (run/tick.py writes meta
    chains_settled = the newest run id then) and no run row came since: an upstream that
    finishes was running then or is a new row now."""
    newest = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    return bool(settled) and settled == str(newest)


_DUE = ("SELECT task_id FROM task_cache WHERE enabled = 1 AND next_due IS NOT NULL"
        " AND next_due != 0 AND next_due <= ?")


def _due_here(db, elsewhere: str | None, now: float, dry_run: bool) -> bool:
    """A cached row says a task is due that may run here (its `hosts:` do not leave this
    host out; a dry run plans them all): the tick has work, whatever else holds. One query
    over the cache; the full check below would decline too, after reading every row."""
    global due_seen
    due = db.execute(_DUE, (now + DUE_SLACK,)).fetchall()
    if not due:
        return False
    if dry_run or not elsewhere or elsewhere == "{}":
        due_seen = not dry_run
        return True
    import json  # lazy: only with tasks whose `hosts:` leave a host out

    try:
        known = json.loads(elsewhere)
        here = any(task_id not in known for (task_id,) in due)
    except (TypeError, ValueError):
        return True
    due_seen = here
    return here


def _connect(db_path: str):  # -> sqlite3.Connection, as store._open sets it up
    import sqlite3

    # a writer holding the lock: give up soon, the full tick waits its bounded time and says so
    db = sqlite3.connect(db_path, timeout=5, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def _idle_rows(db, key: str, files: dict[str, Stat | None], now: float,
               dry_run: bool) -> tuple[int, int, dict[str, list[str]]] | None:
    """(valid tasks, errors, elsewhere) when the cache proves the tick idle, else None.
    elsewhere: the due tasks whose `hosts:` leave this host out (id -> hosts): the full tick
    runs none of them here; with a shared state it may alert that they run nowhere
    (hostfiles.alert_orphaned), which pgidle.unchanged checks."""
    if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return None
    marks = ",".join("?" * len(_META))
    meta = dict(db.execute(f"SELECT key, value FROM meta WHERE key IN ({marks})", _META))
    if meta.get("cache_key") != key or meta.get("cache_sealed") != "1":
        return None
    if _due_here(db, meta.get("cache_elsewhere"), now, dry_run):
        return None  # issue 27: a task is due, the full tick runs: decline before the rows
    future = now + FUTURE_SLACK  # the clock went back: the full tick clears and says it
    try:
        if float(meta.get("last_tick") or 0) > future:
            return None
        tasks, errors = int(meta["cache_tasks"]), int(meta["cache_errors"])
    except (KeyError, TypeError, ValueError):
        return None
    if dry_run:
        if errors:
            return None  # a dry run prints every error: the full tick does that
    else:
        retention = meta.get("retention_at")
        if (meta.get("cache_idle") != "1" or meta.get("problems_digest") is None
                or meta.get("cache_problems") != meta.get("problems_digest")
                or retention is None
                or not -FUTURE_SLACK <= now - float(retention) < RETENTION_EVERY):
            return None
        busy = db.execute(
            "SELECT EXISTS(SELECT 1 FROM runs WHERE status = 'running')"
            " OR EXISTS(SELECT 1 FROM outbox WHERE status IN ('pending', 'held'))"
        ).fetchone()[0]
        if busy:
            return None
    total, doubled = db.execute(
        "SELECT count(*), EXISTS(SELECT 1 FROM task_cache WHERE task_id IS NOT NULL"
        " GROUP BY task_id HAVING count(*) > 1) FROM task_cache"
    ).fetchone()
    if doubled or total != len(files):
        return None
    rows = db.execute(_FRESH, {"racy": RACY_NS, "zone": zone_key(), "now": now + DUE_SLACK,
                               "future": future}).fetchall()
    if len(rows) != total:
        return None
    get = files.get
    due = []
    chained = False
    for path, size, mtime_ns, ino, ctime_ns, deps, task_id, is_due, ahead, chain in rows:
        if ahead or get(path) != (size, mtime_ns, ino, ctime_ns) or (deps and not deps_ok(deps)):
            return None
        if is_due and chain:
            chained = True
        elif is_due:
            due.append(task_id)
    if chained and not chains_settled(db, meta.get("chains_settled")):
        return None
    elsewhere: dict[str, list[str]] = {}
    if due:
        if dry_run:
            return None  # a dry run plans every due task, whichever host may run it
        import json

        try:
            known = json.loads(meta.get("cache_elsewhere") or "{}")
            elsewhere = {t: list(known[t]) for t in due}
        except (KeyError, TypeError, ValueError):
            return None  # due here: the full tick
    return tasks, errors, elsewhere
