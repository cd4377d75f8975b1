"""The tick's workers start their tasks' processes one after the other (issue 27).

When a pool's workers set out together (the daemon's tick at the minute: 8 workers, 100 due),
each does a few milliseconds of Python before its process starts (the comments, the lock, the
row, the environment, the cgroup). On the GIL they interleave, so the first start waits for
most of everyone's share. Taken in turns, the first starts after its own share, the second
after two, and so on; the work is the same. Only the first round takes turns: later starts
follow the runs' own ends, already spread out. A turn ends when the worker's process runs
(process.py) or its run ends without one, and another worker waits for it at most WAIT: one
that waits on something (a lock's dead holder, a jitter, a busy database) holds nobody up
longer than that. `round` is set once the first round has started (dispatch.py: the tick's
other work in the meantime waits for it, rather than take the GIL from these starts), `first`
once the first process has (dispatch.py: the claims of the runs after the first round).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

WAIT = 0.05  # seconds a worker waits for the one before it, at most

_mine = threading.local()  # .held: the first-round turns this thread holds (order, got)


class StartOrder:
    """Turns for the workers of one pool."""

    def __init__(self, first: int, wait: float = WAIT) -> None:
        """`first`: how many starts take turns (the pool's first round; later ones are
        staggered by the runs' own ends)."""
        self._lock = threading.Lock()  # the turn
        self._count = threading.Lock()
        self._left = first
        self._open = first  # first-round turns not ended yet
        self.wait = wait
        self.round = threading.Event()  # set once every first-round turn has ended
        self.first = threading.Event()  # set once the first turn has ended
        if first <= 0:
            self.round.set()
            self.first.set()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Wait (at most `wait`) for the worker before, hold the turn until its process
        starts (started()) or the body ends."""
        with self._count:
            ordered = self._left > 0
            self._left -= 1
        got = ordered and self._lock.acquire(timeout=self.wait)
        mine = (self, got)
        if ordered:
            _held().append(mine)
        try:
            yield
        finally:
            if mine in _held():
                _held().remove(mine)
                self._end(got)

    def _end(self, got: bool) -> None:
        """One first-round turn is over (its process runs, or its run ended without one)."""
        if got:
            self._lock.release()
        self.first.set()
        with self._count:
            self._open -= 1
            if self._open <= 0:
                self.round.set()


def _held() -> list[tuple[StartOrder, bool]]:
    if not hasattr(_mine, "held"):
        _mine.held = []
    return _mine.held


def started() -> None:
    """This thread's process runs (or it will start none now): the next worker's turn."""
    held = _held()
    while held:
        order, got = held.pop()
        order._end(got)
