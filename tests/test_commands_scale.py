"""Commands at scale (issue 27 item 4): read-only commands go through the task-file cache and,
after a config change, rebuild it once (and save it) rather than on every call. Real CLI in
subprocesses, real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_cli

NOW = "2026-11-28T12:00:00+00:00"


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "state" / "mdcron.db")


def _key(home: Path) -> str:
    db = _db(home)
    try:
        return db.execute("SELECT value FROM meta WHERE key = 'cache_key'").fetchone()[0]
    finally:
        db.close()


def _home(home: Path, write_task) -> None:
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    for i in range(5):
        write_task(f"job{i}", schedule=f"{i} 6 * * 1-5", command="true")
    assert run_cli(home, "tick", "--now", NOW).returncode == 0


def test_list_after_a_config_change_keeps_the_due_times_it_computed(home, write_task):
    _home(home, write_task)
    (home / "scheduler.yaml").write_text("timezone: UTC\ncatchup: 2h\n")
    first = json.loads(run_cli(home, "list", "--json", "--now", NOW).stdout)
    db = _db(home)
    missing = db.execute("SELECT count(*) FROM task_cache WHERE task_id IS NOT NULL"
                         " AND next_due IS NULL").fetchone()[0]
    db.close()
    assert missing == 0  # computed once by that list, kept for the next one
    assert json.loads(run_cli(home, "list", "--json", "--now", NOW).stdout) == first
    assert all(r["next_run"] for r in first)


def test_show_and_next_after_a_config_change_save_the_rebuilt_cache(home, write_task):
    _home(home, write_task)
    before = _key(home)
    (home / "scheduler.yaml").write_text("timezone: UTC\ncatchup: 2h\n")
    shown = run_cli(home, "show", "job3", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["task"]["id"] == "job3"
    after = _key(home)
    assert after != before  # rebuilt and saved once: the next command reads the rows
    nxt = run_cli(home, "next", "job3", "--after", NOW, "-n", "1")
    assert nxt.returncode == 0 and nxt.stdout.startswith("2026-11-30 06:03"), nxt.stdout
    assert _key(home) == after
    missing = run_cli(home, "show", "nope")
    assert missing.returncode != 0 and "nope" in missing.stderr
