"""Cgroup joins kept quick while a tick starts its runs (issue 27).

The kernel's first migration of a process into a cgroup after a quiet spell waits out an RCU
grace period (cgroup_threadgroup_rwsem's write side: ~8-15 ms measured here); one within a
grace period of the last is ~0.1 ms. The daemon's tick joins each run's leader to the run's
cgroup (start_gate.py, proctree.py) right when the minute's runs start, so the first task paid
that wait on its path. keep_joins_quick() makes one migration now and one every KEEP_EVERY
seconds for a while, in a thread: the tick's own pid written into its own cgroup (a migration
to where it already is: nothing moves).
"""

from __future__ import annotations

import _thread
import os
import time

from .proctree import cgroup_base

KEEP_EVERY = 0.004  # well within a grace period (~10 ms measured)
KEEP_S = 0.5  # how long a tick keeps them quick from its start (cli/main.py, dispatch.py)
_KEEP_UNTIL: list[float] = []  # the keeping thread's end, while one runs
_KEEP_LOCK = _thread.allocate_lock()


def keep_joins_quick(seconds: float, every: float = KEEP_EVERY) -> None:
    """For `seconds` from now, keep moving a process into a cgroup as quick as after one
    (issue 27). The kernel's first migration after a quiet spell waits out an RCU grace
    period (cgroup_threadgroup_rwsem's write side: ~8-15 ms measured here); one within a
    grace period of the last is ~0.1 ms. A thread writes the tick's own pid into its own
    cgroup (a migration to where it is: nothing moves) at once and every `every` seconds, so
    the runs' joins (start_gate.py) find the lock quick; it ends by itself. Called while one
    keeps, it only moves that one's end."""
    until = time.monotonic() + seconds
    with _KEEP_LOCK:
        if _KEEP_UNTIL:  # one keeps already: it keeps until the later end
            _KEEP_UNTIL[0] = max(_KEEP_UNTIL[0], until)
            return
        base = cgroup_base()
        if base is None:
            return
        try:
            fd = os.open(base / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
        _KEEP_UNTIL.append(until)

    def keep(own: bytes) -> None:
        try:
            while True:
                os.write(fd, own)
                with _KEEP_LOCK:
                    if time.monotonic() >= _KEEP_UNTIL[0]:
                        _KEEP_UNTIL.clear()
                        return
                time.sleep(every)
        except OSError:
            with _KEEP_LOCK:
                _KEEP_UNTIL.clear()  # a cgroup that refuses it: the joins wait, as before
        finally:
            os.close(fd)

    import threading  # lazy: loaded already by the tick's pool; only with a cgroup to keep

    try:
        threading.Thread(target=keep, args=(str(os.getpid()).encode(),), name="cgroup-keep",
                         daemon=True).start()
    except RuntimeError:  # no thread to be had: the joins wait, as before
        with _KEEP_LOCK:
            _KEEP_UNTIL.clear()
        os.close(fd)
