"""Running one claimed task: take its lock, start the process, record the outcome.

The tick decides *what* runs; this module knows *how* a run is carried out and recorded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..claude.client import run_claude_task
from ..core.clock import Clock, to_dt
from ..core.outcome import Outcome, RunResult
from ..settings.config import Config
from ..state.store import Owner, Store
from ..tasks.paths import PathError, task_cwd
from ..tasks.task import Task
from .environment import task_environment
from .locks import (
    LockInfo,
    TaskLock,
    boot_id,
    holder_alive,
    lock_path,
    process_start_time,
    read_info,
)
from .process import CommandSpec, RunnerError, command_argv, run_command
from .proctree import Tree

LOCK_SETTLE_SECONDS = 1.0  # how long to wait for a lock whose recorded holder is already gone


@dataclass(frozen=True, slots=True)
class RunContext:
    config: Config
    clock: Clock
    owner: Owner
    environ: Mapping[str, str]  # the scheduler's own environment, before secrets are removed
    inherit_fds: tuple[int, ...] = ()  # resource units the task's process holds too (issue 12)
    extra_env: tuple[tuple[str, str], ...] = ()  # set by mdcron, e.g. MDCRON_BUSY_RESOURCES
    record_units: Callable[[LockInfo], None] | None = None  # the units' records (issue 12)


def current_owner() -> Owner:
    pid = os.getpid()
    return Owner(pid=pid, start=process_start_time(pid), boot=boot_id())


def acquire_task_lock(config: Config, task_id: str) -> TaskLock | None:
    """Take the task's lock without waiting on a live holder. A lock whose recorded holder is
    gone (another tick probing a crashed run, or a holder exiting this instant) is retried for
    up to a second; a lock held by a live run returns None at once."""
    lock = TaskLock(lock_path(config.locks_dir, task_id))
    give_up = time.monotonic() + LOCK_SETTLE_SECONDS
    while True:
        if lock.try_acquire():
            return lock
        if holder_alive(read_info(lock.path)) or time.monotonic() >= give_up:
            return None
        time.sleep(0.02)


def log_file(config: Config, task_id: str, started_at: float, run_id: int) -> Path:
    stamp = to_dt(started_at).strftime("%Y%m%dT%H%M%SZ")
    return config.logs_dir / "runs" / task_id / f"{stamp}-{run_id}.log"


def run_attempt(
    ctx: RunContext, store: Store, task: Task, run_id: int, lock: TaskLock, attempt: int = 1
) -> RunResult:
    """One attempt of a task, its lock held by the caller. Never raises for a task's fault."""
    started = ctx.clock.now()
    log_path = log_file(ctx.config, task.id, started, run_id)
    store.set_started(run_id, started, str(log_path))
    info = LockInfo(
        task_id=task.id, run_id=run_id, tick_pid=ctx.owner.pid, tick_start=ctx.owner.start,
        boot_id=ctx.owner.boot, pgid=None, child_start=None, started_at=started,
        deadline=started + task.timeout,
    )
    lock.write(info)
    try:
        result = _start(ctx, task, run_id, attempt, lock, info, log_path)
    except Exception as exc:  # a bug of ours must still close the row
        result = RunResult(Outcome.FAILED, fail_reason=f"mdcron internal error: {exc!r}")
    try:
        store.finish_run(run_id, result, ctx.clock.now())
    except Exception as exc:  # issue 23: a fenced-off holder's result is kept as a late one
        if type(exc).__name__ == "FencedOff":
            exc.late = (run_id, result, ctx.clock.now())  # type: ignore[attr-defined]
        raise
    return result


def _start(
    ctx: RunContext, task: Task, run_id: int, attempt: int, lock: TaskLock, info: LockInfo,
    log_path: Path,
) -> RunResult:
    config = ctx.config
    if task.run_as == "claude":
        deadline = time.monotonic() + task.timeout
        return run_claude_task(task, config, ctx.environ, log_path=log_path, deadline=deadline)
    try:
        cwd = task_cwd(task, config)
        argv = command_argv(task, cwd)
    except (PathError, RunnerError) as exc:
        return RunResult(Outcome.FAILED, fail_reason=str(exc))
    env = task_environment(
        ctx.environ, task, secret_names=config.secret_names(), run_id=run_id, attempt=attempt,
        claude_config_dir=config.claude_dir,
    )
    env.update(ctx.extra_env)
    tree = Tree.open(run_id)  # issue 21: setsid leaves the group, not the run's cgroup or mark
    env.update((tree.env,))

    def on_start(pid: int) -> None:
        # the lock and the units name the run's tree, so that the next tick can end what a tick
        # killed with -9 left behind (recovery.py)
        started = replace(info, pgid=pid, child_start=process_start_time(pid), mark=tree.mark,
                          cgroup=str(tree.cgroup) if tree.cgroup else None)
        lock.write(started)
        if ctx.record_units is not None:
            ctx.record_units(started)

    return run_command(
        CommandSpec(argv=argv, cwd=cwd, env=env, timeout=task.timeout),
        log_path=log_path,
        max_log_bytes=config.log_max_bytes,
        tail_bytes=config.output_tail_bytes,
        kill_grace=config.kill_grace,
        pass_fds=(lock.fileno(), *ctx.inherit_fds),
        on_start=on_start,
        tree=tree,
    )
