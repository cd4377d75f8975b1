"""`scheduler.py daemon`: cron for places without cron (containers), in the foreground.

A small supervisor that never runs a job itself. At the start of every wall-clock minute it
starts `scheduler.py tick` as a child process, exactly what cron starts, so the daemon and cron
share one code path. A tick that runs long does not delay the next one: each minute gets its own
child, as under cron (the claims and task locks already make overlapping ticks safe).

Why a separate process runs the jobs (issue 13): as PID 1 in a container the daemon must reap
orphans, and a `waitpid(-1)` reaper in the process that runs jobs steals their exit statuses
(`subprocess` then reports 0 for a job that exited 3). Here the reaper is the daemon and the
job-running process is its tick child, which waits for its own tasks undisturbed. The daemon's
own children (the ticks) are tracked by pid, so reaping never loses a tick's status either. The
same design as supercronic, without needing `tini` or `docker run --init`.

On the second (issue 27): WARM_LEAD seconds before each boundary the next minute's tick is
started ahead (`tick --warm-fd N`, cli/warm.py): it warms up and blocks reading a pipe; at the
boundary the daemon writes one byte and the tick starts what is due. A held tick that finds
the code or scheduler.yaml changed exits EX_STALE having done nothing, and a fresh tick
replaces it at once; a clock step or a stop closes its pipe (it exits, having done nothing).

Signals: SIGTERM/SIGINT start no new tick and give running ticks `stop_grace` (config, default
30 s) to finish; then each tick is killed first (so it cannot record a killed task as failed or
start a retry), then its tasks' process groups (found through the task lock files, which name
the tick and the group), and their runs are recorded `crashed`, "daemon stopped"; exit 0. A
second SIGTERM/SIGINT ends the grace at once. SIGHUP reloads the config (the ticks read it every
minute anyway; the daemon itself uses `stop_grace` and `kill_grace`).

Time: the minute is read from the wall clock every second at most. A new minute number (the
clock passed a minute boundary, stepped forward, or resumed from suspend) starts a tick at once;
coalescing and catch-up in the tick decide what runs. A step backwards starts a tick for the
new current minute too; the claims (one row per task and slot) make sure no slot runs twice.

At most one daemon per home: an flock on state/daemon.lock, whose text names the holder and its
last tick (read by `doctor`).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ..core import safe_fs
from ..core.outcome import Outcome
from ..core.private_files import open_private
from ..core.records import dataclass
from ..run.locks import (
    boot_id,
    kill_leftovers,
    process_matches,
    process_start_time,
    read_info,
)
from ..run.process import kill_process_group
from ..run.procguard import become_subreaper
from ..settings.config import Config, ConfigError, load_config
from ..state.store import StoreError, state_store
from .daemon_lock import LOCK_NAME, read_holder
from .warm import EX_STALE

WARM_LEAD = 5.0  # seconds before a boundary the next tick is started, warmed and held (warm.py)
PAST_BOUNDARY = 0.0005  # wake this long after the boundary: its minute has surely begun
MAX_NAP = 1.0  # re-read the wall clock at least this often: a clock step is seen within 1 s
JUMP = 2.0  # wall time moving this much more (or less) than monotonic time is a clock step
SCRIPT = Path(__file__).resolve().parents[2] / "scheduler.py"


# --------------------------------------------------------------------- pure timing logic


def minute_of(wall: float) -> int:
    """The wall-clock minute holding `wall` (minutes since the epoch)."""
    return int(wall // 60)


def should_tick(last_minute: int | None, wall: float) -> bool:
    """A tick starts whenever the minute differs from the last ticked one: a new minute, a
    forward step or resume (at once, once), or a step backwards (the claims keep slots single)."""
    return last_minute != minute_of(wall)


def nap(wall: float) -> float:
    """How long to wait before looking at the clock again: until just past the next minute
    boundary, but never more than MAX_NAP, so a clock step is noticed within a second."""
    boundary = (minute_of(wall) + 1) * 60.0
    return max(PAST_BOUNDARY, min(boundary - wall + PAST_BOUNDARY, MAX_NAP))


def clock_step(prev_wall: float, prev_mono: float, wall: float, mono: float) -> float:
    """Seconds the wall clock moved beyond the monotonic clock (negative: backwards). A suspend
    shows as a forward step: CLOCK_MONOTONIC stands still while the machine sleeps."""
    return (wall - prev_wall) - (mono - prev_mono)


@dataclass(frozen=True, slots=True)
class Step:
    """What the loop does after one look at the clocks."""

    tick: bool  # start a tick now
    reason: str  # start | minute | clock step forward | clock step backwards
    minute: int
    jump: float  # seconds the wall clock stepped since the last look (0 when it did not)
    wait: float  # then wait this long before looking again


class Planner:
    """The daemon's timing decisions, fed the wall and monotonic clocks by the caller (real in
    the daemon, scripted in tests)."""

    def __init__(self) -> None:
        self.last_minute: int | None = None
        self._prev: tuple[float, float] | None = None
        self._reason = "start"

    def observe(self, wall: float, mono: float) -> Step:
        jump = 0.0
        if self._prev is not None:
            step = clock_step(*self._prev, wall, mono)
            if abs(step) >= JUMP:
                jump = step
                self._reason = "clock step forward" if step > 0 else "clock step backwards"
        self._prev = (wall, mono)
        tick = should_tick(self.last_minute, wall)
        reason = self._reason
        if tick:
            self.last_minute = minute_of(wall)
            self._reason = "minute"
        return Step(tick, reason, minute_of(wall), jump, nap(wall))


# --------------------------------------------------------------------- log lines


def format_line(fmt: str, wall: float, event: str, **fields: object) -> str:
    """One log line. The only place the daemon's line format is decided (to be merged with
    the tick's formatter): `ISO-time daemon: event key=value …`, or one JSON object."""
    when = datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")
    if fmt == "json":
        return json.dumps({"time": when, "source": "daemon", "event": event, **fields},
                          default=str)
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    return f"{when} daemon: {event}" + (f" ({extra})" if extra else "")


# --------------------------------------------------------------------- the supervisor


@dataclass(slots=True)
class TickChild:
    process: subprocess.Popen[bytes]
    minute: int
    started_wall: float
    started_mono: float
    go_fd: int | None = None  # a held tick (warm.py): the pipe its go is written to
    warm: bool = False  # started ahead of its minute
    told: bool = False  # a warm tick that was told to go


class AlreadyRunning(Exception):
    """Another daemon holds this home's lock; the message names it."""


class DaemonLock:
    """flock on state/daemon.lock; the text inside names the holder and its last tick."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / LOCK_NAME
        self.root = state_dir.parent  # the home: state/ is walked from it, never followed
        self.fd: int | None = None
        self.info: dict[str, object] = {}

    def acquire(self, info: dict[str, object]) -> None:
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT, root=self.root)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise AlreadyRunning(describe_holder(read_holder(self.path), self.path)) from None
        self.fd = fd
        self.update(**info)

    def update(self, **info: object) -> None:
        if self.fd is None:
            return
        self.info.update(info)
        data = json.dumps(self.info, sort_keys=True).encode()
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, data)

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def describe_holder(info: dict[str, object] | None, path: Path) -> str:
    if not info:
        return f"another daemon holds {path} (it has not said who it is yet)"
    since = datetime.fromtimestamp(float(info.get("started_at", 0)), UTC)  # type: ignore[arg-type]
    return (f"a daemon already runs for this home: pid {info.get('pid')} since"
            f" {since.isoformat(timespec='seconds')} (lock {path})")


class Daemon:
    def __init__(self, home: Path, stop_grace: float, kill_grace: float, log_format: str = "text",
                 out: Callable[[str], None] | None = None):
        self.home = home
        self.stop_grace = stop_grace
        self.kill_grace = kill_grace
        self.log_format = log_format
        self._out = out or _print_flushed
        self.ticks: dict[int, TickChild] = {}
        self.stop_requests = 0
        self.reload_requested = False
        self.lock = DaemonLock(home / "state")
        self._wake_r = self._wake_w = -1
        self.tick_extra = _tick_log_format_args(log_format)

    def log(self, event: str, **fields: object) -> None:
        self._out(format_line(self.log_format, time.time(), event, **fields))

    # -- signals ------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._wake_w)  # a signal wakes select() at once

        def stop(signum: int, frame: object) -> None:
            self.stop_requests += 1

        def hup(signum: int, frame: object) -> None:
            self.reload_requested = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, hup)
        signal.signal(signal.SIGCHLD, lambda s, f: None)  # only to wake the loop: reap then

    def _wait(self, seconds: float) -> None:
        try:
            ready, _, _ = select.select([self._wake_r], [], [], seconds)
        except InterruptedError:
            return
        if ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass

    # -- children -----------------------------------------------------------------------------

    def start_tick(self, wall: float, reason: str) -> None:
        argv = [sys.executable, "-u", str(SCRIPT), "tick", "--home", str(self.home),
                *self.tick_extra]
        try:
            # Its own process group: a terminal's Ctrl-C reaches the daemon only, which decides.
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, process_group=0)
        except OSError as exc:
            self.log("tick could not start", error=str(exc))
            return
        minute = minute_of(wall)
        self.ticks[process.pid] = TickChild(process, minute, wall, time.monotonic())
        # `late` only for a minute's own tick: the first one (started mid-minute) or one after
        # a clock step is not late, it is for the minute the daemon found itself in
        late = {"late": f"{wall - minute * 60:.3f}s"} if reason == "minute" else {}
        self.log("tick started", pid=process.pid, minute=_minute_text(minute), **late,
                 reason=reason, running=len(self.ticks))
        self.lock.update(last_tick=wall, last_tick_pid=process.pid)

    # -- the warm tick (issue 27): started ahead of the boundary, told to go at it -------------

    def held(self) -> TickChild | None:
        return next((t for t in self.ticks.values() if t.go_fd is not None), None)

    def warm_due(self, wall: float, planner: Planner) -> bool:
        """Within WARM_LEAD of the next boundary, this minute's tick started, none held."""
        return (planner.last_minute == minute_of(wall) and self.held() is None
                and (minute_of(wall) + 1) * 60.0 - wall <= WARM_LEAD)

    def start_warm(self, wall: float) -> None:
        """Start the next minute's tick now; it warms up and waits for its go (cli/warm.py)."""
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        argv = [sys.executable, "-u", str(SCRIPT), "tick", "--home", str(self.home),
                *self.tick_extra, "--warm-fd", str(read_end)]
        try:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, process_group=0,
                                       pass_fds=(read_end,))
        except OSError as exc:
            os.close(write_end)
            self.log("tick could not start", error=str(exc))
            return
        finally:
            os.close(read_end)
        self.ticks[process.pid] = TickChild(process, minute_of(wall) + 1, wall, time.monotonic(),
                                            go_fd=write_end, warm=True)

    def go(self, tick: TickChild, wall: float, reason: str) -> bool:
        """Tell the held tick its minute has come; False when it is gone (start a cold one)."""
        fd, tick.go_fd = tick.go_fd, None
        try:
            os.write(fd, b"g")  # type: ignore[arg-type]
        except OSError:
            return False
        finally:
            os.close(fd)  # type: ignore[arg-type]
        minute = minute_of(wall)
        tick.minute, tick.started_wall, tick.told = minute, wall, True
        tick.started_mono = time.monotonic()
        self.log("tick started", pid=tick.process.pid, minute=_minute_text(minute),
                 late=f"{wall - minute * 60:.3f}s", reason=reason, running=len(self.ticks),
                 warm=True)
        self.lock.update(last_tick=wall, last_tick_pid=tick.process.pid)
        return True

    def drop_held(self) -> None:
        """Close a held tick's pipe: it exits without doing anything (EX_STALE)."""
        for tick in self.ticks.values():
            if tick.go_fd is not None:
                os.close(tick.go_fd)
                tick.go_fd = None

    def reap(self) -> None:
        """Collect every exited child: our ticks (their status is kept and logged) and orphans
        that were re-parented to us (as PID 1 or as a child subreaper)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            tick = self.ticks.pop(pid, None)
            if tick is None:
                self.log("reaped orphan", pid=pid, status=code)
                continue
            tick.process.returncode = code  # so Popen never waits for it again
            if tick.go_fd is not None:  # a held tick that ended before its go (crashed)
                os.close(tick.go_fd)
                tick.go_fd = None
            if tick.warm and not tick.told and code == EX_STALE:
                continue  # dropped before its minute: it did nothing
            if tick.told and code == EX_STALE:  # code or config changed since it warmed up
                self.log("tick replaced", pid=pid, minute=_minute_text(tick.minute),
                         why="the code or scheduler.yaml changed while it waited")
                if not self.stop_requests:
                    self.start_tick(time.time(), "replaces a stale warm tick")
                continue
            self.log("tick ended", pid=pid, minute=_minute_text(tick.minute), status=code,
                     took=f"{time.monotonic() - tick.started_mono:.1f}s")

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> int:
        self._install_signals()  # first: a SIGTERM from now on is a clean stop
        now = time.time()
        try:
            self.lock.acquire({"pid": os.getpid(), "start": process_start_time(os.getpid()),
                               "boot": boot_id(), "started_at": now, "home": str(self.home),
                               "last_tick": None})
        except (AlreadyRunning, safe_fs.UnsafePath) as exc:
            print(f"mdcron: {exc}", file=sys.stderr, flush=True)
            return 2
        become_subreaper()  # orphaned task processes come back to the daemon, to be reaped
        self.log("started", pid=os.getpid(), home=self.home, stop_grace=f"{self.stop_grace:g}s",
                 pid1=os.getpid() == 1)
        try:
            self._loop()
            return self._stop()
        finally:
            self.lock.release()

    def _loop(self) -> None:
        planner = Planner()
        while not self.stop_requests:
            self.reap()
            if self.reload_requested:
                self.reload_requested = False
                self.reload()
            wall = time.time()
            step = planner.observe(wall, time.monotonic())
            if step.jump:
                self.log("clock stepped", seconds=f"{step.jump:+.0f}")
            if step.tick:
                held = self.held()
                if held is None or step.jump or not self.go(held, wall, step.reason):
                    self.drop_held()
                    self.start_tick(wall, step.reason)
            elif step.jump:
                self.drop_held()  # a clock step: the held tick's minute may not come
            wall = time.time()
            if self.warm_due(wall, planner):
                self.start_warm(wall)
            self._wait(nap(time.time()))

    def reload(self) -> None:
        try:
            config, _ = load_config(self.home)
        except ConfigError as exc:
            self.log("config not reloaded", error=str(exc).replace("\n", "; "))
            return
        self.stop_grace, self.kill_grace = config.stop_grace, config.kill_grace
        self.log("config reloaded", stop_grace=f"{self.stop_grace:g}s")

    def _stop(self) -> int:
        self.drop_held()  # a tick not yet told to go ends at once, having done nothing
        self.reap()
        self.log("stopping", running_ticks=len(self.ticks), grace=f"{self.stop_grace:g}s")
        # the first request started this stop; any other, even one that came before this line
        # ran (a second SIGTERM right after the first), ends the grace at once
        seen = 1
        deadline = time.monotonic() + self.stop_grace
        while True:
            self.reap()
            left = deadline - time.monotonic()
            if not self.ticks or left <= 0 or self.stop_requests > seen:
                break
            self._wait(min(left, 0.2))
        if self.ticks:
            self.kill_leftovers()
        self.log("stopped")
        return 0

    def kill_leftovers(self) -> None:
        """Kill the ticks still running, then their tasks' groups; record the runs crashed."""
        pids = set(self.ticks)
        try:
            config, _ = load_config(self.home)
        except ConfigError:
            config = Config(home=self.home.resolve())
        groups = []
        for path in sorted(config.locks_dir.glob("*.lock")):
            info = read_info(path)
            if info is not None and info.tick_pid in pids and info.pgid:
                groups.append(info)
        for pid in pids:  # the tick first: it must not see its task die and retry or record it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            tick = self.ticks.pop(pid)
            tick.process.returncode = -signal.SIGKILL
            self.log("tick killed", pid=pid, minute=_minute_text(tick.minute))
        for info in groups:
            if process_matches(info.pgid, info.child_start, info.boot_id):
                kill_process_group(info.pgid, self.kill_grace)  # type: ignore[arg-type]
                self.log("task killed", task=info.task_id, pgid=info.pgid)
            for named in kill_leftovers(info, self.kill_grace):  # issue 21: what left the group
                self.log("task process killed", task=info.task_id, process=named)
        self.reap()
        self._record_crashed(config, pids)

    def _record_crashed(self, config: Config, pids: set[int]) -> None:
        try:
            with state_store(config) as store:  # issue 11: only this host's rows are its pids
                for row in store.running_rows():
                    if row.get("host") not in (None, store.host):
                        continue
                    if row["owner_pid"] in pids and store.end_running(
                            # type: ignore[arg-type]
                            int(row["id"]), Outcome.CRASHED, "daemon stopped",
                            time.time()):
                        self.log("run recorded crashed", task=row["task_id"], run=row["id"],
                                 reason="daemon stopped")
        except StoreError as exc:
            self.log("could not record the stopped runs", error=str(exc))


def _minute_text(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _print_flushed(line: str) -> None:
    print(line, flush=True)


def _tick_log_format_args(log_format: str) -> list[str]:
    """`--log-format` passed on to the tick (the same code: it takes the same choices)."""
    return [] if log_format == "text" else ["--log-format", log_format]


def run_daemon(home: Path, stop_grace: float, kill_grace: float, log_format: str) -> int:
    return Daemon(home, stop_grace, kill_grace, log_format).run()
