"""The daemon's tick started ahead of its minute (issue 27): warm, then held until told to go.

`scheduler.py tick --home H --warm-fd N` is started by the daemon a few seconds before a
minute boundary. It pays what it can in advance, then blocks reading pipe N; the daemon writes
one byte at the boundary and the tick runs at once (or closes the pipe: exit EX_STALE, nothing
done). What it pays in advance depends on the minute ahead, asked of the idle fast path with a
quiet dry run at the boundary's instant:
  - idle ahead: it stays the small idle-path process (main.py, state/idle.py) and at the
    boundary runs the idle tick as cron's tick would; should the files say otherwise by then, it
    takes the full path, as a cold tick would;
  - work ahead: it imports the whole tick path, reads scheduler.yaml, loads the task files'
    view, decodes the tasks due at the boundary and opens the state database (the imports are
    most of a cold tick's cost; the rest is most of what a warm tick paid after the minute).
Nothing it decided before the boundary is trusted after it: the task files are stat'ed (and
re-read when changed) by the tick itself after the go, as every tick does, and a task decoded
ahead is kept only with its file's stat unchanged; the database opened ahead is used only if
its path still names the same file (else the tick opens it afresh). What cannot be re-checked
that way is refused instead: when the code (the modules' names, sizes, mtimes) or, for a warmed
tick, scheduler.yaml's bytes differ from what it loaded, it exits EX_STALE without doing
anything and the daemon starts a fresh tick in its place.

Lazy imports: this module is loaded only in the daemon's held tick (main.py); the tick path it
warms is imported here on purpose, ahead of the minute, and only when that minute has work.
"""

from __future__ import annotations

import gc
import os
import select
import time
from collections.abc import Callable

from ..core.clock import minute_floor
from ..schedule.pause import idle_blocked
from ..state import cache_key as keys
from ..state import idle as fastpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.folder_watch import FolderWatch
    from ..schedule.cache import View
    from ..settings.config import Config
    from ..state.store import Store

EX_STALE = 75  # EX_TEMPFAIL: the held tick did nothing; the daemon starts a fresh one
REWARM_S = 0.3  # Ahead.rewarm: this long before the minute, if the go has not come
SPIN_S = 0.002  # the boundary's last moments waited awake (a timed wake-up came ~0.3 ms late)
RECHECK_S = 1.0  # checks made at the boundary hold for a go this late at most (Ahead.wait)
KEEP_AHEAD_S = 0.2  # and the cgroup joins kept quick from then until this long past it
WATCH_AFTER_S = 2.0  # the tasks folder's watch (core/folder_watch.py) is closed this long past it
WATCH_NOW_S = 60.0  # or, for a tick given --now (no real instant), this long after its warm-up


def split_warm_fd(argv: list[str]) -> tuple[list[str], int | None]:
    """argv without `--warm-fd N`, and N (None when absent or not a number)."""
    if "--warm-fd" not in argv:
        return argv, None
    i = argv.index("--warm-fd")
    try:
        fd = int(argv[i + 1])
    except (IndexError, ValueError):
        return argv, None
    return argv[:i] + argv[i + 2:], fd


class Ahead:
    """The held tick's two waits: light (the minute ahead is idle) or warmed (it has work)."""

    def __init__(self, home: str, fd: int, at: float | None = None,
                 own_clock: bool | None = None) -> None:
        """`at`: the instant the tick will run at (its --now), else the next minute.
        `own_clock`: the go's checks are made at that instant by this process's clock (wait);
        by default when it is the next minute (the daemon's tick; a --now is no real instant)."""
        self.home, self.fd = home, fd
        self.own_clock = at is None if own_clock is None else own_clock
        self.view: View | None = None  # warm_and_wait: the task files, loaded, then refreshed
        self.store: Store | None = None  # warm_and_wait: the state database, opened ahead
        self.watch: FolderWatch | None = None  # warm_and_wait: on the tasks folder, from before
        # the view's load to the go (core/folder_watch.py): while quiet, no stats at the go
        self.code = keys.code_fingerprint()
        self.code_watched = False  # warm_and_wait: the watch also stands for the code's stats
        self.folder = os.path.join(home, "tasks")  # warm_and_wait: the configured one
        self.boundary = boundary = at if at is not None else (time.time() // 60 + 1) * 60
        try:
            self.idle = fastpath.idle_tick(home, boundary, True, time.monotonic(), quiet=True,
                                           blocked=idle_blocked) is not None
        except Exception:  # the real tick decides (and reports) at the minute
            self.idle = False
        fastpath.drop_scan()  # taken before the wait: the tick at the minute stats anew

    def wait(self, checks: Callable[[], int | None] | None = None) -> int | None:
        """Block until the go; None to run now, EX_STALE when dropped or the checks refuse:
        the code changed, or `checks` (warm_and_wait's: the config, the files) said so. They
        are made once the minute has come: with own_clock (the daemon's tick) at its boundary
        by this process's clock, while the daemon's go is on its way (issue 27: its delivery
        was ~1.3 ms of the first task's start), and again after the go if it came more than
        RECHECK_S later; else after the go."""
        made: list[tuple[float, int | None]] = []

        def at_boundary() -> None:
            made.append((time.monotonic(), self._check(checks)))

        if not _wait(self.fd, self.boundary - REWARM_S, self.rewarm,
                     self.boundary if self.own_clock else None, at_boundary):
            return EX_STALE
        if made and time.monotonic() - made[0][0] <= RECHECK_S:
            return made[0][1]
        return self._check(checks)

    def _check(self, checks: Callable[[], int | None] | None) -> int | None:
        if not self._code_quiet() and keys.code_fingerprint() != self.code:
            return EX_STALE
        keys.pin_code(self.code)  # just compared: the cache key needs it again
        return checks() if checks is not None else None

    def rewarm(self) -> None:
        """Just before the minute, read again what the go will check: nothing is kept, but the
        system's caches are fresh for it (issue 27: on a sandboxed kernel, gVisor here, file
        attributes seconds old are fetched anew: the go's stat of 1,100 files took 10-16 ms
        after the 5 s wait, 5.5 ms right after a read)."""
        if self.view is not None:  # warmed: runs start at the go
            from ..run.cgroup_keep import keep_joins_quick  # lazy: as warm_up

            keep_joins_quick(REWARM_S + KEEP_AHEAD_S)
        if self.watch is None or not self.watch.quiet():  # else the go stats no task file
            try:
                fastpath.scan(self.folder)
            except OSError:
                pass  # the tick at the minute says what is wrong
        if not self._code_quiet():
            keys.code_fingerprint()
        keys.config_text(self.home)

    def _code_quiet(self) -> bool:
        """No module of the package changed since self.code was read: the watch says so."""
        return self.code_watched and self.watch is not None and self.watch.quiet()

    def warm_and_wait(self, config: Config, config_text: str | None) -> int | None:
        """After main() parsed the arguments and read the config (`config_text`, as read):
        import the rest of the tick path, wait; EX_STALE when the config's bytes changed."""
        warm_up()
        self.folder = str(config.tasks_dir)
        from ..core.folder_watch import FolderWatch  # lazy: as warm_up
        from ..schedule.cache import load  # lazy: as warm_up

        # before the load: what changes after the load's stats stirs it (the go refreshes)
        self.watch = FolderWatch.start({self.folder: ".md",
                                        **dict.fromkeys(keys.code_folders())})
        self.view = load(config)
        if self.watch is not None:  # closed once the runs have started (or the tick ends)
            ahead_s = self.boundary - time.time() if self.own_clock else WATCH_NOW_S
            self.watch.close_later(max(0.0, ahead_s) + WATCH_AFTER_S)
            self.code_watched = keys.code_fingerprint() == self.code  # else read at the go
        due = decode_due(self.view, self.boundary)
        opened, spare = None, []
        if not config.state_url and config.db_path.is_file():
            # the lost-database marker (state/dbguard.py) moves to this minute now, not in the
            # claim: a marker ahead only holds back a slot after a lost database, never reruns
            from ..state.dbguard import note_claims  # lazy: as warm_up

            note_claims(config.db_path, minute_floor(self.boundary))
            opened = open_ahead(config, self.boundary)
            if opened is not None and due > 1 and config.max_parallel > 1:
                spare = open_spares(config, min(due, config.max_parallel), opened[1])
        if due:  # the environment the runs start with, its secrets left out (the same at the
            from ..run.environment import filter_ahead  # go: run_tick's copy) lazy: as warm_up

            filter_ahead(dict(os.environ), config.secret_names())
        if due > 1 and config.max_parallel > 1:  # the pool's threads, started now
            from ..run.dispatch import lend_pool  # lazy: as warm_up

            lend_pool(min(due, config.max_parallel))
        gc.collect()  # what was loaded ahead lives as long as the tick: the collector never
        gc.freeze()  # walks it again (a full pass over it cost the minute ~5-10 ms)
        view = self.view

        def checks() -> int | None:  # after the code's (wait): the config, then the files
            at_the_go()
            if keys.config_text(self.home) != config_text:
                return EX_STALE
            try:
                view.refresh(self.watch)
            except OSError:  # the tasks folder gone or unreadable: a fresh tick says so, as
                return EX_STALE  # a cold one does (made at the boundary, never a traceback)
            return None

        held = self.wait(checks)
        if held is not None:
            if self.watch is not None:
                self.watch.close()
            self.view.close()
            self.view = None
            if opened is not None:
                opened[0].close()
            for store in spare:
                store.close()
            return held
        self.store = still_same(opened, config)
        if spare:
            from ..run.dispatch import lend_stores  # lazy: as warm_up

            lend_stores([s for s in spare if still_same((s, opened[1]), config) is not None])
        return None


def at_the_go() -> None:
    """The minute has come: the runs start soon, many at once (issue 27). The kernel's cgroup
    joins are kept quick from here (proctree.keep_joins_quick: the first one after a quiet
    spell waited ~10-15 ms; kept from the go, that wait is paid while the tick stats the
    files, not by the first task)."""
    from ..run.cgroup_keep import keep_joins_quick  # lazy: as warm_up
    from ..run.dispatch import KEEP_S  # lazy: as warm_up

    keep_joins_quick(KEEP_S)


def warm_up() -> None:
    """Import what a tick with work imports before its first task starts."""
    # lazy: the whole tick path, warmed ahead of a minute with work
    from concurrent.futures import thread  # noqa: F401

    from ..alerts import after_run  # noqa: F401  # lazy: as above
    from ..core import cron  # lazy: as above
    from ..hosts import lease  # noqa: F401  # lazy: as above (each run's ladder asks it)
    from ..run import resource_runs, tick, ticklog  # noqa: F401  # lazy: as above
    from ..run.attempt import current_owner  # lazy: as above
    from ..run.proctree import prune_once  # lazy: as above
    from ..schedule import cache, chains, once_per  # noqa: F401  # lazy: as above
    from ..tasks import taskfile  # noqa: F401  # lazy: as above
    from . import actions  # noqa: F401  # lazy: as above

    cron._load_croniter()  # the reasons said after the runs start step croniter
    current_owner()  # the claims' owner (this process: its start time, the boot), read now
    prune_once()  # the runs' cgroup base found and swept of leftovers before the minute


def decode_due(view: View, boundary: float) -> int:
    """Decode ahead the tasks the boundary may run (cached next_due at or before it, or not
    known): refresh() keeps an entry, and its decoded task, only while its file's stat holds.
    Returns how many."""
    count = 0
    for entry in view.valid:
        if entry.enabled and (entry.next_due is None
                              or entry.next_due <= boundary + fastpath.DUE_SLACK):
            view.task(entry)
            count += 1
    return count


def open_spares(config: Config, count: int, ident: tuple[int, int]) -> list[Store]:
    """Connections for the pool's workers (run/dispatch.WorkerStores), opened ahead: each is
    lent at the go only if the path still names the file it was opened as (still_same)."""
    import sqlite3  # lazy: as warm_up

    from ..state.store import Store, StoreError  # lazy: as warm_up

    spares = []
    for _ in range(count):
        store = Store(config.db_path, url=config.state_url, host=config.host_name)
        try:
            store.connect()
            st = os.stat(config.db_path)
        except (StoreError, OSError, sqlite3.Error):
            store.close()
            break
        if (st.st_dev, st.st_ino) != ident:
            store.close()
            break
        spares.append(store)
    return spares


def open_ahead(config: Config, boundary: float) -> tuple[Store, tuple[int, int]] | None:
    """The state database, connected ahead (its first write done: Store.write_ahead; its
    task_state rows read: Store.read_ahead), and the (device, inode) it was opened as."""
    import sqlite3  # lazy: as warm_up (loaded already by the view)

    from ..state.store import Store, StoreError  # lazy: as warm_up

    store = Store(config.db_path, url=config.state_url, host=config.host_name)
    try:
        store.connect()
        st = os.stat(config.db_path)
        store.write_ahead(repr(boundary))
        store.read_ahead()
    except (StoreError, OSError, sqlite3.Error):
        store.close()
        return None  # the tick opens it at the go and says what is wrong
    return store, (st.st_dev, st.st_ino)


def still_same(opened: tuple[Store, tuple[int, int]] | None, config: Config) -> Store | None:
    """The store opened ahead when its path still names the file it opened; else None (closed):
    a database replaced or removed while the tick waited is opened afresh, as a cold tick does
    (and state/dbguard.py sees a recreated one)."""
    if opened is None:
        return None
    store, ident = opened
    try:
        st = os.lstat(config.db_path)
        if (st.st_dev, st.st_ino) == ident:
            return store
    except OSError:
        pass
    store.close()
    return None


def _wait(fd: int, rewarm_at: float | None = None,
          rewarm: Callable[[], object] | None = None, boundary: float | None = None,
          at_boundary: Callable[[], object] | None = None) -> bool:
    """Block until the daemon's byte (True) or its end of the pipe closing (False); at the
    wall-clock instant `rewarm_at`, if the go has not come, call `rewarm` once first; at the
    instant `boundary` (the last SPIN_S awake), if it has still not come, `at_boundary`."""
    if rewarm is not None and rewarm_at is not None and not _ready_before(fd, rewarm_at):
        rewarm()
    if at_boundary is not None and boundary is not None and _came(fd, boundary):
        at_boundary()
    while True:
        try:
            got = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            return False
        os.close(fd)
        return bool(got)


def _ready_before(fd: int, instant: float) -> bool:
    """Whether `fd` is readable (the go, or the pipe closed) before the wall-clock `instant`."""
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, instant - time.time()))
    except (OSError, ValueError):
        return True  # the read after it says what happened
    return bool(ready)


def _came(fd: int, instant: float) -> bool:
    """Wait for the wall-clock `instant` unless `fd` is readable first (False); its last
    SPIN_S awake, reading the clock, not woken by a timer. A clock set back meanwhile: waited
    out in select again, never spun on."""
    while (left := instant - time.time()) > 0:
        if left > SPIN_S and _ready_before(fd, instant - SPIN_S):
            return False
    return True
