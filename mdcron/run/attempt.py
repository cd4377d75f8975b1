"""Running one claimed task: take its lock, start the process, record the outcome.

The tick decides *what* runs; this module knows *how* a run is carried out and recorded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..core import collector
from ..core.clock import Clock, monotonic, to_dt
from ..core.outcome import Outcome, RunResult
from ..core.records import dataclass, field, replace
from ..core.safe_fs import UnsafePath, open_dir
from ..settings.config import Config
from ..state.store import Owner, Store
from ..tasks.paths import PathError, task_cwd
from ..tasks.task import Task
from .environment import task_environment
from .identity import IdentityError, RunAccount, TickIds, access_problem, run_account
from .limits import Limits
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
from .waits import Gate

LOCK_SETTLE_SECONDS = 1.0  # how long to wait for a lock whose recorded holder is already gone


@dataclass(frozen=True)
class RunContext:
    config: Config
    clock: Clock
    owner: Owner
    environ: Mapping[str, str]  # the scheduler's own environment, before secrets are removed
    inherit_fds: tuple[int, ...] = ()  # resource units the task's process holds too (issue 12)
    extra_env: tuple[tuple[str, str], ...] = ()  # set by mdcron, e.g. MDCRON_BUSY_RESOURCES
    record_units: Callable[[LockInfo], None] | None = None  # the units' records (issue 12)
    # alert destinations whose delivery failed in this tick: its later flushes skip them
    failed_destinations: set[str] = field(default_factory=set)
    # (task id, slot) of downstreams already said to wait in this tick: said once, whichever
    # chain round (the follower's or the tick's last) finds them held (schedule/chains.hold_back)
    chain_said: set[tuple[str, float]] = field(default_factory=set)
    gate: Gate | None = None  # issue 26: the run slots a waiting ladder gives back (waits.py)


_OWNER: list[Owner] = []  # current_owner's, for this process (a fork's pid asks again)


def current_owner() -> Owner:
    """This process as the claims' owner: its pid, start time and boot, read once (issue 27:
    the daemon's held tick reads them ahead, cli/warm.py; they never change while it runs)."""
    pid = os.getpid()
    if _OWNER and _OWNER[0].pid == pid:
        return _OWNER[0]
    owner = Owner(pid=pid, start=process_start_time(pid), boot=boot_id())
    if owner.start is not None and owner.boot is not None:  # else read again next time
        _OWNER[:] = [owner]
    return owner


def acquire_task_lock(config: Config, task_id: str) -> TaskLock | None:
    """Take the task's lock without waiting on a live holder. A lock whose recorded holder is
    gone (another tick probing a crashed run, or a holder exiting this instant) is retried for
    up to a second; a lock held by a live run returns None at once."""
    lock = TaskLock(lock_path(config.locks_dir, task_id), config.home)
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
        deadline=started + task.timeout, mono_deadline=monotonic() + task.timeout,
    )
    lock.write(info)
    try:
        result = _start(ctx, task, run_id, attempt, lock, info, log_path)
    except Exception as exc:  # a bug of ours must still close the row
        result = RunResult(Outcome.FAILED, fail_reason=f"mdcron internal error: {exc!r}")
    collector.release()  # started and ended, or failed before its start (core/collector.py)
    from .stop import note_in_log, stopped_reason, take_stop  # lazy: after the run (issue 27)

    by = take_stop(ctx.config, run_id)  # issue 24: a person pressed Stop on the dashboard
    if by is not None and not result.ok:
        note_in_log(result.log_path, ctx.config, by)
        result = replace(result, outcome=Outcome.FAILED, fail_reason=stopped_reason(by),
                         extra={**result.extra, "stopped_by": by})
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
    log_dir = None  # the log's folder, walked once for the log's open (issue 27)
    try:  # a logs/ or logs/runs/<id> swapped for a symlink: the run fails, saying which
        log_dir = open_dir(config.home, log_path.parent, create=True, mode=0o700)
    except UnsafePath as exc:
        return RunResult(Outcome.FAILED, fail_reason=f"cannot write its run log: {exc}")
    except OSError:
        pass  # a full disk or the like: the run goes on, its output noting the log failed
    try:
        return _spawn(ctx, task, run_id, attempt, lock, info, log_path, log_dir)
    finally:
        if log_dir is not None:
            os.close(log_dir)


def _spawn(
    ctx: RunContext, task: Task, run_id: int, attempt: int, lock: TaskLock, info: LockInfo,
    log_path: Path, log_dir: int | None,
) -> RunResult:
    config = ctx.config
    if task.run_as == "claude":
        collector.release()  # its client allocates for as long as it runs (core/collector.py)
        # lazy: the Claude client (random, templates, ...) only for a Claude task (issue 27)
        from ..claude.client import run_claude_task

        deadline = time.monotonic() + task.timeout
        return run_claude_task(task, config, ctx.environ, log_path=log_path, deadline=deadline)
    try:
        cwd = task_cwd(task, config)
        argv = command_argv(task, cwd)
    except (PathError, RunnerError) as exc:
        return RunResult(Outcome.FAILED, fail_reason=str(exc))
    try:
        who = _account_for(task, config, cwd, argv)
    except IdentityError as exc:
        return RunResult(Outcome.FAILED, fail_reason=str(exc))
    env = task_environment(
        ctx.environ, task, secret_names=config.secret_names(), run_id=run_id, attempt=attempt,
        claude_config_dir=config.claude_dir,
        account=who.account.env() if who.account is not None else None,
    )
    env.update(ctx.extra_env)
    limits = Limits.of(task)  # issue 26: memory_max, nice, io_class
    child_uid = who.switch.uid if who.switch is not None else os.geteuid()
    refused = limits.refusal(child_uid) if limits is not None else None
    if refused is not None:
        return RunResult(Outcome.FAILED, fail_reason=refused)
    # issue 21: setsid leaves the group, not the run's cgroup or mark
    tree = Tree.open(run_id, who.switch.uid if who.switch is not None else None,
                     memory_max=task.memory_max)
    env.update((tree.env,))
    # the lock and the units name the run's tree before the spawn, so that the next tick can
    # end what a tick killed with -9 left behind (recovery.py), even one killed before on_start
    marked = replace(info, mark=tree.mark, cgroup=str(tree.cgroup) if tree.cgroup else None,
                     uid=None if who.switch is None else who.switch.uid)
    lock.write(marked)
    if ctx.record_units is not None:
        ctx.record_units(marked)

    def on_start(pid: int) -> None:
        # the leader's start time, as tree.started() just read it (issue 27: once per run)
        since = tree.since if tree.leader == pid and tree.since is not None else (
            process_start_time(pid))
        started = replace(marked, pgid=pid, child_start=since)
        lock.write(started)
        if ctx.record_units is not None:
            ctx.record_units(started)

    rlimit_as = not tree.memory_limited
    result = run_command(
        CommandSpec(argv=limits.argv(argv) if limits else argv, cwd=cwd, env=env,
                    timeout=task.timeout, switch=who.switch,
                    preexec=limits.preexec(rlimit_as=rlimit_as) if limits else None),
        log_path=log_path,
        max_log_bytes=config.log_max_bytes,
        tail_bytes=config.output_tail_bytes,
        kill_grace=config.kill_grace,
        pass_fds=(lock.fileno(), *ctx.inherit_fds),
        on_start=on_start,
        tree=tree,
        log_root=config.home,
        log_dir=log_dir,
    )
    if limits is None:
        return result
    return limits.judge(result, oom_kills=tree.oom_kills, rlimit_as=rlimit_as)


def _account_for(task: Task, config: Config, cwd: Path, argv: list[str]) -> RunAccount:
    """The account the task runs as (issue 21), once it may use its folder and script: the
    child enters the folder before it drops root, so the check must come first."""
    who = run_account(task, config, TickIds.current())
    if who.switch is None or who.account is None:
        return who
    problem = access_problem(cwd, who.account, what="the working folder",
                             need=os.R_OK | os.X_OK)
    if problem is None and task.run_as == "script":
        problem = access_problem(Path(argv[0]), who.account, what="the script", need=os.X_OK)
    if problem is not None:
        raise IdentityError(f"cannot start: {problem}")
    return who
