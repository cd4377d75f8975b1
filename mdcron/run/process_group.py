"""A run's process group: signal it, tell whether any of it still runs, and end it (TERM, a
grace, KILL). Used by the runner (process.py), a stale lock's killer (locks.py) and the daemon.
"""

from __future__ import annotations

import os
import signal
import time

KILL_SETTLE = 1.0  # how long to wait for a group to vanish after SIGKILL


def signal_group(pgid: int, sig: int) -> bool:
    """Send sig to the group; False when there is nobody (left) to signal."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. os.killpg(pgid, 0) also counts zombies; an
    orphaned zombie lingers where PID 1 does not reap (containers, some VMs) but holds no file,
    lock or pipe, so on Linux members that are all zombies count as gone. The caller must have
    reaped its own child (the leader) first."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process now: it exists, we cannot touch it
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def in_group(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except OSError:
        return False


def _wait_gone(pgid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while group_alive(pgid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def kill_process_group(pgid: int, grace: float) -> bool:
    """TERM the group, wait up to ``grace`` for it to be gone, then KILL it. Safe when the group
    is already gone. Returns True when no live process of the group remains (False: a member
    survived, or belongs to another user). Do not use it on a group whose leader is your own
    unreaped child: reap it first, or it counts as alive until the grace ends."""
    if not signal_group(pgid, signal.SIGTERM):
        return not group_alive(pgid)
    signal_group(pgid, signal.SIGCONT)  # a stopped process acts on TERM only once continued
    if _wait_gone(pgid, grace):
        return True
    signal_group(pgid, signal.SIGKILL)
    return _wait_gone(pgid, KILL_SETTLE)
