"""Concurrency and crashes, with real ticks in real processes: many ticks at one instant, ticks
killed with SIGKILL while tasks run and while they write the database, process groups that
resist SIGTERM, and hung holders of stale locks."""

from __future__ import annotations

import signal

import pytest
from faultlib import (
    BEFORE,
    NOW,
    group_members,
    held_locks,
    integrity,
    kill_group_quietly,
    lock_pgid,
    overdue_lock,
    pid_alive,
    run_cli,
    runs,
    start_tick,
    stop_tick_and_group,
    wait_until,
    write_tasks,
)
from scenarios import kill_at_random, kill_in_write, many_ticks

NEXT_DAY = "2026-11-24T10:00:00+00:00"


def test_twenty_ticks_at_one_instant_run_each_of_200_slots_exactly_once(home):
    """Every (task, slot) runs exactly once, as the one row recorded for it (the task writes
    its run id); no tick fails, none reports "database is locked"; the database is sound."""
    tally = many_ticks(home, ticks=20, tasks=200)
    print(tally)
    assert tally.tried == 200 and tally.lost == 0, tally.failures


def test_tick_killed_while_tasks_run_leaves_crashed_rows_and_no_second_run(home):
    (home / "scheduler.yaml").write_text("max_parallel: 4\n")
    started, marks, release = home / "started", home / "marks", home / "release"
    started.mkdir()
    marks.mkdir()
    ids = write_tasks(home, 12, schedule="0 10 * * *", timeout=300, command=(
        f"echo $$ >> {marks}/{{id}}; touch {started}/{{id}};"
        f" while [ ! -e {release} ]; do sleep 0.02; done"))
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home)
    orphans: list[int] = []
    try:
        wait_until(lambda: len(list(started.iterdir())) == 4, "four tasks started")
        tick.send_signal(signal.SIGKILL)
        tick.communicate()
        orphans = [int((marks / p.name).read_text()) for p in started.iterdir()]
        began = sorted(p.name for p in started.iterdir())
        # a task whose tick died between its spawn and its record (a mark, no group yet) is
        # killed through its mark and crashed by the next tick (tests/faults/test_fault_spawn_gap)
        gap = {t for t in began if lock_pgid(home, t) is None}
        running = [t for t in began if t not in gap]
        # the orphaned tasks still hold their locks; the 8 claimed but never started are crashed
        out = run_cli(home, "tick", "--now", "2026-11-23T10:00:30+00:00")
        assert out.returncode == 0, out.stdout + out.stderr
        status = {r[0]: r[3] for r in runs(home)}
        assert sorted(t for t, s in status.items() if s == "running") == running
        assert sorted(t for t, s in status.items() if s == "crashed") == sorted(
            set(ids) - set(running))
        assert held_locks(home) == running
        assert all("may have started" in r[4] for r in runs(home) if r[0] in gap)
        release.touch()
        wait_until(lambda: not any(pid_alive(p) for p in orphans), "orphaned tasks exited")
        out = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00")
        rows = runs(home)
        assert len(rows) == 12 and all(r[3] == "crashed" for r in rows), rows
        assert all("died before it finished" in r[4] for r in rows)
        assert held_locks(home) == []
        assert integrity(home) == "ok"
        for task_id in ids:  # nothing ran twice for the 10:00 slot
            lines = (marks / task_id).read_text().split() if (marks / task_id).exists() else []
            assert len(lines) == (1 if task_id in began else 0)
        # the next fire runs as usual, once
        out = run_cli(home, "tick", "--now", NEXT_DAY)
        assert out.returncode == 0
        assert [r[3] for r in runs(home)[12:]] == ["success"] * 12
    finally:
        release.touch()
        for pid in orphans:
            kill_group_quietly(pid)


def test_tick_killed_inside_a_database_write_leaves_a_sound_database(home):
    """SIGKILL while the tick is inside a long write transaction (retention deleting its tenth
    of 450,000 old runs): SQLite rolls it back, nothing committed is lost, nothing runs twice."""
    assert kill_in_write(home) == []


def test_tick_killed_at_random_moments(tmp_path):
    tally = kill_at_random(tmp_path, trials=4)
    print(tally)
    assert tally.lost == 0, tally.failures


@pytest.mark.parametrize("leader", ["waits", "exits"])
def test_grandchild_ignoring_term_dies_with_its_group(home, write_task, leader):
    """The grandchild ignores SIGTERM (the ignored disposition survives exec). When the
    leader waits, the timeout kills the group; when the leader exits first, the group it left
    behind is killed at once. Either way no process of the group exists afterwards."""
    (home / "scheduler.yaml").write_text("kill_grace: 0.5\n")
    gc, lead = home / "grandchild", home / "leader"
    spawn = f"sh -c 'trap \"\" TERM; echo $$ > {gc}; exec sleep 300' &"
    tail = "wait" if leader == "waits" else f"while [ ! -s {gc} ]; do sleep 0.01; done; exit 0"
    write_task("g", schedule="0 10 * * *", timeout=2,
               command=f"echo $$ > {lead}; {spawn} {tail}")
    run_cli(home, "tick", "--now", BEFORE)
    pgid = None
    try:
        out = run_cli(home, "tick", "--now", NOW)
        pgid = int(lead.read_text())
        grandchild = int(gc.read_text())
        [row] = runs(home, "g")
        assert row[3] == ("timeout" if leader == "waits" else "success"), out.stdout
        assert not pid_alive(grandchild)
        assert group_members(pgid) == []
        assert held_locks(home) == []
    finally:
        if pgid:
            kill_group_quietly(pgid)


@pytest.mark.parametrize("holder", ["orphaned task", "stopped tick"])
def test_hung_holder_of_a_stale_lock_is_killed_and_recorded(home, write_task, http_sink,
                                                             holder):
    """The lock is older than timeout + 60 s: its holder is killed (the task's whole group, and
    a hung tick too), the run recorded as timeout, and a forced alert goes out."""
    (home / "scheduler.yaml").write_text(
        f"kill_grace: 0.5\nnotify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n")
    started, gc = home / "started", home / "grandchild"
    write_task("hung", schedule="0 10 * * *", timeout=5, command=(
        f"sh -c 'trap \"\" TERM; echo $$ > {gc}; exec sleep 300' & touch {started}; wait"))
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home)
    pgid = None
    try:
        wait_until(lambda: started.exists() and gc.exists() and gc.read_text().strip()
                   and lock_pgid(home, "hung"), "task, grandchild and lock record")
        pgid = lock_pgid(home, "hung")
        assert pgid is not None
        if holder == "orphaned task":
            tick.send_signal(signal.SIGKILL)
            tick.communicate()
        else:
            tick.send_signal(signal.SIGSTOP)  # a hung tick: alive, holding the lock, silent
        overdue_lock(home, "hung")  # 10 min later, on the monotonic clock the lock records
        out = run_cli(home, "tick", "--now", "2026-11-23T10:10:00+00:00")
        assert "marked timeout" in out.stdout, out.stdout + out.stderr
        [row] = runs(home, "hung")
        assert row[3] == "timeout" and "stale lock" in row[4]
        assert group_members(pgid) == []
        assert not pid_alive(int(gc.read_text()))
        if holder == "stopped tick":
            tick.communicate(timeout=30)
            assert tick.returncode == -signal.SIGKILL
            assert "killed hung tick" in row[4]
        assert held_locks(home) == []
        titles = [b.get("title", "") for b in http_sink.bodies() if isinstance(b, dict)]
        assert any("hung" in t and "timed out" in t for t in titles), titles
        assert integrity(home) == "ok"
    finally:
        stop_tick_and_group(tick, pgid)
