"""A peer that answers one byte at a time for ever (tests/trickle_server.py): every network call
of a tick has a wall-clock deadline for the whole call, not per read, and the tick process exits
on time whatever a thread is doing (issue 22, item 3). Each case runs a real tick against the
trickle and times it."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import run_cli
from faultlib import NOW, db_path, query, runs, start_tick, wait_until
from trickle_server import trickle_fixture  # noqa: F401  (fixture `trickle`)

from mdcron.alerts.notify import SEND_TIMEOUT

HEARTBEAT_DEADLINE = 10.0  # README "Alerts": the whole ping, wall-clock

SLACK = 12.0  # interpreter start, imports, the database, and a loaded 2-core machine
LATER = "2026-11-23T10:01:00+00:00"  # nothing due: the idle tick


def timed_tick(home: Path, now: str, env: dict[str, str], bound: float) -> tuple[float, str]:
    """Run one tick; its wall time and output. Fails (and kills it) if it outlives `bound`."""
    start = time.monotonic()
    tick = start_tick(home, now, env)
    try:
        out, err = tick.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        tick.kill()
        out, err = tick.communicate()
        pytest.fail(f"the tick was still running after {bound:.0f} s:\n{out}{err}")
    return time.monotonic() - start, out + err


def age_cache(home: Path) -> None:
    """As if the last tick had read the task files 10 s earlier: not racily clean, so the next
    tick may take the idle path (tests/test_cache.py's `age`)."""
    db = sqlite3.connect(db_path(home), isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        sealed = db.execute("SELECT value FROM meta WHERE key = 'cache_sealed'").fetchone()
        db.execute("UPDATE task_cache SET read_ns = read_ns + 10000000000")
        if sealed is not None:  # the triggers unseal on any change
            db.execute("UPDATE meta SET value = ? WHERE key = 'cache_sealed'", sealed)
        db.execute("COMMIT")
    finally:
        db.close()


def test_a_trickling_heartbeat_ends_the_full_and_the_idle_tick_on_time(home, write_task, trickle):
    (home / "scheduler.yaml").write_text(f'heartbeat_url: "{trickle.url("/ping")}"\n')
    write_task("daily", schedule="0 10 * * *", command="true")
    bound = HEARTBEAT_DEADLINE + SLACK
    took, said = timed_tick(home, NOW, {}, bound)  # the first tick: the full path
    assert f"heartbeat (http://…): no answer within {HEARTBEAT_DEADLINE:g} s" in said, said
    assert took >= HEARTBEAT_DEADLINE - 1  # it did wait for the trickle, up to the deadline
    assert runs(home, "daily")[0][3] == "success"
    age_cache(home)
    # nothing due: the idle path pings (its imports show it: no mdcron.run.tick)
    took, said = timed_tick(home, LATER, {"PYTHONPROFILEIMPORTTIME": "1"}, bound)
    assert "mdcron.state.idle" in said and "mdcron.run.tick" not in said
    assert said.startswith(  # the idle tick's own line, with no tick log prefix
        f"mdcron: heartbeat: heartbeat (http://…): no answer within {HEARTBEAT_DEADLINE:g} s")
    assert len(runs(home)) == 1 and trickle.connections == 2
    wait_until(lambda: trickle.hung_up == 2, "both pings hung up")


def test_a_trickling_destination_leaves_the_message_pending_and_the_tick_on_time(
        home, write_task, trickle):
    (home / "scheduler.yaml").write_text(
        f'notify:\n  destinations:\n    ops: "{trickle.json_url()}"\n')
    write_task("flaky", schedule="0 10 * * *", command="exit 3", retry=False, self_heal=False)
    took, said = timed_tick(home, NOW, {}, SEND_TIMEOUT + SLACK)
    assert trickle.connections >= 1
    (status, attempts, error), = query(home, "SELECT status, attempts, last_error FROM outbox")
    assert (status, attempts) == ("pending", 1), (status, error)
    assert f"no answer within {SEND_TIMEOUT:g} s" in error
    assert f"no answer within {SEND_TIMEOUT:g} s" in said and "attempt 1 of" in said
    # the delivery was stopped, not abandoned: nothing holds the connection after the tick
    wait_until(lambda: trickle.hung_up == trickle.connections, "the destination hung up")


def test_a_trickling_claude_api_times_out_a_claude_task_at_its_timeout(home, write_task,
                                                                        trickle):
    write_task("ask", schedule="0 10 * * *", run_as="claude", timeout="15s", retry=False,
               self_heal=False, body="Say hello.\n")
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": trickle.base_url}
    took, said = timed_tick(home, NOW, env, 15 + SLACK)
    (task, _slot, _attempt, status, error), = runs(home, "ask")
    assert (status, error) == ("timeout", "timeout after 15s"), said
    duration, = query(home, "SELECT finished_at - started_at FROM runs")[0]
    assert 14 <= duration <= 15 + 5  # the deadline, and a loaded machine writing the row
    log, = (home / "logs" / "runs" / "ask").rglob("*.log")
    assert "the Claude API did not answer within" in log.read_text()
    wait_until(lambda: trickle.hung_up == trickle.connections == 1, "the API hung up")


def test_a_trickling_claude_api_ends_the_comment_check_within_its_bound(home, write_task,
                                                                        trickle):
    (home / "scheduler.yaml").write_text("claude:\n  timeout: 4s\n  max_retries: 0\n")
    write_task("job", schedule="0 10 * * *", command="echo ran")
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": trickle.base_url}
    assert run_cli(home, "comment", "job", "is this still needed?").returncode == 0
    took, said = timed_tick(home, NOW, env, 4 + SLACK)
    (_task, _slot, _attempt, status, _error), = runs(home, "job")
    assert status == "success", said
    extra, = query(home, "SELECT extra FROM runs")[0]
    note = json.loads(extra)["note"]
    # within claude.timeout, or less when the check's own bound ran short first (a loaded
    # machine spends part of the bound before the request is sent)
    assert re.match(r"comments left unread: the Claude API did not answer within [0-9.]+ s",
                    note), note
    unread, = query(home, "SELECT count(*) FROM comments WHERE read_at IS NULL")[0]
    assert unread == 1
    wait_until(lambda: trickle.hung_up == trickle.connections == 1, "the API hung up")


def test_a_trickling_destination_delays_only_the_first_of_a_ticks_failure_alerts(
        home, write_task, trickle):
    """Issue 25: a failure alert goes when its ladder ends; once one delivery failed, the
    others of that tick wait for the next flush instead of each waiting SEND_TIMEOUT again."""
    (home / "scheduler.yaml").write_text(
        f'max_parallel: 1\nnotify:\n  destinations:\n    ops: "{trickle.json_url()}"\n'
        '  collapse_window: 0\n')
    for name in ("one", "two", "three"):
        write_task(name, schedule="0 10 * * *", command="exit 3", retry=False, self_heal=False)
    took, said = timed_tick(home, NOW, {}, 2 * SEND_TIMEOUT + SLACK)
    assert trickle.connections == 1, said
    rows = query(home, "SELECT status, attempts FROM outbox ORDER BY id")
    assert [s for s, _ in rows] == ["pending"] * 3, rows
    assert took < 2 * SEND_TIMEOUT, took
