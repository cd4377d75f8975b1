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


# -- what a command builds at scale (issue 27 item 4): counted by cProfile around the real CLI


def _calls(home: Path, tmp_path: Path, *args: str) -> tuple[str, dict[str, int]]:
    """The command's stdout and how often each function of schedule/cache*.py,
    schedule/listing.py and cli/list_json.py ran."""
    import os
    import pstats
    import subprocess
    import sys

    from conftest import SCHEDULER

    out = tmp_path / "cli.prof"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), str(SCHEDULER),
                           "--home", str(home), *args], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    counts: dict[str, int] = {}
    for (path, _line, name), (_cc, calls, *_rest) in pstats.Stats(str(out)).stats.items():
        if ("schedule" in Path(path).parts and Path(path).name.startswith(("cache", "listing"))
                or Path(path).name == "list_json.py"):
            counts[name] = counts.get(name, 0) + calls
    return done.stdout, counts


def _cached_home(home: Path, write_task, n: int) -> None:
    from conftest import age_cache

    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    for i in range(n):
        write_task(f"job{i:03d}", schedule=f"{i % 60} 6 * * 1-5", command=f"echo {i}",
                   tags=["bench"] if i % 2 else [])
    assert run_cli(home, "tick", "--now", NOW).returncode == 0
    age_cache(home)  # the rows count: no file is racily clean any more


def test_list_reads_the_cached_fields_without_building_tasks(home, write_task, tmp_path):
    _cached_home(home, write_task, 120)
    stdout, counts = _calls(home, tmp_path, "list", "--json", "--now", NOW)
    assert counts.get("task_from_json", 0) == 0  # was one Task a task: 120
    assert counts.get("read_entry", 0) == 0  # and no file parsed again
    assert counts.get("record_of", 0) == 0  # no whole Task JSON decoded (issue 27)
    assert counts.get("record_of_listing", 0) == 0  # nor its listed fields decoded: each row
    assert counts.get("_plain") == 120  # is the listing's texts put together (list_json.py)
    rows = json.loads(stdout)
    assert len(rows) == 120 and rows[7]["tags"] == ["bench"] and rows[7]["next_run"]
    table, counts = _calls(home, tmp_path, "list", "--now", NOW)
    assert counts.get("checked") == 120 and "job007" in table  # the table's cells are the
    assert counts.get("record_of", 0) == 0  # listed fields decoded (listing.py), all 120
    assert counts.get("_decode_all") == 1 and counts.get("record_of_listing", 0) == 0  # at once
    # the same rows as from the files themselves (no state database: every file is read)
    import shutil

    shutil.rmtree(home / "state")
    fresh = json.loads(run_cli(home, "list", "--json", "--now", NOW).stdout)
    keep = ("id", "title", "schedule", "timezone", "enabled", "command", "tags", "uses",
            "after", "file", "valid")
    assert [{k: r[k] for k in keep} for r in rows] == [{k: r[k] for k in keep} for r in fresh]


def test_show_and_next_decode_only_their_own_row(home, write_task, tmp_path):
    _cached_home(home, write_task, 120)
    (home / "tasks" / "bad.md").write_text("---\nid: bad\nschedule: nope\n---\n")
    stdout, counts = _calls(home, tmp_path, "show", "job042", "--json")
    assert json.loads(stdout)["task"]["id"] == "job042"
    assert 1 <= counts.get("from_row", 0) <= 2  # its row (and a file with problems): was 120
    assert counts.get("holds", 0) <= 2  # another id's row is its stat, compared as it is
    stdout, counts = _calls(home, tmp_path, "next", "job042", "--after", NOW, "-n", "1")
    assert stdout.startswith("2026-11-30 06:42"), stdout
    assert 1 <= counts.get("from_row", 0) <= 2


def test_a_duplicate_id_in_an_unchanged_file_is_still_found_by_show(home, write_task):
    _cached_home(home, write_task, 20)
    write_task("job003", filename="copy.md", schedule="5 6 * * *", command="true")
    run_cli(home, "list", "--json", "--now", NOW)  # cached with the duplicate
    from conftest import age_cache

    age_cache(home)
    shown = run_cli(home, "show", "job003")
    assert shown.returncode != 0 and "duplicate id 'job003'" in shown.stderr, shown.stderr


def test_list_with_a_damaged_task_row_reads_that_file_again(home, write_task):
    _cached_home(home, write_task, 60)
    before = json.loads(run_cli(home, "list", "--json", "--now", NOW).stdout)
    db = _db(home)
    db.execute("UPDATE task_cache_data SET task = '{\"id\": 1}' WHERE path LIKE '%job007.md'")
    db.commit()
    db.close()
    after = json.loads(run_cli(home, "list", "--json", "--now", NOW).stdout)
    assert after == before


def test_short_absolute_writes_what_strftime_wrote():
    """timefmt.short_absolute formats by hand (issue 27): the same text as strftime's."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from mdcron.cli.timefmt import short_absolute

    now = datetime(2026, 11, 28, 12, tzinfo=ZoneInfo("UTC")).timestamp()
    for zone in (ZoneInfo("UTC"), ZoneInfo("Europe/Paris"), ZoneInfo("America/St_Johns"), None):
        for ts in (now, now - 86400 * 200, now + 86400 * 40, 0.0, now - 3600 * 5.5):
            local = datetime.fromtimestamp(ts, zone) if zone else datetime.fromtimestamp(ts)
            local = local.astimezone(zone)
            this_year = local.year == datetime.fromtimestamp(now).astimezone(zone).year
            want = local.strftime("%b %d %H:%M %Z" if this_year else "%Y-%m-%d %H:%M %Z")
            assert short_absolute(ts, zone, now) == want


def test_next_refuses_a_duplicate_id_as_show_does(home, write_task):
    """`next` used to print the fires of whichever file came first, exit 0."""
    write_task("job003", schedule="5 6 * * *", command="true")
    write_task("job003", filename="copy.md", schedule="7 8 * * *", command="true")
    for command in ("next", "show"):
        out = run_cli(home, command, "job003")
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "duplicate id 'job003'" in out.stderr and "copy.md" in out.stderr, out.stderr
        assert "rename one" in out.stderr and out.stdout == "", out.stdout
