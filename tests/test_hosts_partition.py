"""Several hosts when the network misbehaves (issue 23): one frozen host cannot stall the
others. Every PostgreSQL session of mdcron carries server-side bounds (state/pgbounds.py), so a
host frozen inside a write transaction loses its session, and the write lock with it, after
IDLE_IN_TX; the others wait at most LOCK_WAIT."""

from __future__ import annotations

import json
import subprocess
import time

from conftest import run_cli

BEFORE = "2026-11-23T09:59:00+00:00"
NOW = "2026-11-23T10:00:00+00:00"


def test_a_host_frozen_holding_the_write_lock_stalls_the_others_for_seconds(pg_url, home,
                                                                             write_task):
    from mdcron.state.pgstate import connect

    (home / "scheduler.yaml").write_text(f"state_url: '{pg_url}'\nhost: b\n")
    write_task("ok", schedule="* * * * *", command="echo fine")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    runs_before = len(json.loads(run_cli(home, "history", "--json").stdout))
    frozen = connect(pg_url)  # host a's session, with mdcron's own session settings
    frozen.execute("BEGIN")  # a takes the write lock ... and freezes (never sends again)
    try:
        start = time.monotonic()
        try:
            tick = run_cli(home, "tick", "--now", NOW, timeout=90)
        except subprocess.TimeoutExpired:
            raise AssertionError("b's tick still waits on frozen a's lock after 90 s") from None
        took = time.monotonic() - start
        assert tick.returncode == 0, tick.stderr
        assert took < 45, took  # IDLE_IN_TX (10 s) and a tick, on a loaded machine
        history = json.loads(run_cli(home, "history", "--json").stdout)
        assert len(history) == runs_before + 1  # the 10:00 slot ran, once
        assert (history[0]["task_id"], history[0]["status"]) == ("ok", "success")
    finally:
        try:
            frozen.close()
        except Exception:
            pass


def test_every_session_carries_the_bounds(pg_url):
    from mdcron.state.pgstate import connect

    db = connect(pg_url)
    try:
        shown = {name: db.execute(f"SHOW {name}").fetchone()[0] for name in
                 ("idle_in_transaction_session_timeout", "statement_timeout", "lock_timeout")}
    finally:
        db.close()
    assert shown == {"idle_in_transaction_session_timeout": "10s", "statement_timeout": "30s",
                     "lock_timeout": "20s"}


def test_a_lock_held_past_the_bound_stops_the_tick_with_one_line_and_one_alert(
        pg_url, home, write_task, http_sink):
    import psycopg

    from mdcron.state.pgstate import WRITE_LOCK

    (home / "scheduler.yaml").write_text(
        f"state_url: '{pg_url}'\nhost: b\nnotify:\n  default: ops\n  destinations:\n"
        f"    ops: \"{http_sink.json_url('/hook')}\"\n")
    write_task("ok", schedule="* * * * *", command="echo fine")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    # another program's session (no mdcron bounds) holds the write lock and stays busy
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        tick = run_cli(home, "tick", "--now", NOW, timeout=120)
        again = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00", timeout=120)
    assert tick.returncode == 2, tick
    assert "Traceback" not in tick.stderr + tick.stdout, tick.stderr
    errors = [line for line in tick.stderr.splitlines() if "write lock" in line]
    assert len(errors) == 1 and "busy" in errors[0], tick.stderr
    assert again.returncode == 2
    alerts = [m for m in http_sink.bodies() if "write lock" in json.dumps(m)]
    assert len(alerts) == 1, alerts  # one alert, not one per minute


def test_a_uses_task_ending_while_the_database_is_down_stops_the_tick_cleanly(
        pg_url, pg_server, tmp_path, http_sink):
    """Issue 23 item 3: the lease release and the chain rounds met the lost database with a raw
    OperationalError, exit 1 and a false "tick crashed" alert although the task ran."""
    from conftest import render_task
    from test_hosts import database_refusing, history, make_home, start_tick, wait_for_file

    marks = tmp_path / "marks"
    marks.mkdir()
    a = make_home(tmp_path, "a", pg_url, marks, 0)
    with open(a / "scheduler.yaml", "a", encoding="utf-8") as handle:
        handle.write(f"resources: {{gpu: 1}}\nnotify:\n  default: ops\n  destinations:\n"
                     f"    ops: \"{http_sink.json_url()}\"\n")
    (a / "tasks" / "job.md").write_text(render_task(
        "job", schedule="0 10 * * *", uses=["gpu"], command=f"echo a >> {marks}/ran;"
        f" while [ ! -e {marks}/release ]; do sleep 0.05; done"), encoding="utf-8")
    (a / "tasks" / "next.md").write_text(render_task(
        "next", schedule="after", after=["job"], command="true"), encoding="utf-8")
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    tick = start_tick(a, NOW)
    wait_for_file(marks / "ran")
    with database_refusing(pg_server, pg_url):
        (marks / "release").touch()
        out, err = tick.communicate(timeout=90)
    assert tick.returncode == 2, out + err
    assert "Traceback" not in out + err and "tick crashed" not in out + err, out + err
    assert "spool.jsonl" in err, err
    assert not [b for b in http_sink.bodies() if "crashed" in json.dumps(b)]
    later = run_cli(a, "tick", "--now", "2026-11-23T10:00:30+00:00")
    assert "recorded from the spool" in later.stdout, later.stdout + later.stderr
    assert [(r["task_id"], r["status"]) for r in history(a) if r["task_id"] == "job"] == \
        [("job", "success")]
