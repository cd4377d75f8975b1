"""The Task model: one validated task file, as plain values. Parsing lives in taskfile.py."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from ..core.problems import Problem
from ..core.records import dataclass, field

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # a protocol is for the type checker: at run time a plain base class

RUN_AS = ("shell", "script", "claude")
NOTIFY_ON = ("failure", "success", "always", "never")
DISABLED_REASONS = ("auto_suspended", "retired", "paused", "by_choice")
ONCE_PER = ("day", "week", "month")
ON_BUSY = ("wait", "skip", "run")

# catchup: how late a missed fire may still run. None = the config's default.
CATCHUP_ALWAYS = math.inf
CATCHUP_NEVER = 0.0  # "only on time": the fire must fall within the minute of the tick


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    path: Path  # the task file, absolute
    schedule: str  # as written in the file
    title: str
    run_as: str = "shell"
    command: str | None = None
    timezone: str | None = None  # IANA name from the file; None = the config's zone
    timeout: float = 600.0  # seconds
    retry: int = 0  # reruns before a heal, 0-10 (issue 26; `true` reads as 1)
    enabled: bool = True
    disabled_reason: str | None = None
    self_heal: bool = True
    notify_on: str = "failure"
    notify_to: str | None = None
    cwd: str | None = None  # an exact path, as written
    cwd_policy: str | None = None  # a named policy from the config
    env: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()  # scheduler env vars this task may receive, by name
    catchup: float | None = None  # seconds; CATCHUP_ALWAYS / CATCHUP_NEVER; None = default
    tags: tuple[str, ...] = ()
    body: str = ""
    prompt: str | None = None  # Claude tasks: the prompt (else the body)
    model: str | None = None  # Claude tasks: model override
    heal_paths: tuple[str, ...] = ()  # globs self-heal may write besides the task file
    claude_config: str | None = None  # CLAUDE_CONFIG_DIR override for this task
    # issue 12: chains (chains.py), once per period (once_per.py), shared resources (resources.py)
    after: tuple[str, ...] = ()  # upstream task ids; set by `schedule: after x` or `after: [..]`
    chain_window: float = 86400.0  # several upstreams: all succeeded within one such window
    once_per: str | None = None  # day | week | month: skip slots after a success this period
    uses: tuple[str, ...] = ()  # resource names from the config's `resources:`
    on_busy: str = "wait"  # wait | skip | run, when a resource is at capacity
    busy_wait: float = 300.0  # on_busy: wait, seconds within one tick
    hosts: tuple[str, ...] = ()  # issue 11: host names that may claim it; () = any host
    # issue 21: the account a shell/script task's process runs as (name or numeric id, as
    # written); None = the config's run_user / run_group, else the tick's own
    user: str | None = None
    group: str | None = None
    # issue 26 (outside_keys.py): pinged as healthchecks.io does; limits of the run's process
    ping_url: str | None = None
    memory_max: int | None = None  # bytes: cgroup memory.max, else RLIMIT_AS
    nice: int | None = None  # -20..19
    io_class: str | None = None  # idle | best-effort | realtime
    # issue 26 (run_keys.py): a pause before each rerun, a fixed start offset, overlap policy
    retry_delay: str | None = None  # "30s" or "exponential 10s..5m", as run_keys normalised it
    jitter: float = 0.0  # seconds: the window after the slot the start is spread over
    overlap: str = "skip"  # skip | queue | replace | allow


@dataclass(frozen=True)
class TaskSet:
    """What every command works from (cache.load_task_set): the valid tasks in file-name
    order, every file's problems, and the ids two or more files claim (the tick runs nothing
    while there is one)."""

    tasks: list[Task]
    problems: list[Problem]
    duplicates: dict[str, list[Path]]

    def get(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)


class _Named(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def path(self) -> Path | str: ...


def find_duplicate_ids(items: Iterable[_Named]) -> dict[str, list[Path]]:
    """Ids used by two or more files, each with all of its files (in the order given): the
    one finder, for Tasks and for the cache's undecoded entries alike."""
    items = items if isinstance(items, list) else list(items)
    ids = [item.id for item in items]
    if len(set(ids)) == len(ids):  # the usual case, told by a set (issue 27: 1,100 files'
        return {}  # lists of paths cost the held tick's go ~0.3 ms)
    by_id: dict[str, list[Path | str]] = {}
    for item in items:  # a Path only for a duplicate: 10,000 of them cost a tick 10 ms
        by_id.setdefault(item.id, []).append(item.path)
    return {task_id: [Path(p) for p in paths] for task_id, paths in by_id.items()
            if len(paths) > 1}
