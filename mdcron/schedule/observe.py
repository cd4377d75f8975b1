"""The first-seen / enabled-again rule, in one place: what a tick makes of a task's state.

A task seen for the first time, or enabled again, is not due for fires before that moment
(adding a daily 06:00 task at 15:00 does not run it at 15:00): its `not_before` becomes the
start of the current minute. Pure: the tick records the result (store.observe writes the same
rule in SQL, and a test holds the two together), while `tick --dry-run`, `why` and the chains'
explanations use it without writing anything.
"""

from __future__ import annotations

from pathlib import Path

from ..core.clock import minute_floor
from ..core.records import replace
from ..state.store import TaskState

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # a protocol is for the type checker: at run time a plain base class


class Seen(Protocol):
    """What the rule needs of a task: a Task, or a cache entry that has not been decoded."""

    @property
    def id(self) -> str | None: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def path(self) -> Path | str: ...


def observe(state: TaskState | None, task: Seen, now: float) -> TaskState:
    """`state` as the tick at `now` leaves it after seeing `task` (its file's id, enabled flag
    and path)."""
    path = str(task.path)
    if state is None:
        return TaskState(str(task.id), now, minute_floor(now), None, task.enabled, 0, path)
    if task.enabled and not state.enabled:
        return replace(state, not_before=minute_floor(now), enabled=True, path=path)
    if state.enabled == task.enabled and state.path == path:
        return state
    return replace(state, enabled=task.enabled, path=path)
