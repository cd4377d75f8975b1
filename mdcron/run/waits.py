"""Waiting inside a tick without holding up the others (issue 26): a rerun's `retry_delay` and a
`jitter:` start wait here.

A tick runs its claimed ladders on threads, `max_parallel` at a time. A waiting ladder gives its
run slot back (`Gate`) and takes one again when the wait ends, so tasks queued behind it start
meanwhile. Each tick is its own process (cron, or the daemon's child), so a waiting ladder holds
up no other tick either: it holds only its own task's lock, as a long run does, and the ladder's
one deadline (monotonic) still bounds it. That is why a delay is waited for here rather than
handed to a later tick through the state: the lock (the overlap policy's subject) and the
deadline stay exactly those of one ladder, and nothing needs a wall-clock deadline that a clock
step could stretch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Gate:
    """The tick's run slots: a ladder holds one while it runs, and none while it waits."""

    def __init__(self, slots: int):
        self._slots = threading.Semaphore(max(1, slots))
        self._lock = threading.Lock()
        self.waiting = 0  # ladders in a pause now (spread.py claims for their slots meanwhile)

    def __enter__(self) -> Gate:
        self._slots.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._slots.release()

    def pause(self, seconds: float, stop: Callable[[], object] | None = None) -> None:
        """Wait `seconds` with the slot given back; the slot is held again on return."""
        with self._lock:
            self.waiting += 1
        self._slots.release()
        try:
            _sleep(seconds, stop)
        finally:
            with self._lock:
                self.waiting -= 1
            self._slots.acquire()


def pause(gate: Gate | None, seconds: float, stop: Callable[[], object] | None = None) -> None:
    """Wait `seconds` (monotonic), without a run slot when the dispatcher gave one; `stop`,
    asked each second, ends the wait early when true (overlap: replace, overlap.py)."""
    if seconds <= 0:
        return
    if gate is None:
        _sleep(seconds, stop)
    else:
        gate.pause(seconds, stop)


def _sleep(seconds: float, stop: Callable[[], object] | None = None) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))
        if stop is not None and stop():
            return
