"""The task-file cache as people see it (issue 28: mutmut survivors in schedule/cache.py): what
`list`, `show`, `next`, `validate` and a tick say once the cache is warm and the task files,
their outside paths, the config or the state change behind it. Written against the commands,
not the cache's rows, so they hold through a rewrite of its read path.

A warm cache is one whose rows are older than the racy window: `age` moves them 10 s back, as
if the last tick had read the files earlier (tests/test_cache.py does the same)."""

from __future__ import annotations

import json
import os
import sqlite3

from conftest import age_cache as age

AT = "2026-11-23T09:00:00+00:00"  # a Monday


def listed(cli, now: str = AT) -> dict[str, dict]:
    out = cli("list", "--json", "--now", now)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    return {row["id"]: row for row in json.loads(out.stdout)}


def warm(home, cli, now: str = AT) -> None:
    """A tick reads and caches every file; then the rows count (not racy)."""
    out = cli("tick", "--now", now)
    assert out.returncode in (0, 1), out.stdout + out.stderr
    age(home)


def runs(home, task_id: str) -> list[str]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    got = [r[0] for r in db.execute(
        "SELECT status FROM runs WHERE task_id = ? AND kind = 'run' ORDER BY id", (task_id,))]
    db.close()
    return got


def test_an_edit_is_seen_by_list_show_next_and_the_tick(home, write_task, cli):
    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true", title="first")
    write_task("y", schedule="0 6 * * *", timezone="UTC", command="true")
    warm(home, cli)
    assert listed(cli)["x"]["title"] == "first"
    age(home)
    write_task("x", schedule="7 * * * *", timezone="UTC", command="echo edited",
               title="second, a longer title")
    rows = listed(cli)
    assert (rows["x"]["title"], rows["x"]["schedule"], rows["x"]["command"]) == (
        "second, a longer title", "7 * * * *", "echo edited")
    assert rows["y"]["schedule"] == "0 6 * * *"  # the unchanged file: as cached
    show = cli("show", "x").stdout
    assert "7 * * * *" in show and "echo edited" in show, show
    nxt = cli("next", "x", "--after", AT).stdout
    assert nxt.startswith("2026-11-23 09:07 UTC"), nxt
    assert cli("tick", "--now", "2026-11-23T09:05:00+00:00").returncode == 0
    assert runs(home, "x") == ["success"]  # 09:00 only: 09:05 is no longer a fire
    assert cli("tick", "--now", "2026-11-23T09:07:00+00:00").returncode == 0
    assert runs(home, "x") == ["success", "success"]


def test_a_same_size_edit_that_keeps_the_mtime_is_seen_by_show(home, write_task, cli):
    path = write_task("x", schedule="*/5 * * * *", timezone="UTC", command="echo aa")
    warm(home, cli)
    before = path.stat()
    path.write_text(path.read_text().replace("echo aa", "echo bb"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size,
                                                             before.st_mtime_ns)
    assert "echo bb" in cli("show", "x").stdout
    assert listed(cli)["x"]["command"] == "echo bb"


def test_a_touched_file_is_read_again_and_says_the_same(home, write_task, cli):
    path = write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    warm(home, cli)
    cold = listed(cli)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    assert listed(cli) == cold
    age(home)
    assert listed(cli) == cold  # and from the rows written by the `list` before


def test_a_removed_or_renamed_file_is_gone_from_list_show_and_the_tick(home, write_task, cli):
    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    path = write_task("y", schedule="*/5 * * * *", timezone="UTC", command="true")
    warm(home, cli)
    path.unlink()
    assert set(listed(cli)) == {"x"}
    gone = cli("show", "y")
    assert gone.returncode == 2 and "no task with id 'y'" in gone.stderr, gone.stderr
    assert cli("tick", "--now", "2026-11-23T09:05:00+00:00").returncode == 0
    assert runs(home, "y") == ["success"]  # 09:00, before its file went
    age(home)
    (home / "tasks" / "x.md").rename(home / "tasks" / "z.md")
    rows = listed(cli)
    assert set(rows) == {"x"} and rows["x"]["file"].endswith("/z.md")
    assert "z.md" in cli("show", "x").stdout


def test_a_file_turning_invalid_and_back_through_a_warm_cache(home, write_task, cli):
    write_task("ok", schedule="*/5 * * * *", timezone="UTC", command="true")
    path = write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    warm(home, cli)
    path.write_text("---\nid: x\nschedule: '* * *'\ncommand: 'true'\n---\n")
    rows = listed(cli)
    assert rows["x"]["valid"] is False and "schedule" in rows["x"]["problem"]
    age(home)
    assert listed(cli)["x"]["valid"] is False  # the problem is kept with the row
    tick = cli("tick", "--now", "2026-11-23T09:05:00+00:00")
    assert tick.returncode == 1 and "x.md" in tick.stderr, tick.stderr
    assert runs(home, "ok") == ["success", "success"] and runs(home, "x") == ["success"]
    age(home)
    assert cli("validate").returncode == 1
    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    assert listed(cli)["x"]["valid"] is True
    assert cli("tick", "--now", "2026-11-23T09:10:00+00:00").returncode == 0
    assert runs(home, "x") == ["success", "success"]


def test_a_config_change_is_seen_by_list_and_next(home, write_task, cli):
    write_task("d", schedule="0 6 * * *", command="true")  # no zone: the config's
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    warm(home, cli)
    assert listed(cli)["d"]["next_fire"] == "2026-11-24T06:00:00+00:00"
    age(home)
    (home / "scheduler.yaml").write_text("timezone: Asia/Tokyo\n")
    rows = listed(cli)
    assert (rows["d"]["timezone"], rows["d"]["next_fire"]) == (
        "Asia/Tokyo", "2026-11-23T21:00:00+00:00")
    age(home)
    assert listed(cli)["d"]["next_fire"] == "2026-11-23T21:00:00+00:00"  # as rebuilt
    nxt = cli("next", "d", "--after", AT).stdout
    assert nxt.startswith("2026-11-24 06:00"), nxt


def test_a_state_row_out_of_range_is_one_problem_and_the_others_run(home, write_task, cli):
    """A task whose fire times cannot be computed (here: a not_before no clock can show) is
    named with the fix; the tick skips it and runs the others (one bad input, one task)."""
    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("y", schedule="*/5 * * * *", timezone="UTC", command="true")
    warm(home, cli)
    db = sqlite3.connect(home / "state" / "mdcron.db")
    db.execute("UPDATE task_state SET not_before = -1e18 WHERE task_id = 'x'")
    db.commit()
    db.close()
    tick = cli("tick", "--now", "2026-11-23T09:05:00+00:00")
    assert tick.returncode == 1, tick.stdout + tick.stderr
    assert (f"{home / 'tasks' / 'x.md'}: error: its next fire cannot be computed (") in tick.stderr
    assert ("); this tick skips it; fix: check its schedule and its state (`why x`)"
            in tick.stderr), tick.stderr
    assert runs(home, "y") == ["success", "success"] and runs(home, "x") == ["success"]
