"""When a task's leader really ended, for a tick that was not looking at the time (issue 25).

A run's duration is the tick's monotonic clock from the spawn to the moment it sees the leader
gone. That is exact while the tick runs, and wrong when the tick itself was stopped (SIGSTOP, a
debugger, a frozen cgroup) while its task ran on: a task that took 6 s was recorded as 1m12s.
Nothing inside the stopped tick can notice the exit (every thread is stopped), but the kernel
keeps the exited leader as a zombie until the tick reaps it, and a zombie's
`/proc/<pid>/sched` still holds `se.exec_start`: when it last ran on a CPU, which is when it
ran its own exit. That is the scheduler's clock (ms since boot), not CLOCK_MONOTONIC: the two
are put side by side through this process's own entry, read while it is running. The result is
good to a few ms (a scheduler tick) and is only used after a gap in the tick's looking; without
the file (a kernel without CONFIG_SCHED_DEBUG) the tick's own clock stands, as before.
"""

from __future__ import annotations

import re
import time

_EXEC_START = re.compile(rb"se\.exec_start\s*:\s*([0-9.]+)")


def zombie_end(pid: int) -> float | None:
    """The monotonic time (time.monotonic's clock) at which `pid`, exited and not yet reaped,
    last ran (its exit); None when it still runs, is gone, or the kernel does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        if state != b"Z":
            return None
        ran = _exec_start(f"/proc/{pid}/sched")
        offset = _offset()
    except (OSError, IndexError, ValueError):
        return None
    if ran is None or offset is None:
        return None
    return ran + offset


def _exec_start(path: str) -> float | None:
    with open(path, "rb") as fh:
        match = _EXEC_START.search(fh.read(4096))
    return float(match.group(1)) / 1000.0 if match else None  # ms -> s


def _offset(tries: int = 3) -> float | None:
    """time.monotonic() minus the scheduler clock. This process's exec_start is at or before
    the moment it is read (the start of the running slice), so each reading bounds the offset
    from above; after a yield the slice is fresh, and the smallest reading is the closest."""
    best = None
    for _ in range(tries):
        time.sleep(0.001)  # a fresh slice: exec_start moves to about now
        ran = _exec_start("/proc/self/sched")
        now = time.monotonic()
        if ran is None:
            return None
        best = now - ran if best is None else min(best, now - ran)
    return best
