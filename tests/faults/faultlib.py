"""Helpers for the fault suite (tests/faults) and bench/faults.py: start real ticks, watch their
rows, locks and processes, and wait for events (files, exits), never for the clock."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conftest import REPO, SCHEDULER, overdue_lock, render_task, run_cli  # noqa: E402, F401

NOW = "2026-11-23T10:00:00+00:00"
BEFORE = "2026-11-23T09:59:00+00:00"  # a first tick here makes 10:00 slots due at NOW
WAIT = 30.0  # seconds before an awaited event counts as never happening


def db_path(home: Path) -> Path:
    return home / "state" / "mdcron.db"


def query(home: Path, sql: str, args: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(db_path(home), timeout=60)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def runs(home: Path, task_id: str | None = None) -> list[tuple]:
    """(task_id, scheduled_for, attempt, status, error) of every run row, in id order."""
    sql = "SELECT task_id, scheduled_for, attempt, status, coalesce(error, '') FROM runs"
    if task_id is None:
        return query(home, sql + " ORDER BY id")
    return query(home, sql + " WHERE task_id = ? ORDER BY id", (task_id,))


def integrity(home: Path) -> str:
    return query(home, "PRAGMA integrity_check")[0][0]


def held_locks(home: Path) -> list[str]:
    """Task ids whose lock file is flocked by somebody (tried without waiting)."""
    held = []
    for path in sorted((home / "state" / "locks").glob("*.lock")):
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held.append(path.stem)
        finally:
            os.close(fd)
    return held


def lock_pgid(home: Path, task_id: str) -> int | None:
    """The task's process group as its lock records it; None until the tick has written it."""
    try:
        info = json.loads((home / "state" / "locks" / f"{task_id}.lock").read_text())
    except (OSError, ValueError):
        return None  # not there yet, or being rewritten this instant
    pgid = info.get("pgid") if isinstance(info, dict) else None
    return pgid if isinstance(pgid, int) else None


def wait_until(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    """Poll an event (a file appearing, a process exiting); fail after `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"{what}: never happened within {timeout:.0f} s")
        time.sleep(0.01)


def start_tick(home: Path, now: str = NOW, env: dict[str, str] | None = None,
               after: Path | None = None) -> subprocess.Popen[str]:
    """A tick in its own process. With `after`, it waits for that file to appear (a shell
    loop that then execs the tick, same pid), so that many ticks can start together."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    full_env.update(env or {})
    argv = [sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now", now]
    if after is not None:
        argv = ["/bin/sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.005; done; exec "$@"',
                str(after), *argv]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (this machine's PID 1 may not reap orphans)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid`, read from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def kill_group_quietly(pgid: int) -> None:
    """Test cleanup: never leave a test's processes behind, whatever an assertion said."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def doctor(home: Path, *args: str, env: dict[str, str] | None = None):
    """`scheduler.py doctor` in a fresh interpreter."""
    return run_cli(home, "doctor", *args, env=env)


def stop_tick_and_group(tick, pgid: int | None) -> None:  # tick: subprocess.Popen
    """Test cleanup: the tick (if still running) and the task's process group, whatever an
    assertion said."""
    if tick.poll() is None:
        tick.kill()
    tick.communicate()
    if pgid:
        kill_group_quietly(pgid)


def write_tasks(home: Path, count: int, prefix: str = "t", **fields: object) -> list[str]:
    """`count` task files t000, t001, ...; `{id}` in a string field is the task's id."""
    ids = []
    for i in range(count):
        task_id = f"{prefix}{i:03d}"
        values = {k: (v.replace("{id}", task_id) if isinstance(v, str) else v)
                  for k, v in fields.items()}
        (home / "tasks" / f"{task_id}.md").write_text(render_task(task_id, **values),
                                                      encoding="utf-8")
        ids.append(task_id)
    return ids


class Tally:
    """Cases tried, held and lost for one property, with the first few failures described."""

    def __init__(self, name: str):
        self.name = name
        self.tried = self.held = self.lost = 0
        self.notes: dict[str, int] = {}
        self.failures: list[str] = []

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1

    def case(self, ok: bool, failure: str = "") -> None:
        self.tried += 1
        if ok:
            self.held += 1
        else:
            self.lost += 1
            if len(self.failures) < 5:
                self.failures.append(failure)

    def __str__(self) -> str:
        notes = ", ".join(f"{k}: {v}" for k, v in sorted(self.notes.items()))
        return f"{self.name}: {self.tried} tried, {self.held} held, {self.lost} lost ({notes})"


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def peak_rss_of_tick(home: Path, now: str) -> tuple[int, str, str, float]:
    """A real tick and its peak RSS in MiB: (status, out, err, MiB). A small interpreter forks
    and reaps it (wait4), so the figure is the tick's own, not inherited from a big parent (a
    child's ru_maxrss counts the memory it was forked with)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    result = home / "rss.txt"
    out = subprocess.run([sys.executable, "-c", MEASURE, str(result), sys.executable,
                          str(SCHEDULER), "--home", str(home), "tick", "--now", now],
                         capture_output=True, text=True, env=env, timeout=600)
    status, kib = result.read_text().split()
    return int(status), out.stdout, out.stderr, int(kib) / 1024
