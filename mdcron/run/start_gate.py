"""A shell task started without `preexec_fn`, its cgroup joined before its command runs.

A run's cgroup (proctree.py) used to be joined by the child itself, between fork and exec
(`preexec_fn`). Any `preexec_fn` makes Python fork the whole tick (page tables, copy-on-write
faults, the interpreter's after-fork steps) instead of vfork: ~5 ms per start measured with the
tick's modules loaded, against ~0.15 ms, and 8 workers starting at once queue behind each other
(issue 27: the daemon's 100 due tasks). So a shell task (`/bin/sh -c COMMAND`, no `user:` and no
limits: those keep their preexec) starts as its own shell with a gate in front of its command,
in its own session:

    /bin/sh -c 'read -r _mdcron_go || exit 125; exec 0<>/dev/null; unset _mdcron_go; COMMAND'

The tick writes the leader's pid into the run's cgroup.procs itself, notes the pgid in the task
lock (on_start), then sends one line: only then does the shell go on to the task's command, with
stdin /dev/null as before (opened read-write, as subprocess.DEVNULL is), `$0` /bin/sh and no
arguments, as `sh -c COMMAND` has them. One shell, not a gate that execs the task's shell (issue
27: the second exec of /bin/sh cost ~0.6 ms of CPU per run, 100 runs at once on 2 cores). The
gate's words share the command's first line, so the shell's line numbers (its error messages)
are the command's own; the shell parses that whole line before it runs the gate's `read`, so a
syntax error on it ends the run before its go with the error `sh -c COMMAND` gives, and nothing
of the command ran. The command never runs outside its cgroup, and the tick knows whether the
join worked (a cgroup that refused it: proctree's mark takes over, as before). A tick that dies
before the line closes the pipe: the gate exits GATE_CLOSED, the task never ran (the next tick
records the run as crashed).
"""

from __future__ import annotations

import contextlib
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .process import CommandSpec
    from .proctree import Tree

GATE_CLOSED = 125  # the gate's exit when the tick went away before the go
# the go read into a variable of the gate's own, unset before the command (an environment
# variable of the task's keeps its value)
GATE = "read -r _mdcron_go || exit 125; exec 0<>/dev/null; unset _mdcron_go; "
SHELL = "/bin/sh"


def gated(spec: CommandSpec, tree: Tree | None) -> bool:
    """Whether this start can go through the gate: a shell command in a run's cgroup, nothing
    else for the child to do between fork and exec (no account switch, no limits)."""
    return (tree is not None and tree.cgroup is not None and spec.preexec is None
            and spec.switch is None and len(spec.argv) == 3
            and spec.argv[0] == SHELL and spec.argv[1] == "-c")


class StartGate:
    """The pipe the gate reads its go from; read_end becomes its stdin."""

    def __init__(self) -> None:
        self.read_end, write_end = os.pipe2(os.O_CLOEXEC)
        self._read: int | None = self.read_end  # ours until the child has it (started)
        self._open: int | None = write_end

    @staticmethod
    def argv(argv: list[str]) -> list[str]:
        """`sh -c COMMAND` (gated() said so) with the gate in front of its command."""
        return [SHELL, "-c", GATE + argv[2]]

    def started(self, pid: int, tree: Tree) -> None:
        """The gate runs (exec done): put it into the run's cgroup from here."""
        self._close_read()
        tree.join(pid)

    def open(self) -> None:
        """Let the task's command run."""
        fd, self._open = self._open, None
        if fd is not None:
            try:
                os.write(fd, b"go\n")
            except OSError:
                pass  # the gate is gone already (killed): the run loop reads how it ended
            finally:
                os.close(fd)

    def close(self) -> None:
        """Never let it run: the gate reads end of file and exits GATE_CLOSED."""
        fd, self._open = self._open, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._close_read()

    def _close_read(self) -> None:
        fd, self._read = self._read, None
        if fd is not None:
            os.close(fd)
