"""Run one command as its own process group, bounded in time and in output.

A run starts the command in a new session (its pid is also its process group id), streams
stdout and stderr into a per-run log file in arrival order, and ends in one of three ways:

- the leader exits: whatever it left running in its group is terminated (TERM, a short grace,
  KILL), like systemd's cleanup of a oneshot unit, so nothing keeps the task's lock or pipes;
- the timeout passes (monotonic clock): the group gets TERM, then KILL after ``kill_grace``;
- output keeps flowing after the group is gone (a process that left the group): draining stops
  two seconds after the leader's exit whatever happens.

Memory stays bounded whatever the child prints: the log is capped at ``max_log_bytes`` (the rest
is drained and counted), and only the last ``tail_bytes`` of output and the last stdout line
(at most 64 KiB) are kept. Nothing here raises for a failing command or a failing log: every
run comes back as a RunResult.
"""

from __future__ import annotations

import errno
import math
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core import collector
from ..core.outcome import Outcome, RunResult, envelope_error
from ..core.records import dataclass
from ..core.units import format_duration
from ..tasks.task import Task
from .identity import Switch
from .process_group import KILL_SETTLE, group_alive, in_group, signal_group
from .process_group import kill_process_group as kill_process_group
from .proctree import Tree, describe
from .run_output import Output
from .start_gate import StartGate, gated
from .start_order import started

READ_CHUNK = 64 * 1024
CLEANUP_GRACE = 1.0  # TERM → KILL for processes left behind by a leader that exited
DRAIN_LIMIT = 2.0  # how long output may keep flowing after the leader exits or the group dies
TRACK_EVERY = 1.0  # without a cgroup: how often the run's tree is looked at while it runs
POLL = 0.05  # how often the leader's exit and the group's liveness are checked
STOPPED_GAP = 1.0  # a longer pause between two looks: the tick itself was stopped (exit_time.py)


class RunnerError(Exception):
    """A task's command cannot be turned into a process; the message says how to fix it."""


@dataclass(frozen=True)
class CommandSpec:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float  # seconds
    switch: Switch | None = None  # issue 21: the account the child becomes (identity.py)
    preexec: Callable[[], None] | None = None  # issue 26: limits set in the child (limits.py)


def command_argv(task: Task, cwd: Path) -> list[str]:
    """The argv for a shell or script task. Scripts run directly (no shell); their first word
    is a path relative to ``cwd`` (or absolute) and must exist and be executable."""
    if not task.command or not task.command.strip():
        raise RunnerError(f"task {task.id!r} has no command: add `command:` to {task.path}")
    if task.run_as == "shell":
        return ["/bin/sh", "-c", task.command]
    if task.run_as != "script":
        raise RunnerError(f"task {task.id!r}: run_as {task.run_as!r} is not run as a command")
    import shlex  # lazy: a script task only (issue 27: not before a shell task starts)

    try:
        words = shlex.split(task.command)
    except ValueError as exc:
        raise RunnerError(f"cannot split the command {task.command!r}: {exc}") from exc
    script = words[0]
    # `~` as validation reads it (paths.resolve_inside); symlinks kept: argv[0] matters
    path = Path(os.path.normpath(Path(cwd, os.path.expanduser(script)).absolute()))
    if not path.exists():
        raise RunnerError(f"script {script!r} not found in {cwd} (command: {task.command})")
    if path.is_dir():
        raise RunnerError(f"script {script!r} is a folder, not a script (command: {task.command})")
    if not os.access(path, os.X_OK):
        raise RunnerError(f"script {script!r} is not executable: chmod +x {shlex.quote(script)}")
    return [str(path), *words[1:]]


# --- one run -----------------------------------------------------------------------------------


def _start_failure(exc: OSError, spec: CommandSpec) -> str:
    filename = str(exc.filename) if exc.filename is not None else None
    reason = (exc.strerror or str(exc)).lower()
    if filename == str(spec.cwd) or (filename is None and not spec.cwd.is_dir()):
        if exc.errno == errno.ENOENT:
            return f"cannot start: working directory {spec.cwd} does not exist"
        return f"cannot start: working directory {spec.cwd}: {reason}"
    program = spec.argv[0] if spec.argv else "?"
    hint = ""
    if exc.errno == errno.EACCES:
        import shlex  # lazy: only to word a failed start

        hint = f" (is it executable? chmod +x {shlex.quote(program)})"
    elif exc.errno == errno.ENOEXEC:
        hint = " (does the script start with a #! line?)"
    return f"cannot start {program!r}: {reason}{hint}"


def _account_args(switch: Switch | None) -> dict[str, object]:
    """Popen's user=, group=, extra_groups=: in the child, setgroups, setregid, setreuid, in
    that order, before exec (cronie's order: initgroups, setgid, setuid)."""
    if switch is None:
        return {}
    return {"user": switch.uid, "group": switch.gid, "extra_groups": list(switch.groups)}


def _preexec(tree: Tree | None,
             limits: Callable[[], None] | None) -> Callable[[], None] | None:
    """The child's steps before exec: join the run's cgroup, then the task's limits."""
    join = tree.preexec() if tree is not None else None
    if join is None or limits is None:
        return join or limits

    def both() -> None:
        join()
        limits()

    return both


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_command(
    spec: CommandSpec,
    *,
    log_path: Path,
    max_log_bytes: int,
    tail_bytes: int,
    kill_grace: float = 5.0,
    pass_fds: Sequence[int] = (),
    on_start: Callable[[int], None] | None = None,
    tree: Tree | None = None,
    log_root: Path | None = None,
    log_dir: int | None = None,
) -> RunResult:
    """Run spec.argv in its own session and process group; see the module docstring.

    on_start(pid) is called once the process runs (pid == its process group id). If on_start
    raises, the group is killed and the exception propagates; nothing else raises. With a
    `tree` (proctree.py), what left the group is ended with it: the run's cgroup, its mark.
    `log_dir`: a descriptor of log_path's folder, walked from `log_root` by the caller (who
    closes it): the log is opened in it, not walked to again."""
    start = time.monotonic()

    def open_log() -> Output:  # once the process is on its way, or its start failed
        return Output(log_path, max_log_bytes, tail_bytes, log_root, log_dir)

    gate = StartGate() if gated(spec, tree) else None
    try:
        proc = subprocess.Popen(
            gate.argv(spec.argv) if gate else spec.argv,
            cwd=spec.cwd,
            env=spec.env,
            stdin=gate.read_end if gate else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,  # read with os.read: raw pipes (issue 27: no buffered reader's set-up)
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            close_fds=True,
            preexec_fn=None if gate else _preexec(tree, spec.preexec),
            **_account_args(spec.switch),
        )
    except OSError as exc:
        if gate is not None:
            gate.close()
        if tree is not None:
            tree.close()
        reason = _start_failure(exc, spec)
        out = open_log()
        out.note(f"[mdcron] {reason}")
        out.finish()
        return RunResult(
            Outcome.FAILED,
            fail_reason=reason,
            duration=time.monotonic() - start,
            output_tail=out.tail_text(),
            log_path=log_path if out.opened else None,
            log_truncated=out.error is not None,
        )
    if gate is not None:
        gate.started(proc.pid, tree)  # type: ignore[arg-type]  # the cgroup joined, from here
    if tree is not None:
        tree.started(proc.pid)
    run = _Run(proc, spec, kill_grace, start, tree)
    try:
        if on_start is not None:
            on_start(proc.pid)
        if gate is not None:
            gate.open()  # the lock names the group, the leader is in its cgroup: now it runs
        started()  # the next worker's turn to start its process (start_order.py)
        collector.release()  # issue 27: the task runs; collections may run again
        # the log opened once the process is on its way (issue 27: ~0.4 ms of the first
        # start); what it writes meanwhile waits in its pipes
        run.out = open_log()
        run.loop()
    except BaseException:  # on_start failed, or KeyboardInterrupt: leave nothing running
        if gate is not None:
            gate.close()  # never opened: the leader exits GATE_CLOSED without running it
        run.close()
        if run.out is None:
            run.out = open_log()
        run.out.finish()
        raise
    run.close()
    return run.result(log_path if run.out.opened else None)  # type: ignore[union-attr]


class _Run:
    """The loop of one started process: read, watch the clock, end the group."""

    def __init__(self, proc: subprocess.Popen, spec: CommandSpec, kill_grace: float,
                 start: float, tree: Tree | None = None):
        self.proc = proc
        self.tree = tree
        self.escaped: dict[int, str] = {}  # processes outside the group that were ended, named
        self.pgid = proc.pid
        self.spec = spec
        self.out: Output | None = None  # run_command opens it before loop()
        self.kill_grace = max(0.0, kill_grace)
        self.start = start
        self.deadline = start + spec.timeout
        self.rc: int | None = None
        self.ended: float | None = None  # the leader's real end, when the tick did not see it
        self.timed_out = False
        self.sent_kill = False  # the group outlived TERM + grace
        self.leftovers = False
        self.pidfd: int | None = None  # opened once the pipes closed before the leader's exit
        assert proc.stdout is not None and proc.stderr is not None
        # issue 27: the two pipes watched by one poll object, not a selector (its epoll
        # descriptor made, two adds, two deletes and its close: 6 system calls, and its keys'
        # upkeep in Python, ~40 µs per run): fd -> (pipe, whether it is stdout)
        self.pipes = {proc.stdout.fileno(): (proc.stdout, True),
                      proc.stderr.fileno(): (proc.stderr, False)}
        self.poller = select.poll()
        for fd in self.pipes:
            self.poller.register(fd, select.POLLIN)

    def _outside(self) -> set[int]:
        """Live processes of the run's tree that are not in its group (setsid, setpgid)."""
        if self.tree is None:
            return set()
        members = self.tree.members()
        if not members:
            return members
        return {pid for pid in members if not in_group(pid, self.pgid)}

    def _alive(self) -> bool:
        """Anything of the run left: its group, or what left it. Issue 27: a cgroup that
        could be removed held nothing (proctree.Tree.removed_empty), its members not read."""
        if group_alive(self.pgid):
            return True
        return not (self.tree is not None and self.tree.removed_empty()) and bool(
            self._outside())

    def _signal(self, sig: int) -> None:
        # the tree first: once the leader is dead its descendants no longer lead back to it
        if self.tree is not None:
            outside = self._outside()
            for pid in outside - self.escaped.keys():
                self.escaped[pid] = describe([pid])[0]
            if sig == signal.SIGKILL:
                self.tree.kill_all()
            else:
                self.tree.signal(sig, outside)
        signal_group(self.pgid, sig)

    def _terminate(self, now: float, grace: float) -> float:
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        return now + grace

    def loop(self) -> None:
        kill_at: float | None = None  # set once TERM was sent
        killed = group_done = False
        end_at = math.inf  # hard stop for draining
        look_at = 0.0  # without a cgroup: when to note the leader's descendants next
        looked = self.start  # the last look at the leader
        while True:
            now = time.monotonic()
            if self.tree is not None and self.tree.cgroup is None and now >= look_at:
                self.tree.members()  # once found, a process stays the run's (proctree.py)
                look_at = now + TRACK_EVERY
            if self.rc is None:
                if now - looked > STOPPED_GAP:  # asleep meanwhile: when did it end? (unreaped)
                    from .exit_time import zombie_end  # lazy: after the start (issue 27)

                    ended = zombie_end(self.proc.pid)
                    if ended is not None:
                        self.ended = min(max(ended, looked), now)
                looked = now
                self.rc = self.proc.poll()
                if self.rc is not None and kill_at is None:  # the leader exited by itself
                    end_at = min(end_at, now + DRAIN_LIMIT)
                    if self._alive():
                        self.leftovers = True
                        kill_at = self._terminate(now, min(self.kill_grace, CLEANUP_GRACE))
                    else:
                        group_done = True
            if self.rc is None and kill_at is None and now >= self.deadline:
                self.timed_out = True
                kill_at = self._terminate(now, self.kill_grace)
                end_at = kill_at + KILL_SETTLE + DRAIN_LIMIT
            if kill_at is not None and not group_done and self.rc is not None:
                group_done = not self._alive()
                if group_done:
                    end_at = min(end_at, now + DRAIN_LIMIT)
            if kill_at is not None and not killed and not group_done and now >= kill_at:
                self._signal(signal.SIGKILL)
                killed = self.sent_kill = True
                end_at = min(end_at, now + KILL_SETTLE + DRAIN_LIMIT)
            if self.rc is not None and group_done and not self.pipes:
                return
            if now >= end_at:
                return
            wake = min(now + POLL, end_at)
            if kill_at is None:
                wake = min(wake, self.deadline)
            elif not killed:
                wake = min(wake, kill_at)
            self._read(max(0.0, wake - now))

    def _read(self, timeout: float) -> None:
        if not self.pipes:
            if self.rc is None:
                self._exit_or(timeout)
            else:
                time.sleep(timeout)
            return
        # milliseconds, rounded up (as selectors does): no busy loop on a timeout under 1 ms;
        # POLLIN, POLLHUP (the writers gone) or POLLERR alike: the read says which
        for fd, _ in self.poller.poll(math.ceil(timeout * 1000.0)):
            try:
                data = os.read(fd, READ_CHUNK)
            except OSError:
                data = b""
            if data:
                self.out.feed(data, self.pipes[fd][1])  # type: ignore[union-attr]  # opened
            else:
                self._drop(fd)

    def _drop(self, fd: int) -> None:
        """A pipe at its end (or failing): no longer watched, closed."""
        pipe, _ = self.pipes.pop(fd)
        self.poller.unregister(fd)
        pipe.close()

    def _exit_or(self, timeout: float) -> None:
        """Its pipes closed, the leader still running: wait up to `timeout` for its exit, woken
        by it (a pidfd; not reaped: the loop polls), not a whole POLL after it."""
        if self.pidfd is None:
            try:
                self.pidfd = os.pidfd_open(self.proc.pid)
            except (OSError, AttributeError):  # gone already, or a kernel before 5.3
                self.pidfd = -1
        if self.pidfd < 0:
            time.sleep(timeout)
            return
        try:
            select.select([self.pidfd], [], [], timeout)
        except InterruptedError:
            pass

    def close(self) -> None:
        """Close the pipes; if the loop did not finish (an exception), kill the group."""
        if self.pidfd is not None and self.pidfd >= 0:
            os.close(self.pidfd)
        self.pidfd = None
        for fd in list(self.pipes):
            self._drop(fd)
        if self.rc is None:
            self.rc = self.proc.poll()
        if self.rc is None:
            signal_group(self.pgid, signal.SIGKILL)
            try:
                self.rc = self.proc.wait(timeout=KILL_SETTLE + DRAIN_LIMIT)
            except subprocess.TimeoutExpired:
                pass
        # whatever outlived the loop (draining cut short, an error); an empty cgroup just goes
        if self.tree is not None and not self.tree.removed_empty():
            for pid, named in self.tree.end(0.0).items():
                self.escaped.setdefault(pid, named)
            self.tree.close()

    def result(self, log_path: Path | None) -> RunResult:
        out, rc = self.out, self.rc
        assert out is not None  # run_command opened it
        if self.leftovers:
            out.note("[mdcron] processes left running in the task's group after it exited "
                     "were terminated")
        if self.escaped:
            out.note("[mdcron] processes that left the task's process group were ended with "
                     f"the run: {'; '.join(self.escaped.values())}")
        if self.timed_out:  # the run's own log says why it stopped mid-sentence
            grace = format_duration(self.kill_grace)
            how = (f"TERM, then KILL after {grace} grace" if self.sent_kill
                   else f"TERM; it was gone within the {grace} grace")
            out.note(f"[mdcron] killed: timeout after {format_duration(self.spec.timeout)}"
                     f" ({how})")
        out.finish()
        if self.timed_out:
            outcome, reason = Outcome.TIMEOUT, f"timeout after {format_duration(self.spec.timeout)}"
        elif rc is None:
            outcome, reason = Outcome.CRASHED, "the process did not exit after SIGKILL"
        elif rc < 0:
            outcome, reason = Outcome.FAILED, f"killed by {_signal_name(-rc)}"
        elif rc > 0:
            outcome, reason = Outcome.FAILED, f"exit {rc}"
        else:
            outcome, reason = Outcome.SUCCESS, None
            if out.last_line is not None and out.last_line_ok:
                reason = envelope_error(out.last_line.decode("utf-8", errors="replace"))
                if reason is not None:
                    outcome = Outcome.FAILED
        return RunResult(
            outcome,
            exit_code=rc,
            fail_reason=reason,
            duration=(self.ended if self.ended is not None and self.rc is not None
                      else time.monotonic()) - self.start,
            output_tail=out.tail_text(),
            log_path=log_path,
            log_truncated=out.dropped > 0 or out.error is not None,
        )
