"""The task-file cache: read a task file when it changes, not every minute.

Per task file the state database keeps (tables task_cache and task_cache_data, schema 3):
  - the file's stat when it was read (size, mtime_ns, inode, ctime_ns) and the real time just
    before (read_ns, for the racy rule in fastpath.racy);
  - what reading it gave: the id and enabled flag, the problems (JSON), the Task (JSON), and the
    outside paths its checks looked at (deps: a cwd, a script), to see when they move;
  - next_due: the first fire strictly after max(last_slot, not_before - 1 µs), the earliest slot
    decide() could run, with the (last_slot, not_before, system zone) it was computed from; and
    due_after, the fire after next_due (schema 4; NULL: unknown), so that a plain due slot (see
    plain_due) is decided, and the next next_due known, without croniter before the task starts.
A row counts while its file's stat is unchanged and not racily clean, its deps resolve as before
and meta cache_key (cache format, version, code, scheduler.yaml, $HOME) still holds; next_due
counts while task_state still holds the values it came from. Only candidates (next_due <= now)
go through decide(), which has the final word (catch-up, coalescing, DST). Only candidates and
changed files become Task objects. Anything odd in a row (bad JSON, a checksum that does not
match) means: read the file again. The files are the truth; the cache can always be deleted.

The pieces: the view of one pass and the loaders here; its entries from the rows, and the
tick's lean load (cache_fill.py); an entry from its row or its file (cache_entry.py); the JSON
of tasks and problems (cache_json.py); next_due and the fire after it (cache_due.py); the
summary the idle tick reads (cache_summary.py); the SQL in state/task_cache.py.

Lazy imports: a cached row carries its parsed schedule, so the cron maths, the task-file parser
(yaml) and the path checks load only for a file that changed; hashing and `hosts:` matching only
when needed.
"""

from __future__ import annotations

import sqlite3
import time
import zlib
from collections.abc import Iterable
from pathlib import Path

from ..core.problems import Problem
from ..core.records import dataclass, field
from ..settings.config import Config
from ..state import cache_key as keys
from ..state import idle as fastpath
from ..state import task_cache
from ..state.clockback import cleared
from ..state.store import Store, TaskState
from ..state.task_state import StateRow, state_rows
from ..tasks.task import Task, TaskSet, find_duplicate_ids
from .cache_due import PLAIN_LATE as PLAIN_LATE
from .cache_due import fire_after, maths_problem, next_due, plain_due, zone_bound
from .cache_entry import Entry, GcPaused, read_entry, row_of_entry
from .cache_fill import fill, fill_lean, inflate, lean_states
from .cache_json import EMPTY_DIGEST as EMPTY_DIGEST
from .cache_json import Damaged, record_of, task_from_json, task_to_json
from .cache_json import TaskRecord as TaskRecord
from .cache_json import problems_digest as problems_digest
from .cache_json import problems_from_json as problems_from_json
from .cache_json import problems_to_json as problems_to_json
from .cache_summary import cache_key_of, open_cache, write_summary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.folder_watch import FolderWatch

# --------------------------------------------------------------- the view of one pass


@dataclass(slots=True, eq=False)
class View:
    config: Config
    key: str | None  # None: nothing is read from or written to the cache
    entries: list[Entry]
    problems: list[Problem]
    removed: list[str] = field(default_factory=list)  # cached rows without a file
    rebuild: bool = False  # the stored rows belong to another key
    zone: str = ""
    db: sqlite3.Connection | None = None  # read-only, for task JSON
    _prefetched: dict[str, tuple[str, int]] = field(default_factory=dict)  # task_set's rows
    # a lean load (cache_fill.py): path -> (stat, id, enabled) of the rows left without Entry
    quiet: dict[str, tuple[fastpath.Stat, str, bool]] = field(default_factory=dict)
    lean: tuple[str | None, float, int] | None = None  # its (cache_gen, now, read_ns)

    @property
    def valid(self) -> list[Entry]:  # every valid file's Entry, a lean load's quiet rows too
        self.build_all()
        return self._built()

    def build_all(self) -> None:  # a lean load's quiet rows built as load() would (cache_fill)
        if self.quiet:
            inflate(self)

    def _built(self) -> list[Entry]:
        return [e for e in self.entries if e.id is not None and not e.skip]

    def count(self) -> int:  # of valid tasks, quiet rows counted unbuilt
        return len(self._built()) + len(self.quiet)

    def known(self) -> list[tuple[str, bool, str]]:  # (id, enabled, path), quiet rows too
        return ([(str(e.id), e.enabled, e.path) for e in self._built()]
                + [(i, on, path) for path, (_, i, on) in self.quiet.items()])

    def duplicates(self) -> dict[str, list[Path]]:
        """Ids used by two or more files, each with all its files, in file-name order."""
        if self.quiet:  # every id, quiet or built: any repeat and all are built to say it
            ids = [i for _, i, _ in self.quiet.values()] + [e.id for e in self._built()]
            if len(set(ids)) == len(ids):
                return {}
        return find_duplicate_ids(self.valid)  # type: ignore[arg-type]  (valid: id is set)

    def task_set(self) -> TaskSet:
        """Every valid task as a Task (decoded or read), the problems, the duplicate ids."""
        valid = self.valid
        if self.db is not None and sum(e.task is None for e in valid) > 50:
            try:  # issue 27: one query for the rows, not one per task
                self._prefetched = task_cache.cached_tasks(self.db)
            except sqlite3.Error:
                pass
        tasks = [t for e in valid if (t := self.task(e)) is not None]
        self._prefetched = {}
        return TaskSet(tasks, self.problems, find_duplicate_ids(tasks))

    def task(self, entry: Entry) -> Task | None:
        """The entry's Task: decoded from its row, else read from the file again. None (and
        entry.skip) when the file no longer says what its row says."""
        if entry.task is None and not entry.skip:
            try:
                entry.task = self._decode(entry)
            except (Damaged, sqlite3.Error):
                self._reread(entry)
        return entry.task

    def records(self) -> list[Task]:
        """Every valid task for a read-only listing (`list`): a Task where one was read in this
        pass, else its cached fields as a TaskRecord (issue 27: building 10,000 Tasks was most
        of `list`). A row that cannot be used is read from the file again, as in task()."""
        valid = self.valid
        rows: dict[str, tuple[str, int]] = {}
        if self.db is not None and sum(e.task is None for e in valid) > 50:
            try:
                rows = task_cache.cached_tasks(self.db)
            except sqlite3.Error:
                pass
        out: list[Task] = []
        with GcPaused():
            for e in valid:
                record = (None if e.task is not None
                          else record_of(rows.get(e.path), e.id, e.enabled, e.path))
                task = record if record is not None else self.task(e)
                if task is not None:
                    out.append(task)  # type: ignore[arg-type]  (a TaskRecord reads as a Task)
        return out

    def _decode(self, entry: Entry) -> Task:
        if self.db is None:
            raise Damaged("no database")
        row = self._prefetched.get(entry.path) or task_cache.cached_task(self.db, entry.path)
        if row is None or zlib.crc32(str(row[0]).encode()) != row[1]:
            raise Damaged("task row missing or checksum")
        task = task_from_json(row[0])
        if task.id != entry.id or task.enabled != entry.enabled or str(task.path) != entry.path:
            raise Damaged("task row disagrees")
        return task

    def _reread(self, entry: Entry) -> None:
        fresh = read_entry(entry.path, entry.stat, time.time_ns(), self.config)
        if fresh.id == entry.id and fresh.enabled == entry.enabled and fresh.task is not None:
            entry.task, entry.parsed, entry.deps = fresh.task, True, fresh.deps
            entry.problems, entry.read_ns = fresh.problems, fresh.read_ns
        else:
            entry.skip = True  # edited this very moment: the next pass reads it afresh

    # -- the tick ------------------------------------------------------------------------

    def observe(self, store: Store, now: float) -> dict[str, StateRow]:
        """store.observe for the tasks whose task_state row would change; the states after
        (a lean load's: the built entries' and any stamped in the future, cache_fill.py)."""
        states = lean_states(self, store) if self.quiet else None
        if states is None:
            states = store.state_rows()
        seen = []
        for e in self._built():
            s = states.get(e.id)  # type: ignore[arg-type]
            if s is None or bool(s.enabled) != e.enabled or (s.path != e.path and not store.url):
                seen.append((e.id, e.enabled, e.path))
        if seen:
            states = {k: StateRow.of(s) for k, s in store.observe(seen, now).items()}
        return states

    def candidates(self, states: dict[str, StateRow], now: float, *,
                   compute: bool = True) -> list[Task]:
        """Enabled tasks whose next_due is at or before now, or unknown when not `compute`;
        next_due is recomputed (and saved later) where task_state moved on."""
        out = []
        for e in self._built():  # a quiet row is no candidate (cache_fill.py)
            if not e.enabled:
                continue
            state = states.get(e.id)  # type: ignore[arg-type]
            if state is None or not e.due_known(state, self.zone):
                task = self.task(e) if compute and state is not None else None
                if task is None:
                    if not e.skip:
                        out.append(e)
                    continue
                try:
                    self._set_due(e, task, state.last_slot, state.not_before)
                except Exception as exc:  # one task's maths never stops the others
                    self.problems.append(maths_problem(e.id, e.path, exc))
                    continue
            if e.next_due is not None and e.next_due <= now + fastpath.DUE_SLACK:
                out.append(e)
        return [t for e in out if (t := self.task(e)) is not None]

    def dry_run(self, now: float,
                store: Store | None = None) -> tuple[list[Task], dict[str, TaskState]]:
        """Candidates and their states as store.observe would leave them, writing nothing.
        `store`: a PostgreSQL state to read them from (issue 11); else the local database."""
        states: dict[str, StateRow] = {}
        if store is not None:
            states = store.state_rows()
        elif self.db is not None:
            try:
                states = state_rows(self.db)
            except sqlite3.Error:
                states = {}
        from .observe import observe  # lazy: a dry run only (the tick writes its states)

        limit = now + fastpath.FUTURE_SLACK  # the clock went back: as the tick would clear it
        states = {k: cleared(s, now, limit) for k, s in states.items()}
        for e in self.valid:
            s = states.get(e.id)  # type: ignore[arg-type]
            o = observe(s.as_state() if s is not None else None, e, now)
            states[o.task_id] = StateRow.of(o)
        tasks = self.candidates(states, now, compute=False)
        return tasks, {t.id: states[t.id].as_state() for t in tasks}

    def plain(self, tasks: Iterable[Task], states: dict[str, StateRow],
              now: float) -> dict[str, float]:
        """id -> slot for the tasks whose decision the cache alone knows (plain_due): run
        next_due. Only rows whose due key still holds (candidates() made sure of it)."""
        by_id = {e.id: e for e in self._built()}  # tasks: candidates, never quiet
        out = {}
        for task in tasks:
            e, state = by_id.get(task.id), states.get(task.id)
            if (e is not None and state is not None and e.due_known(state, self.zone)
                    and plain_due(e.next_due, e.due_after, now)):
                out[task.id] = e.next_due  # type: ignore[assignment]
        return out

    def claimed(self, planned: Iterable[tuple[Task, float]],
                states: dict[str, StateRow]) -> None:
        """Once (task, slot) is claimed, last_slot = slot: next_due moves past it. Computed now
        so the next tick need not; if the claim does not happen, the due key will not match.
        When slot is next_due, the new next_due is due_after (no croniter before the run);
        the fire after it is left to complete(), once the tasks have started."""
        by_id = {e.id: e for e in self._built()}  # planned: candidates, never quiet
        for task, slot in planned:
            e, state = by_id.get(task.id), states.get(task.id)
            if e is None or state is None:
                continue
            if (e.due_after is not None and e.next_due == slot
                    and e.due_nb == state.not_before and e.due_known(state, self.zone)):
                e.next_due, e.due_after, e.due_last, e.due_dirty = e.due_after, None, slot, True
            else:
                self._set_due(e, task, slot, state.not_before)

    def _incomplete(self) -> list[Entry]:
        return [e for e in self.entries if e.due_dirty and e.due_after is None
                and e.next_due is not None and e.task is not None and not e.skip]

    def prepare_complete(self) -> None:
        """The fire after next_due where claimed() left it unknown (croniter): pure, so the
        tick does it while the tasks run."""
        for e in self._incomplete():
            e.due_after = fire_after(e.task, self.config, e.next_due)  # type: ignore[arg-type]
            e.due_prepared = True

    def complete(self, store: Store) -> None:
        """After the runs started: write the fires prepare_complete found (computing any it did
        not), only where the row still holds the due key they were computed from."""
        if store.dialect != "sqlite":  # issue 11: the cache is this host's, as in save()
            with Store(self.config.db_path) as local:
                self.complete(local)
            return
        self.prepare_complete()
        done = [e for e in self.entries if e.due_prepared]
        if self.key is None or not done:
            return
        try:
            with store.write() as db:
                task_cache.write_due_after(
                    db, [(e.due_after, e.path, e.next_due, e.due_last, e.due_nb, e.due_zone)
                         for e in done])
                write_summary(db, self.key, self.config)
        except sqlite3.Error:
            pass

    def due_hints(self, states: dict[str, TaskState] | dict[str, StateRow]
                  ) -> dict[str, tuple[float, float | None]]:
        """id -> (floor, next_due) where next_due still holds: next_due is the first fire
        after floor = max(last_slot, not_before - 1 µs) (for `list`'s next run)."""
        hints = {}
        for e in self.valid:
            s = states.get(e.id)  # type: ignore[arg-type]
            if s is not None and e.enabled and e.due_known(_row_of(s), self.zone):
                floor = s.not_before - 1e-6
                if s.last_slot is not None:
                    floor = max(floor, s.last_slot)
                hints[s.task_id] = (floor, e.next_due)
        return hints

    def refresh(self, watch: FolderWatch | None = None) -> None:
        """A view loaded ahead of its minute (cli/warm.py), brought to now: the folder is
        stat'ed again; an entry is kept when its file's stat is unchanged, was not racily
        clean when read, and its outside paths resolve as before; other files are read now.
        Its due times are checked against the state rows by the tick, as always. `watch`:
        started on the folder before this view was loaded; while it is quiet, the scan is
        the one loaded (the files it cannot vouch for, its links, stat'ed again)."""
        scanned = self._watched(watch) if watch is not None else None
        read_ns, files = scanned or fastpath.take_scan(str(self.config.tasks_dir))
        old = {e.path: e for e in self.entries}
        entries = []
        racy_ns = fastpath.RACY_NS  # fastpath.racy and deps_ok, inlined: 1,100 files at the go
        for path in sorted(files):
            stat, e = files[path], old.get(path)
            if (e is None or stat is None or e.stat != stat or e.skip
                    or max(stat[1], stat[3]) >= e.read_ns - racy_ns
                    or (e.deps and not fastpath.deps_ok(e.deps))):
                e = read_entry(path, stat, read_ns, self.config)
            entries.append(e)
        self.entries = entries
        self.problems = [p for e in entries for p in e.problems]
        self.removed = sorted(p for p in {*self.removed, *old} if p not in files)
        self.zone = keys.zone_key()

    def _watched(self, watch: FolderWatch) -> tuple[int, dict[str, fastpath.Stat | None]] | None:
        """The folder's scan as a quiet watch vouches for it (issue 27: ~7 ms of stats at
        1,100 files, at the daemon's minute): the stats this view was loaded with, which the
        load took after the watch started, but for the links', taken again."""
        read_ns = time.time_ns()
        if not watch.quiet():
            return None
        files = {e.path: e.stat for e in self.entries}
        for path in watch.links:
            if path in files:
                files[path] = fastpath.stat_of(path)
        return read_ns, files

    def fill_dues(self, states: dict[str, TaskState] | dict[str, StateRow]
                  ) -> dict[str, tuple[float, float | None]]:
        """next_due for each enabled task with a state row whose cached one does not hold
        (after a config change every row is read again without one): computed once here, kept
        by save(), so the next `list` finds it instead of stepping croniter for every task.
        Returns due_hints(states) as they stand after, from the same pass (issue 27)."""
        hints = {}
        for e in self.valid:
            s = states.get(e.id)  # type: ignore[arg-type]
            if s is None or not e.enabled:
                continue
            if not e.due_known(row := _row_of(s), self.zone):
                task = self.task(e)
                if task is None:
                    continue
                try:
                    self._set_due(e, task, s.last_slot, s.not_before)
                except Exception:  # noqa: S112  # its maths fails: list shows it without a next run
                    continue
                if not e.due_known(row, self.zone):
                    continue
            hints[s.task_id] = (max(s.not_before - 1e-6, s.last_slot) if s.last_slot is not None
                                else s.not_before - 1e-6, e.next_due)
        return hints

    def _set_due(self, e: Entry, task: Task, last_slot: float | None, not_before: float) -> None:
        e.next_due = next_due(task, self.config, last_slot, not_before)
        e.due_after = fire_after(task, self.config, e.next_due)
        e.due_last, e.due_nb, e.due_dirty = last_slot, not_before, True
        e.due_zone = self.zone if zone_bound(task, self.config) else ""

    def save(self, store: Store) -> None:
        """Write what changed; a cache that cannot be written is no reason to fail. The cache
        is this host's own: with a PostgreSQL state it goes to state/mdcron.db all the same."""
        if store.dialect != "sqlite":
            with Store(self.config.db_path) as local:
                self.save(local)
            return
        self.close()
        if self.key is None:
            return
        rows = [e for e in self.entries if e.stat is not None and not e.skip
                and (e.parsed or self.rebuild) and (e.task is not None or e.id is None)]
        written = {e.path for e in rows}
        dues = [(e.next_due, e.due_last, e.due_nb, e.due_zone, e.due_after, e.path)
                for e in self.entries
                if e.due_dirty and e.path not in written and not e.skip]
        drop = self.removed + [e.path for e in self.entries if e.stat is None or e.skip]
        if not (rows or dues or drop or self.rebuild):
            return
        try:
            with store.write() as db:
                data = [(e.path, text, zlib.crc32(text.encode())) for e in rows
                        if e.task is not None for text in (task_to_json(e.task),)]
                task_cache.write_cache(
                    db, rebuild=self.rebuild, drop=drop, rows=(row_of_entry(e) for e in rows),
                    data=data, no_task=(e.path for e in rows if e.task is None), dues=dues)
                write_summary(db, self.key, self.config, hosts=bool(rows or drop or self.rebuild))
        except sqlite3.Error:
            pass

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


def _row_of(s: TaskState | StateRow) -> StateRow:
    return s if isinstance(s, StateRow) else StateRow.of(s)


def task_states(rows: dict[str, StateRow], tasks: Iterable[Task]) -> dict[str, TaskState]:
    """TaskState objects for these tasks only (plan() needs no others)."""
    return {t.id: rows[t.id].as_state() for t in tasks if t.id in rows}


# --------------------------------------------------------------- loading


def load_task_set(config: Config) -> TaskSet:
    """The task set every command works from (run, why, next, validate, doctor, list, the
    chains): the one loader, the tick's own. Every file is read: these commands leave the state
    folder untouched (even a read-only SQLite connection creates -wal/-shm files)."""
    view = load(config, cached=False)
    try:
        return view.task_set()
    finally:
        view.close()


def find_task(config: Config, task_id: str) -> TaskSet:
    """The task(s) with this id (several: a duplicate id) and every file's problems, for the
    commands about one task (show, next, enable, ...): through the cache when the state
    database exists (a stat per file, the cached rows, changed files parsed, only this id's
    rows decoded), else as load_task_set. A cache rebuilt (the config changed) is saved, so the
    next command does not pay the rebuild again."""
    if not config.db_path.is_file():
        found = load_task_set(config)
        tasks = [t for t in found.tasks if t.id == task_id]
        return TaskSet(tasks, found.problems, find_duplicate_ids(tasks))
    view = load(config, only=task_id)
    try:
        tasks = [t for e in view.valid if e.id == task_id and (t := view.task(e)) is not None]
        if view.rebuild and view.key is not None:
            with Store(config.db_path) as store:
                view.save(store)
    except sqlite3.Error:
        pass  # the cache could not be written: the task is still the file's
    finally:
        view.close()
    return TaskSet(tasks, view.problems, find_duplicate_ids(tasks))


def load(config: Config, *, cached: bool = True, only: str | None = None,
         lean: float | None = None, scan: tuple[int, dict] | None = None,
         rows: dict[str, task_cache.CacheRow] | None = None) -> View:
    """Every `*.md` in the tasks folder in file-name order (hidden files skipped), from the cache
    where its row still holds, else read; only changed files are parsed. A bad file is skipped with
    its problems; it never hides another file's task or problems. `cached=False`: the database is
    not opened, every file is read. `only`: a view for one task id (find_task): a file whose row
    holds, names another id and has no problems gets no entry (issue 27: no 10,000 entries for one
    task); every file is still stat'ed, so a changed one is read. `lean`: the tick's now: its quiet
    rows get no Entry (cache_fill.py). `scan`, `rows`: a take_scan() and the cache rows of this
    config's key (task_cache.read_cache's) the caller read (list --json), not read again."""
    key = cache_key_of(config) if cached else None
    folder = config.tasks_dir
    try:
        read_ns, files = scan or fastpath.take_scan(str(folder))
    except FileNotFoundError:
        return View(config, None, [], [])
    except OSError as exc:
        return View(config, None, [],
                    [Problem(folder, f"cannot list the tasks folder: {exc.strerror or exc}")])
    view = View(config, key, [], [], zone=keys.zone_key(),
                db=open_cache(config) if cached else None)
    with GcPaused():
        if lean is None or not fill_lean(view, files, read_ns, lean):
            fill(view, files, read_ns, only, rows)
    return view
