"""A tick killed between spawning a task and recording its process group.

The lock record names the run's mark (and cgroup) before the spawn, so the next tick finds what
that tick left running, kills it and frees the lock; the crash reason says the task may have
started and names what was killed. The gap is a few milliseconds: the test watches the real
lock record and kills the tick the moment it names the mark and no process group yet, and tries
again (a new home) when the kill landed before the fork or after the record. Where the tick
makes a cgroup per run, a shell task waits at its gate (run/start_gate.py) until the record
names its group: there the gap leaves nothing that ran (the last test); the mark's recovery is
tested with cgroups off.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from faultlib import BEFORE, NOW, held_locks, pid_alive, render_task, run_cli, runs, start_tick

NEXT = "2026-11-23T10:00:30+00:00"
TRIES = 100  # the gap is narrower since the tick holds its collector until the task started


def _record(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_bytes() or b"null")
    except (OSError, ValueError):
        return None  # not there yet, or being rewritten this instant
    return data if isinstance(data, dict) else None


NO_CGROUP = {"MDCRON_CGROUP": "off"}  # no gate: the task runs from its spawn on (the mark's case)


def _long_task_home(home: Path) -> Path:
    """A home whose one task (due at 10:00, 600 s timeout) writes its pid, then sleeps; seen
    by a tick before its minute."""
    (home / "tasks").mkdir(parents=True)
    (home / "tasks" / "long.md").write_text(render_task(
        "long", schedule="0 10 * * *", timeout=600,
        command=f"echo $$ > {home / 'pid'}; exec sleep 300"))
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    return home


def _kill_in_the_gap(home: Path, env: dict[str, str] | None = NO_CGROUP,
                     wait: float = 3) -> tuple[int | None, dict | None]:
    """Run a tick and SIGKILL it once the lock record has a mark and no pgid. (the task's pid
    when it was spawned and the record still names no process group, that record)."""
    pid_file, lock = home / "pid", home / "state" / "locks" / "long.lock"
    tick = start_tick(home, NOW, env=env)
    give_up = time.monotonic() + 60
    caught = False
    while tick.poll() is None and time.monotonic() < give_up:
        seen = _record(lock)
        if seen and seen.get("pgid") is not None:
            break  # missed: the task is recorded already
        if seen and seen.get("mark"):
            caught = True
            break
    tick.send_signal(signal.SIGKILL)
    tick.communicate()
    spawned = time.monotonic() + wait  # if the fork happened, the shell says so at once
    while not (pid_file.exists() and pid_file.read_text().strip()):
        if time.monotonic() > spawned:
            return None, _record(lock) if caught else None
        time.sleep(0.01)
    return int(pid_file.read_text()), _record(lock) if caught else None


def test_a_tick_killed_between_spawn_and_record_leaves_nothing_running(tmp_path: Path) -> None:
    orphan = None
    for attempt in range(TRIES):
        home = _long_task_home(tmp_path / f"home{attempt}")
        orphan, record = _kill_in_the_gap(home)
        if orphan is not None and record is not None and record.get("pgid") is None:
            print(f"caught in the gap at try {attempt + 1}")
            break
        if orphan is not None:
            os.kill(orphan, signal.SIGKILL)  # the record was written after all: try again
            orphan = None
    assert orphan is not None, (f"never caught a tick between its spawn and its record in"
                                f" {TRIES} tries (before the fix the record has no mark then)")
    try:
        assert pid_alive(orphan) and held_locks(home) == ["long"]
        out = run_cli(home, "tick", "--now", NEXT, env=NO_CGROUP)
        assert "Traceback" not in out.stderr, out.stderr
        deadline = time.monotonic() + 30
        while pid_alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_alive(orphan), "the task the killed tick spawned still runs"
        assert held_locks(home) == []
        [row] = runs(home, "long")
        assert row[3] == "crashed", row
        assert "may have started" in row[4] and "killed:" in row[4] and str(orphan) in row[4], row
    finally:
        if pid_alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_a_record_with_a_mark_and_no_group_is_ended_through_the_mark(home: Path) -> None:
    """Deterministic: the state the gap leaves (a dead tick, its task running with the run's
    mark, the lock record naming the mark and no process group), made from a real run whose
    group the test takes back out of the record."""
    (home / "tasks" / "long.md").write_text(render_task(
        "long", schedule="0 10 * * *", timeout=600,
        command=f"echo $$ > {home / 'pid'}; exec sleep 300"))
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    lock = home / "state" / "locks" / "long.lock"
    tick = start_tick(home, NOW)
    orphan = None
    try:
        give_up = time.monotonic() + 60
        while not ((_record(lock) or {}).get("pgid") and (home / "pid").exists()
                   and (home / "pid").read_text().strip()):
            assert time.monotonic() < give_up, "the task never started"
            time.sleep(0.01)
        orphan = int((home / "pid").read_text())
        tick.send_signal(signal.SIGKILL)
        tick.communicate()
        record = _record(lock)
        assert record is not None and record["mark"]
        record.update(pgid=None, child_start=None)  # as a tick killed before on_start left it
        lock.write_text(json.dumps(record, sort_keys=True))
        out = run_cli(home, "tick", "--now", NEXT)
        assert "Traceback" not in out.stderr, out.stderr
        deadline = time.monotonic() + 30
        while pid_alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_alive(orphan), "the marked task still runs"
        assert held_locks(home) == []
        [row] = runs(home, "long")
        assert row[3] == "crashed" and "may have started" in row[4], row
        assert "killed:" in row[4] and str(orphan) in row[4], row
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.communicate()
        if orphan is not None and pid_alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_a_gated_task_whose_tick_died_in_the_gap_never_runs(tmp_path: Path) -> None:
    """With a cgroup per run, a shell task waits at its gate (run/start_gate.py) until the lock
    names its group: a tick killed in between leaves a gate that reads end of file and exits;
    the command never ran, and the next tick records the run crashed and frees the lock."""
    from mdcron.run.proctree import cgroup_base

    if cgroup_base() is None:
        pytest.skip("this machine gives the tick no writable cgroup v2 (no gate then)")
    for attempt in range(TRIES):
        home = _long_task_home(tmp_path / f"home{attempt}")
        ran, record = _kill_in_the_gap(home, env=None, wait=1)
        if record is not None and record.get("pgid") is None:
            print(f"caught in the gap at try {attempt + 1}")
            break
        if ran is not None:
            os.kill(ran, signal.SIGKILL)  # the kill landed after the record: try again
    else:
        pytest.fail(f"never caught a tick between its spawn and its record in {TRIES} tries")
    assert ran is None, "the command ran although its tick died before naming its group"
    deadline = time.monotonic() + 10
    while held_locks(home) and time.monotonic() < deadline:  # the gate exits at once
        time.sleep(0.02)
    assert held_locks(home) == []
    out = run_cli(home, "tick", "--now", NEXT)
    assert "Traceback" not in out.stderr, out.stderr
    [row] = runs(home, "long")
    assert row[3] == "crashed", row
    assert not (home / "pid").exists()
