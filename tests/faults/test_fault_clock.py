"""The clock can lie for a minute without lasting harm (issue 22 item 5), with real ticks in real
processes and the time injected with `tick --now`: a tick in 2027 then the right time again (the
every-minute task runs at once, one alert says it), a tick 98 days ahead (retention deletes
nothing, then at most a tenth and never a task's newest runs), and a 15-minute jump while a task
runs (the stale-lock judgement is monotonic: the task is not killed)."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from faultlib import (
    BEFORE,
    NOW,
    lines,
    lock_pgid,
    query,
    run_cli,
    start_tick,
    stop_tick_and_group,
    wait_until,
)

FUTURE = "2027-06-01T10:00:00+00:00"  # a clock 190 days ahead, for one tick


def ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def notify_to(home: Path, sink) -> None:
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{sink.json_url('/hook')}\"\n  default: ops\n")


def clock_alerts(sink) -> list[dict]:
    return [b for b in sink.bodies() if "clock went back" in str(b.get("title", ""))]


def slots(home: Path, task_id: str) -> list[tuple[float, str]]:
    return query(home, "SELECT scheduled_for, status FROM runs WHERE task_id = ? ORDER BY id",
                 (task_id,))


def test_one_tick_in_2027_then_the_right_time_runs_the_every_minute_task(home, write_task,
                                                                           http_sink):
    notify_to(home, http_sink)
    write_task("every", schedule="* * * * *", command=f"echo x >> {home}/every")
    write_task("daily", schedule="30 6 * * *", command=f"echo x >> {home}/daily")
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", FUTURE)
    ran = len(lines(home / "every"))  # 09:59 (first seen) and "2027"
    daily = slots(home, "daily")
    dry = run_cli(home, "tick", "--dry-run", "--now", NOW)  # says what the tick will do
    assert "every" in dry.stdout and "would run" in dry.stdout, dry.stdout + dry.stderr
    assert "daily" not in dry.stdout
    back = run_cli(home, "tick", "--now", NOW)
    assert "the clock went back by 190 d" in back.stdout, back.stdout + back.stderr
    assert "slots after now were cleared" in back.stdout
    assert len(lines(home / "every")) == ran + 1  # this minute's fire ran at once
    assert slots(home, "every")[-1] == (ts(NOW), "success")
    nxt = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert "clock went back" not in nxt.stdout  # said once
    assert len(lines(home / "every")) == ran + 2
    assert slots(home, "daily") == daily  # no daily fire at the wrong moment
    [alert] = clock_alerts(http_sink)
    assert "190 d" in alert["message"], alert


def test_the_idle_tick_does_not_hide_a_clock_that_went_back(home, write_task):
    """The 2027 tick leaves a cache that proves "nothing due until 2027": the idle tick must not
    trust it (state/idle.py declines on state stamped after now)."""
    from test_cache import age

    write_task("every", schedule="* * * * *", command=f"echo x >> {home}/every")
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", FUTURE)
    ran = len(lines(home / "every"))
    age(home)  # the task file's cache row is no longer racy: the idle tick could answer
    back = run_cli(home, "tick", "--now", NOW)
    assert "the clock went back" in back.stdout, back.stdout + back.stderr
    assert len(lines(home / "every")) == ran + 1


def test_a_tick_98_days_ahead_deletes_no_history(home, write_task):
    """One tick 98 days ahead deletes nothing (the previous tick does not vouch for its time);
    a clock that stays wrong deletes at most a tenth of the runs per pass, oldest first, never
    a task's ten newest runs nor their logs; back at the right time, nothing more goes."""
    for task_id in ("a", "b"):
        write_task(task_id, schedule="* * * * *", command="echo x")
    run_cli(home, "tick", "--now", BEFORE)
    for minute in range(15):
        run_cli(home, "tick", "--now", f"2026-11-23T10:{minute:02d}:00+00:00")

    def history() -> list[tuple]:
        return query(home, "SELECT id, task_id, log_path FROM runs ORDER BY id")

    before = history()
    assert len(before) == 32 and all(Path(r[2]).exists() for r in before)  # 09:59 to 10:14
    ahead = run_cli(home, "tick", "--now", "2027-03-01T10:15:00+00:00")
    assert ahead.returncode == 0, ahead.stdout + ahead.stderr
    after_jump = history()
    assert after_jump[:32] == before and all(Path(r[2]).exists() for r in after_jump if r[2])
    run_cli(home, "tick", "--now", "2027-03-01T10:16:00+00:00")  # the clock stays wrong
    kept = history()
    total = len(after_jump) + 2  # this tick's own two runs were recorded before retention
    gone = [r for r in after_jump if r not in kept]
    assert 0 < len(gone) <= math.ceil(total / 10), (len(gone), total)
    assert gone == after_jump[:len(gone)]  # oldest first
    for task_id in ("a", "b"):
        mine = [r for r in after_jump if r[1] == task_id]
        assert all(r in kept for r in mine[-10:])
    assert all(Path(r[2]).exists() for r in kept if r[2])
    assert not any(Path(r[2]).exists() for r in gone)
    back = run_cli(home, "tick", "--now", "2026-11-23T10:17:00+00:00")  # the right time again
    assert "the clock went back" in back.stdout, back.stdout + back.stderr
    assert [r for r in kept if r not in history()] == []


def test_a_clock_15_minutes_ahead_does_not_kill_a_healthy_run(home, write_task):
    """A task with `timeout: 600` is running; the next tick's clock says 15 minutes later
    (past timeout + 60 s on the wall clock). Staleness is judged on the monotonic clock the
    lock records: the task is not killed and ends as a success."""
    started, release = home / "started", home / "release"
    write_task("steady", schedule="0 10 * * *", timeout=600, command=(
        f"touch {started}; while [ ! -e {release} ]; do sleep 0.05; done; echo done"))
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home, NOW)
    pgid = None
    try:
        wait_until(lambda: started.exists() and lock_pgid(home, "steady"), "task started")
        pgid = lock_pgid(home, "steady")
        jump = run_cli(home, "tick", "--now", "2026-11-23T10:15:00+00:00")
        assert "marked timeout" not in jump.stdout, jump.stdout + jump.stderr
        release.touch()
        out, err = tick.communicate(timeout=60)
        assert tick.returncode == 0, out + err
    finally:
        stop_tick_and_group(tick, pgid)
    assert [s for _, s in slots(home, "steady")] == ["success"]


def test_the_lock_record_carries_a_monotonic_deadline(home, write_task):
    """What the judgement reads: the lock names its boot and a CLOCK_MONOTONIC deadline."""
    import json
    import time

    started, release = home / "started", home / "release"
    write_task("held", schedule="0 10 * * *", timeout=600, command=(
        f"touch {started}; while [ ! -e {release} ]; do sleep 0.05; done"))
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home, NOW)
    pgid = None
    try:
        wait_until(lambda: started.exists() and lock_pgid(home, "held"), "task started")
        pgid = lock_pgid(home, "held")
        info = json.loads((home / "state" / "locks" / "held.lock").read_text())
        left = info["mono_deadline"] - time.monotonic()
        assert 500 < left <= 600, info
        assert info["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        release.touch()
        tick.communicate(timeout=60)
    finally:
        stop_tick_and_group(tick, pgid)
