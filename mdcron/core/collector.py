"""The cyclic garbage collector, held off while a tick gets its first task started (issue 27).

Starting up allocates a lot and frees little in cycles (modules, classes, the task cache):
Python's collector still ran ~36 times (three full-young passes of ~1 ms) before a due task's
process was spawned, ~4.5 ms of a one-due tick. The entry point (scheduler.py) holds it before
its first import; cli/main.py releases it at once for any command but a tick; the tick releases
it when its first task has started (run/attempt.py) or when it ends without one (run/tick.py).
Nothing is lost by the wait: the garbage of that short, bounded stretch is collected once the
collector runs again. Only a hold taken here is released (a caller that disabled it keeps it so).
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Disable the collector until release(), if it runs now."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """Enable the collector again, if hold() disabled it (cheap: callable on every start)."""
    global _held
    if _held:
        _held = False
        gc.enable()
