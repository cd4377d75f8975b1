"""The tables store.Store joins on first use (issue 27): outbox, incidents, heals, leases, hosts
and metrics. A tick with a due task uses none of them before that task starts; their modules
(SQL, patterns, eleven NamedTuple classes) cost ~1.8 ms of imports that came before its start.

Store is declared with the other tables and these two hooks. The first attribute lookup that
misses, on an instance (JoinsLater.__getattr__) or on the class (LaterTables.__getattr__),
imports these modules and sets Store's bases to all twelve tables in their order of old: its
method resolution order is then exactly the one it had when it named them all, for every
instance, those made before included. A lookup that still misses is an AttributeError as ever.

Lazy imports: every table, inside join_later: the six above are what this module is for (the
others are loaded already, imported there to name the bases in their order).
"""

from __future__ import annotations

import _thread

_LOCK = _thread.RLock()  # two threads that miss at once: one joins, the other finds it done
_JOINED = "__tables_joined__"


def join_later(cls: type) -> bool:
    """Give store.Store (`cls` or the class of `cls` that names JoinsLater) every table as its
    bases, once. False when they had joined already: a lookup that missed after that misses
    for good. True otherwise, also when another thread joined them while this one waited
    (its lookup missed before: it looks again)."""
    cls = next(k for k in cls.__mro__ if JoinsLater in k.__bases__)
    if cls.__dict__.get(_JOINED):
        return False
    with _LOCK:
        if cls.__dict__.get(_JOINED):
            return True
        from .audit import AuditTable
        from .clockback import ClockBackTable
        from .comments import CommentsTable
        from .heals import HealsTable
        from .hosts import HostsTable
        from .incidents import IncidentsTable
        from .leases import LeasesTable
        from .meta import MetaTable
        from .metrics import MetricsTable
        from .outbox import OutboxTable
        from .runs import RunsTable
        from .task_state import TaskStateTable

        cls.__bases__ = (TaskStateTable, RunsTable, MetaTable, OutboxTable, IncidentsTable,
                         CommentsTable, HealsTable, LeasesTable, HostsTable, ClockBackTable,
                         AuditTable, MetricsTable, JoinsLater)
        setattr(cls, _JOINED, True)
        return True


def _missing(owner: str, name: str) -> AttributeError:
    return AttributeError(f"{owner} has no attribute {name!r}")


class LaterTables(type):
    """Store's metaclass: `Store.name` of a table not joined yet joins them first."""

    def __getattr__(cls, name: str):
        if name.startswith("__") or not join_later(cls):
            raise _missing(f"type object {cls.__name__!r}", name)
        return getattr(cls, name)


class JoinsLater:
    """Store's last base: `store.name` of a table not joined yet joins them first."""

    def __getattr__(self, name: str):
        if name.startswith("__") or not join_later(type(self)):
            raise _missing(f"{type(self).__name__!r} object", name)
        return getattr(self, name)
