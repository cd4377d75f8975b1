"""The daemon's tick children: started, the next minute's one held warm, told to go, reaped.

Each minute's tick is a child process (`scheduler.py tick`), exactly what cron starts. The
daemon tracks its ticks by pid, so reaping (it reaps every orphan too, as PID 1 or a child
subreaper) never loses a tick's status.

On the second (issue 27): WARM_LEAD seconds before each boundary the next minute's tick is
started ahead (`tick --warm-fd N`, cli/warm.py): it warms up and blocks reading a pipe; at the
boundary the daemon writes one byte and the tick starts what is due. A held tick that finds
the code or scheduler.yaml changed exits EX_STALE having done nothing, and a fresh tick
replaces it at once; a clock step or a stop closes its pipe (it exits, having done nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ..core.records import dataclass
from .daemon_clock import minute_of
from .warm import EX_STALE

WARM_LEAD = 5.0  # seconds before a boundary the next tick is started, warmed and held (warm.py)
SCRIPT = Path(__file__).resolve().parents[2] / "scheduler.py"


@dataclass(slots=True)
class TickChild:
    process: subprocess.Popen[bytes]
    minute: int
    started_wall: float
    started_mono: float
    go_fd: int | None = None  # a held tick (warm.py): the pipe its go is written to
    warm: bool = False  # started ahead of its minute
    told: bool = False  # a warm tick that was told to go


def minute_text(minute: int) -> str:
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%MZ")


class TickChildren:
    """The daemon's running ticks by pid. `log(event, **fields)` says what happens;
    `started(wall, pid)` is told each tick's start (the lock's `last_tick`); `stopping()` says
    whether a stop was asked (then a stale warm tick is not replaced)."""

    def __init__(self, home: Path, tick_extra: list[str], log: Callable[..., None],
                 started: Callable[[float, int], None], stopping: Callable[[], bool]):
        self.home = home
        self.tick_extra = tick_extra
        self.log = log
        self.started = started
        self.stopping = stopping
        self.ticks: dict[int, TickChild] = {}

    def __len__(self) -> int:
        return len(self.ticks)

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
        self.log("tick started", pid=process.pid, minute=minute_text(minute), **late,
                 reason=reason, running=len(self.ticks))
        self.started(wall, process.pid)

    # -- the warm tick (issue 27): started ahead of the boundary, told to go at it -------------

    def held(self) -> TickChild | None:
        return next((t for t in self.ticks.values() if t.go_fd is not None), None)

    def warm_due(self, wall: float, last_minute: int | None) -> bool:
        """Within WARM_LEAD of the next boundary, this minute's tick started, none held."""
        return (last_minute == minute_of(wall) and self.held() is None
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
        self.log("tick started", pid=tick.process.pid, minute=minute_text(minute),
                 late=f"{wall - minute * 60:.3f}s", reason=reason, running=len(self.ticks),
                 warm=True)
        self.started(wall, tick.process.pid)
        return True

    def drop_held(self) -> None:
        """Close a held tick's pipe: it exits without doing anything (EX_STALE)."""
        for tick in self.ticks.values():
            if tick.go_fd is not None:
                os.close(tick.go_fd)
                tick.go_fd = None

    # -- reaping --------------------------------------------------------------------------------

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
                self.log("tick replaced", pid=pid, minute=minute_text(tick.minute),
                         why="the code or scheduler.yaml changed while it waited")
                if not self.stopping():
                    self.start_tick(time.time(), "replaces a stale warm tick")
                continue
            self.log("tick ended", pid=pid, minute=minute_text(tick.minute), status=code,
                     took=f"{time.monotonic() - tick.started_mono:.1f}s")
