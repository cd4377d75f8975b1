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

On the second (issue 27): a few seconds before each boundary the next minute's tick is started
ahead and held until the boundary (cli/daemon_ticks.py, cli/warm.py).

Signals: SIGTERM/SIGINT start no new tick and give running ticks `stop_grace` (config, default
30 s) to finish; then the ticks and their tasks are killed and the runs recorded `crashed`
(cli/daemon_stop.py); exit 0. A second SIGTERM/SIGINT ends the grace at once. SIGHUP reloads
the config (the ticks read it every minute anyway; the daemon itself uses `stop_grace` and
`kill_grace`).

Time (cli/daemon_clock.py): the minute is read from the wall clock every second at most. A new
minute number (the clock passed a minute boundary, stepped forward, or resumed from suspend)
starts a tick at once; coalescing and catch-up in the tick decide what runs. A step backwards
starts a tick for the new current minute too; the claims (one row per task and slot) make sure
no slot runs twice.

At most one daemon per home: an flock on state/daemon.lock, whose text names the holder and its
last tick (cli/daemon_lock.py, read by `doctor`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ..core import safe_fs
from ..core.lock_info import boot_id, process_start_time
from ..run.procguard import become_subreaper
from ..settings.config import ConfigError, load_config
from .daemon_clock import Planner, nap
from .daemon_lock import AlreadyRunning, DaemonLock
from .daemon_ticks import TickChildren


def format_line(fmt: str, wall: float, event: str, **fields: object) -> str:
    """One log line. The only place the daemon's line format is decided (to be merged with
    the tick's formatter): `ISO-time daemon: event key=value …`, or one JSON object."""
    when = datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")
    if fmt == "json":
        return json.dumps({"time": when, "source": "daemon", "event": event, **fields},
                          default=str)
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    return f"{when} daemon: {event}" + (f" ({extra})" if extra else "")


class Daemon:
    def __init__(self, home: Path, stop_grace: float, kill_grace: float, log_format: str = "text",
                 out: Callable[[str], None] | None = None):
        self.home = home
        self.stop_grace = stop_grace
        self.kill_grace = kill_grace
        self.log_format = log_format
        self._out = out or _print_flushed
        self.stop_requests = 0
        self.reload_requested = False
        self.lock = DaemonLock(home / "state")
        self._wake_r = self._wake_w = -1
        self.children = TickChildren(home, _tick_log_format_args(log_format), self.log,
                                     self._tick_started, lambda: bool(self.stop_requests))

    def log(self, event: str, **fields: object) -> None:
        self._out(format_line(self.log_format, time.time(), event, **fields))

    def _tick_started(self, wall: float, pid: int) -> None:
        self.lock.update(last_tick=wall, last_tick_pid=pid)

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
        children = self.children
        while not self.stop_requests:
            children.reap()
            if self.reload_requested:
                self.reload_requested = False
                self.reload()
            wall = time.time()
            step = planner.observe(wall, time.monotonic())
            if step.jump:
                self.log("clock stepped", seconds=f"{step.jump:+.0f}")
            if step.tick:
                held = children.held()
                if held is None or step.jump or not children.go(held, wall, step.reason):
                    children.drop_held()
                    children.start_tick(wall, step.reason)
            elif step.jump:
                children.drop_held()  # a clock step: the held tick's minute may not come
            wall = time.time()
            if children.warm_due(wall, planner.last_minute):
                children.start_warm(wall)
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
        children = self.children
        children.drop_held()  # a tick not yet told to go ends at once, having done nothing
        children.reap()
        self.log("stopping", running_ticks=len(children), grace=f"{self.stop_grace:g}s")
        # the first request started this stop; any other, even one that came before this line
        # ran (a second SIGTERM right after the first), ends the grace at once
        seen = 1
        deadline = time.monotonic() + self.stop_grace
        while True:
            children.reap()
            left = deadline - time.monotonic()
            if not len(children) or left <= 0 or self.stop_requests > seen:
                break
            self._wait(min(left, 0.2))
        if len(children):
            # lazy: only a stop that outlasts the grace kills; the idle daemon keeps no run/
            # process, proctree or state store in memory for it
            from .daemon_stop import kill_ticks

            kill_ticks(children, self.home, self.kill_grace, self.log)
        self.log("stopped")
        return 0


def _print_flushed(line: str) -> None:
    print(line, flush=True)


def _tick_log_format_args(log_format: str) -> list[str]:
    """`--log-format` passed on to the tick (the same code: it takes the same choices)."""
    return [] if log_format == "text" else ["--log-format", log_format]


def run_daemon(home: Path, stop_grace: float, kill_grace: float, log_format: str) -> int:
    return Daemon(home, stop_grace, kill_grace, log_format).run()
