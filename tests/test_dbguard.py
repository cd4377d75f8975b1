"""A deleted state database is recreated with one forced alert, through the real CLI and a real
HTTP endpoint; a new home gets none."""

from __future__ import annotations

import json
import shutil
import sqlite3

from conftest import run_cli

T = ["2026-11-23T09:59:00+00:00", "2026-11-23T10:00:00+00:00", "2026-11-23T10:01:00+00:00",
     "2026-11-23T10:02:00+00:00", "2026-11-23T10:03:00+00:00"]


def setup(home, write_task, sink) -> None:
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{sink.json_url('/hook')}\"\n  default: ops\n")
    write_task("job", schedule="* * * * *", command="echo fine")


def recreated(sink) -> list[dict]:
    return [b for b in sink.bodies() if "recreated" in str(b.get("title", ""))]


def drop_database(home) -> None:
    for path in (home / "state").glob("mdcron.db*"):
        path.unlink()


def test_a_deleted_database_alerts_once(home, write_task, http_sink):
    setup(home, write_task, http_sink)
    run_cli(home, "tick", "--now", T[0])
    run_cli(home, "tick", "--now", T[1])
    assert recreated(http_sink) == []  # a new home is no loss
    drop_database(home)
    done = run_cli(home, "tick", "--now", T[2])
    [alert] = recreated(http_sink)
    assert "first seen now" in alert["message"] and "database-created" in alert["message"]
    assert "was missing or empty and has been created afresh" in done.stdout
    run_cli(home, "tick", "--now", T[3])
    assert len(recreated(http_sink)) == 1


def test_a_deleted_state_folder_alerts_through_the_run_logs(home, write_task, http_sink):
    setup(home, write_task, http_sink)
    run_cli(home, "tick", "--now", T[0])
    run_cli(home, "tick", "--now", T[1])
    shutil.rmtree(home / "state")
    run_cli(home, "history")  # reads only: creates nothing
    run_cli(home, "run", "job")  # this one creates the database; the next tick alerts
    run_cli(home, "tick", "--now", T[2])
    [alert] = recreated(http_sink)
    assert "run logs from before" in alert["message"]


def test_the_marker_holds_a_slot_before_its_task_starts(home, write_task):
    """Issue 27: a tick that finds a task due writes the marker while it loads (dbguard
    note_ahead), and starts the database's log there too (store.warm_ahead: meta tick_began);
    the claim still waits for both, so the task, once started, finds its own slot in the
    marker, and a database lost after that never runs the slot again."""
    from datetime import datetime

    from conftest import age_cache

    write_task("job", schedule="* * * * *", command="cat state/database-created")
    write_task("other", schedule="0 6 * * 1-5", command="true")
    run_cli(home, "tick", "--now", T[0])
    for at in T[1:3]:
        age_cache(home)
        assert run_cli(home, "tick", "--now", at).returncode == 0
        db = sqlite3.connect(home / "state" / "mdcron.db")
        [(tail,)] = db.execute("SELECT output_tail FROM runs WHERE task_id = 'job'"
                               " AND scheduled_for = ?", (datetime.fromisoformat(at).timestamp(),))
        db.close()
        assert json.loads(tail)["claimed_until"] == datetime.fromisoformat(at).timestamp()
        db = sqlite3.connect(home / "state" / "mdcron.db")  # the log started ahead (store.py)
        [(began,)] = db.execute("SELECT value FROM meta WHERE key = 'tick_began'")
        assert 0 <= float(began) - datetime.fromisoformat(at).timestamp() < 30
        db.close()
    drop_database(home)
    again = run_cli(home, "tick", "--now", T[2].replace(":00+", ":30+"))
    assert "job: success" not in again.stdout  # the lost database's slot is not run twice
    db = sqlite3.connect(home / "state" / "mdcron.db")
    assert db.execute("SELECT count(*) FROM runs WHERE task_id = 'job'").fetchone() == (0,)
    db.close()
