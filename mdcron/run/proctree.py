"""Every process a run starts, found again when the run is over, even when it left the group.

A process group is not a boundary: `setsid` leaves it. So a run's processes are tracked three
ways, and a run's end (its leader's exit, its timeout, or, after a tick killed with -9, the next
tick finding the run over) kills all of them, TERM, a grace, then KILL:

- a cgroup per run (v2, as systemd makes one per unit): `mdcron-<mark>` under the tick's own
  cgroup, when the tick may create one (root, or a delegated tree) and `MDCRON_CGROUP` is not
  `off`. The child joins it between fork and exec (preexec: it writes its own pid to
  cgroup.procs through a descriptor the tick opened), so nothing it starts is ever outside, and
  no task without the rights to write another cgroup's cgroup.procs can leave it;
- a mark every descendant inherits: `MDCRON_RUN=<run id>.<64 random bits>` in the environment,
  found again in /proc/<pid>/environ. The random part is written only to the run's lock record
  (0600), so a task of another user cannot name another run's mark;
- while the leader lives, its descendants through /proc/<pid>/stat parent links (without a
  cgroup, process.py looks each second); a process found once stays found (pid and start
  time). The tick (cli.main) is a child subreaper, so orphans come back to it instead of to
  PID 1 and are reaped.

A forged mark cannot make the tick kill a bystander: the environment of a process is set by
whoever execs it, so only a process the task itself started can carry a mark the task chose;
besides, a marked process is taken as the run's only when its uid is the run's (the tick's)
and it started no earlier than the run's leader. With a cgroup the marks are not even
consulted: membership is the kernel's record. Without one, a process that both calls
setsid() and clears or rewrites its environment is found only if seen while its leader lived
(by parent links); one orphaned between two looks cannot be told from an unrelated process
(the tick, as subreaper, only reaps it), and it is not touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

MARK_ENV = "MDCRON_RUN"
CGROUP_SWITCH = "MDCRON_CGROUP"  # "off": no cgroups, the mark and parent links only
KILL_SETTLE = 1.0  # how long to wait for processes to vanish after SIGKILL
PRUNE_AGE = 60.0  # seconds: an empty run cgroup this old belongs to no starting run
_PRUNED: list[bool] = []  # the base was pruned in this process
CMD_SHOWN = 80  # characters of a command line named in a log or an alert


def new_mark(run_id: int) -> str:
    return f"{run_id}.{os.urandom(8).hex()}"


@lru_cache(maxsize=1)
def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def cgroup_base() -> Path | None:
    """The tick's own cgroup (v2), when it may create runs' cgroups under it; else None."""
    if os.environ.get(CGROUP_SWITCH, "").lower() in ("off", "0", "no", "false"):
        return None
    return _own_base()


@lru_cache(maxsize=1)
def _own_base() -> Path | None:
    """cgroup_base, found once per process (issue 27: each run of a tick asked again, ~0.1 ms
    each): the tick's own cgroup does not change while it runs (keep_joins_quick moves it to
    where it is)."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    raw = _read(b"/proc/self/cgroup")
    if raw is None:
        return None
    lines = raw.decode(errors="replace").splitlines()
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None
    base = mount / own.lstrip("/")
    return base if os.access(base, os.W_OK) and (base / "cgroup.procs").exists() else None


# --- /proc -------------------------------------------------------------------------------------


def _read(path: bytes | str) -> bytes | None:
    """A small file of /proc or /sys, whole; None when it cannot be read. Three system calls
    where Python's open() makes nine (issue 27: a few of these per run, 100 runs at once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        parts = []
        while chunk := os.read(fd, 65536):
            parts.append(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[bytes, int, int] | None:
    """(state, parent pid, start time in clock ticks since boot) of a process, or None."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return fields[0], int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _uid(pid: int) -> int | None:
    """The real uid (Uid: line of /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _has_mark(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def command_of(pid: int) -> str:
    """A process's command line, shortened, for a log line or an alert."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        raw = b""
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    if not text:
        try:
            text = "[" + Path(f"/proc/{pid}/comm").read_text().strip() + "]"
        except OSError:
            text = "?"
    return text if len(text) <= CMD_SHOWN else text[: CMD_SHOWN - 1] + "…"


def describe(pids: Iterable[int]) -> list[str]:
    return [f"pid {pid} ({command_of(pid)})" for pid in sorted(pids)]


def _joined(pid: int, cgroup: Path) -> bool:
    """Whether the process is in that cgroup; True when it is already gone (no evidence)."""
    raw = _read(f"/proc/{pid}/cgroup")
    if raw is None:
        return True
    lines = raw.decode(errors="replace").splitlines()
    own = next((line[3:] for line in lines if line.startswith("0::")), "")
    return own.rstrip("/").endswith("/" + cgroup.name)


def _live(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in (b"Z", b"X")


def _reap(pids: Iterable[int]) -> None:
    """Orphans the tick adopted (it is a subreaper) and killed: their zombies go now."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


# --- one run's tree ----------------------------------------------------------------------------


class Tree:
    """The processes of one run: its cgroup (or None), its mark, its leader once started."""

    def __init__(self, mark: str, cgroup: Path | None, *, uid: int | None = None,
                 leader: int | None = None, since: int | None = None):
        self.mark = mark
        self.cgroup = cgroup
        self.uid = os.geteuid() if uid is None else uid
        self.leader = leader  # followed by parent links while it lives
        self.since = since  # the leader's start (clock ticks since boot): nothing older is ours
        self._needle = f"\0{MARK_ENV}={mark}\0".encode()
        self._procs_fd: int | None = None
        self._moved: int | None = None  # the pid join() wrote into cgroup.procs, accepted
        self._removed = False  # removed_empty() removed the cgroup: nothing was left in it
        self._seen: dict[int, int] = {}  # pid -> start of every member found: once ours, ours
        self.memory_limited = False  # issue 26: its cgroup has the task's memory.max
        self.oom_kills = 0  # memory.events' oom_kill, read before the cgroup goes

    @classmethod
    def open(cls, run_id: int, uid: int | None = None, memory_max: int | None = None) -> Tree:
        """A new run's tree: its mark, and its cgroup when one can be made (else the mark).
        `uid`: the user the task runs as (`user:`), when not the tick's. `memory_max` (issue
        26): the cgroup's memory.max, when the memory controller can be had there."""
        mark = new_mark(run_id)
        tree = cls(mark, None, uid=uid)
        base = prune_once()
        if base is not None:
            path = base / f"mdcron-{mark}"
            try:
                path.mkdir(mode=0o755)
                tree._procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                tree.cgroup = path
                if memory_max is not None:
                    tree.memory_limited = _set_memory_max(base, path, memory_max)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return tree

    @property
    def env(self) -> tuple[str, str]:
        return MARK_ENV, self.mark

    def preexec(self) -> Callable[[], None] | None:
        """For Popen: joins the cgroup in the child, before exec (nothing escapes the race)."""
        fd = self._procs_fd
        if fd is None:
            return None

        def join() -> None:  # runs between fork and exec: nothing but one system call
            try:
                os.write(fd, b"0")
            except OSError:
                pass  # started() sees it and falls back on the mark

        return join

    def join(self, pid: int) -> None:
        """Put a started process into the run's cgroup from the tick (start_gate.py: it does
        not run the task's command yet); started() then sees whether that worked."""
        if self._procs_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._procs_fd, str(pid).encode())
                self._moved = pid  # the kernel moved it: no need to look (started())

    def started(self, pid: int) -> None:
        """The leader runs (exec done): note it, and check that it joined the cgroup (unless
        join() moved it: the kernel said so); if it could not (a cgroup tree that refuses it),
        the mark and parent links take over."""
        self.leader = pid
        st = _stat(pid)
        self.since = st[2] if st else None
        if self.cgroup is not None and self._moved != pid and not _joined(pid, self.cgroup):
            if self._procs_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._procs_fd)
                self._procs_fd = None
            remove_cgroup(self.cgroup)
            self.cgroup = None

    def _cgroup_pids(self) -> set[int]:
        if self.cgroup is None:
            return set()
        raw = _read(f"{self.cgroup}/cgroup.procs")
        if raw is None:
            return set()
        return {int(w) for w in raw.split() if w.isdigit()}

    def members(self) -> set[int]:
        """Live (not zombie) processes of the run, never this process. A process found once
        stays found (same pid and start time), even after its parent link is gone."""
        found = self._cgroup_pids() | self._seen.keys()
        if self.cgroup is not None and (self.leader is None or not _live(self.leader)):
            # the kernel's record is complete: no need to read every process on the machine
            table = {pid: st for pid in found if (st := _stat(pid)) is not None}
        else:
            table = {pid: st for pid in _pids() if (st := _stat(pid)) is not None}
            found |= self._descendants(table)
            if self.cgroup is None:  # with a cgroup, the kernel's record alone decides
                found |= {pid for pid, st in table.items() if self._marked(pid, st)}
        alive = {pid for pid in found if pid in table and self._counts(pid, table[pid])
                 and self._seen.get(pid, table[pid][2]) == table[pid][2]}
        self._seen.update((pid, table[pid][2]) for pid in alive)
        return alive

    def _marked(self, pid: int, st: tuple[bytes, int, int]) -> bool:
        """Carries the mark; a mark is forgeable, so only a process of the run's uid counts."""
        return ((self.since is None or st[2] >= self.since) and _has_mark(pid, self._needle)
                and _uid(pid) == self.uid)

    def _counts(self, pid: int, st: tuple[bytes, int, int]) -> bool:
        """Alive, not this process, and not older than the run's leader (pid reuse)."""
        return (pid != os.getpid() and st[0] not in (b"Z", b"X")
                and (self.since is None or st[2] >= self.since))

    def _descendants(self, table: dict[int, tuple[bytes, int, int]]) -> set[int]:
        leader = self.leader
        if leader is None or leader not in table or table[leader][0] in (b"Z", b"X"):
            return set()
        if self.since is not None and table[leader][2] != self.since:
            return set()  # the pid was reused: not our leader any more
        children: dict[int, list[int]] = {}
        for pid, (_state, ppid, _start) in table.items():
            children.setdefault(ppid, []).append(pid)
        out, todo = set(), [leader]
        while todo:
            pid = todo.pop()
            if pid in out:
                continue
            out.add(pid)
            todo.extend(children.get(pid, ()))
        return out

    def signal(self, sig: int, pids: Iterable[int] | None = None) -> None:
        for pid in self.members() if pids is None else pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill_all(self) -> None:
        """SIGKILL to every member; through cgroup.kill too, which no fork can race."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        self.signal(signal.SIGKILL)

    def end(self, grace: float) -> dict[int, str]:
        """TERM every member, wait up to `grace`, KILL what is left; reap the adopted ones.
        Returns the members found, named (pid and command), before they were signalled."""
        pids = self.members()
        if not pids:
            return {}
        named = dict(zip(sorted(pids), describe(pids), strict=True))
        self.signal(signal.SIGTERM, pids)
        self.signal(signal.SIGCONT, pids)  # a stopped process acts on TERM only once continued
        if not _wait_gone(self, grace):
            self.kill_all()
            _wait_gone(self, KILL_SETTLE)
        _reap(pids)
        return named

    def removed_empty(self) -> bool:
        """Issue 27, a run's end: its cgroup removed at once when no member was ever seen
        (the usual short task: its leader's exit left it empty), instead of reading its
        members (the run loop's look for leftovers, end()), then close(). A cgroup v2 with a
        process left in it cannot be removed (EBUSY), and no member was seen that could have
        left it, so a look would have found none: True, the tree closed (and True again if
        asked again). False (nothing done but the descriptor closed): the caller looks at the
        members, ends the tree and closes it as before."""
        if self._removed:
            return True
        if self.cgroup is None or self._seen or self.memory_limited:
            return False
        self._close_procs()
        try:
            os.rmdir(self.cgroup)
        except OSError:
            return False
        self._removed = True
        return True

    def _close_procs(self) -> None:
        if self._procs_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._procs_fd)
            self._procs_fd = None

    def close(self) -> None:
        """Forget the cgroup: it is removed once empty (else the next tick sweeps it)."""
        self._close_procs()
        if self.memory_limited and self.cgroup is not None:
            self.oom_kills = _oom_kills(self.cgroup)
        remove_cgroup(self.cgroup)


def _set_memory_max(base: Path, path: Path, limit: int) -> bool:
    """memory.max of the run's cgroup; the controller is enabled for the base's children
    first when it is not (refused in a cgroup that holds processes and is not the root: then
    RLIMIT_AS takes over, limits.py)."""
    if not (path / "memory.max").exists():
        with contextlib.suppress(OSError):
            (base / "cgroup.subtree_control").write_text("+memory")
    try:
        (path / "memory.max").write_text(str(limit))
        with contextlib.suppress(OSError):
            (path / "memory.swap.max").write_text("0")  # else the limit only moves to swap
        return True
    except OSError:
        return False


def _oom_kills(cgroup: Path) -> int:
    try:
        text = (cgroup / "memory.events").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, count = line.partition(" ")
        if name == "oom_kill" and count.strip().isdigit():
            return int(count)
    return 0


def prune_once() -> Path | None:
    """cgroup_base(), its leftovers pruned once per process: a tick's runs need not each
    rescan the base (the daemon's held tick does it before its minute, cli/warm.py)."""
    base = cgroup_base()
    if base is not None and not _PRUNED:
        _PRUNED.append(True)
        _prune(base)
    return base


def _prune(base: Path) -> None:
    """Empty run cgroups older than a minute (a tick killed with -9 whose run nobody recovered:
    its home deleted, its database lost) go. A young one may be a run about to start; a run
    whose cgroup went falls back on its mark (Tree.started)."""
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith("mdcron-") and e.is_dir()]
    except OSError:
        return
    now = time.time()
    for entry in entries:
        try:
            if now - entry.stat().st_mtime < PRUNE_AGE:
                continue
            if "populated 0" in Path(entry.path, "cgroup.events").read_text():
                os.rmdir(entry.path)
        except OSError:
            continue


def remove_cgroup(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.rmdir()


def _wait_gone(tree: Tree, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while tree.members():
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


def sweep(mark: str | None, cgroup: str | None, since: int | None, grace: float,
          uid: int | None = None) -> list[str]:
    """The next tick's part: kill what is left of a run that is over (its tick and leader are
    gone), found through the cgroup and the mark its lock record names; remove the cgroup.
    Returns the processes killed, named. A cgroup path not named like ours is ignored."""
    if not mark:
        return []
    path = Path(cgroup) if cgroup else None
    if path is not None and path.name != f"mdcron-{mark}":
        path = None
    tree = Tree(mark, path if path is not None and path.is_dir() else None, uid=uid,
                since=since)
    named = tree.end(grace)
    remove_cgroup(tree.cgroup)
    return list(named.values())
