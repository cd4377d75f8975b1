"""Issue 26: a task's limits, as systemd's MemoryMax=, Nice= and IOSchedulingClass= give them.

- `memory_max`: the run's cgroup (proctree.py) gets `memory.max` when the tick can make one with
  the memory controller; else the child gets `RLIMIT_AS` (address space, a coarser bound: a
  program that maps much more than it uses needs more) before exec.
- `nice`: set in the child before exec (below 0 needs root: refused before the start, with why).
- `io_class`: the kernel's ioprio_set for the child before exec (`realtime` needs root).

A run ended by its memory limit is recorded as such ("killed: memory limit 512 MiB"): with a
cgroup when its memory.events counts an oom_kill; with RLIMIT_AS when the run failed the way a
refused allocation ends a process (MemoryError, "Cannot allocate memory", SIGKILL, SIGSEGV or
SIGABRT). It stays a failure, so it climbs the ladder like any other.

Lazy imports: ctypes (~5 ms), only for a task with `io_class`; resource, only for a task
with limits.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..core.outcome import Outcome, RunResult
from ..core.records import dataclass, replace
from ..tasks.task import Task

# ioprio_set(2): which = IOPRIO_WHO_PROCESS, who = 0 (the calling process)
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "i686": 289, "i386": 289, "armv7l": 314,
               "ppc64le": 273, "s390x": 282, "riscv64": 30}
_IOPRIO_CLASS = {"realtime": 1, "best-effort": 2, "idle": 3}
_IONICE_CLASS = {"realtime": "1", "best-effort": "2", "idle": "3"}
_OOM_WORDS = ("MemoryError", "Cannot allocate memory", "out of memory", "std::bad_alloc",
              "Out of memory")
_OOM_SIGNALS = ("SIGKILL", "SIGSEGV", "SIGABRT")


@dataclass(frozen=True)
class Limits:
    memory_max: int | None = None
    nice: int | None = None
    io_class: str | None = None

    @classmethod
    def of(cls, task: Task) -> Limits | None:
        if task.memory_max is None and task.nice is None and task.io_class is None:
            return None
        return cls(task.memory_max, task.nice, task.io_class)

    def refusal(self, uid: int) -> str | None:
        """Why the run cannot start with these limits (said before anything runs), or None.
        `uid`: the one the child has when it sets them (after `user:`'s switch: Popen calls
        preexec_fn after setreuid), so a negative nice needs the task itself to run as root."""
        if uid == 0:
            return None
        who = f"the task's process runs as uid {uid}"
        if self.nice is not None and self.nice < 0:
            return (f"cannot start: nice: {self.nice} needs root ({who}); use 0 to 19, or run"
                    " it as root")
        if self.io_class == "realtime":
            return (f"cannot start: io_class: realtime needs root ({who}); use best-effort or"
                    " idle")
        return None

    def argv(self, argv: list[str]) -> list[str]:
        """The command, through `ionice` when this machine's ioprio_set number is unknown."""
        if self.io_class is None or os.uname().machine in _IOPRIO_SET:
            return argv
        import shutil  # lazy: only on a machine without a known ioprio_set number

        ionice = shutil.which("ionice")
        if ionice is None:
            return argv
        return [ionice, "-c", _IONICE_CLASS[self.io_class], "--", *argv]

    def preexec(self, *, rlimit_as: bool) -> Callable[[], None]:
        """What the child does between fork and exec: its address-space limit (without a
        cgroup's memory.max), its niceness, its I/O class. Errors are left to the kernel's
        defaults (refusal() said what needs root before the start)."""
        import resource  # lazy: only for a task with limits

        memory = self.memory_max if rlimit_as else None
        niceness = self.nice
        ioprio = _ioprio_call(self.io_class)

        def apply() -> None:
            if memory is not None:
                try:
                    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
                except (OSError, ValueError):
                    pass
            if niceness is not None:
                try:
                    os.setpriority(os.PRIO_PROCESS, 0, niceness)
                except OSError:
                    pass
            if ioprio is not None:
                ioprio()

        return apply

    def judge(self, result: RunResult, *, oom_kills: int, rlimit_as: bool) -> RunResult:
        """The run's result, saying when its memory limit ended it."""
        if self.memory_max is None or result.ok or result.outcome is not Outcome.FAILED:
            return result
        from ..tasks.outside_keys import format_size  # lazy: only to word a kill

        limit = f"killed: memory limit {format_size(self.memory_max)}"
        if oom_kills > 0:
            return replace(result, fail_reason=f"{limit} (cgroup memory.max; "
                           f"{result.fail_reason or 'failed'})")
        if rlimit_as and _looks_out_of_memory(result):
            return replace(result, fail_reason=f"{limit} (RLIMIT_AS; "
                           f"{result.fail_reason or 'failed'})")
        return result


def _looks_out_of_memory(result: RunResult) -> bool:
    reason = result.fail_reason or ""
    if reason.startswith("killed by ") and reason.split()[-1] in _OOM_SIGNALS:
        return True
    tail = result.output_tail[-4096:]
    return any(word in tail for word in _OOM_WORDS)


def _ioprio_call(io_class: str | None) -> Callable[[], None] | None:
    """ioprio_set(IOPRIO_WHO_PROCESS, 0, class << 13 | level) through libc's syscall(), looked
    up here, in the parent, so the child only calls it."""
    number = _IOPRIO_SET.get(os.uname().machine)
    if io_class is None or number is None:
        return None
    import ctypes  # lazy: only for a task with io_class

    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    value = _IOPRIO_CLASS[io_class] << 13 | (0 if io_class == "idle" else 4)

    def call() -> None:
        syscall(number, 1, 0, value)

    return call

