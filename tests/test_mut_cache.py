"""The task-file cache as people see it (issue 28: mutmut survivors in schedule/cache.py): what
`list`, `show`, `next`, `validate` and a tick say once the cache is warm and the task files,
their outside paths, the config or the state change behind it. Written against the commands,
not the cache's rows, so they hold through a rewrite of its read path.

A warm cache is one whose rows are older than the racy window: `age` moves them 10 s back, as
if the last tick had read the files earlier (tests/test_cache.py does the same)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from datetime import timedelta

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
    assert re.search(re.escape(f"{home / 'tasks' / 'x.md'}: error: its next fire cannot be"
                               " computed (") + r"[A-Z]\w*Error: ", tick.stderr), tick.stderr
    assert ("); this tick skips it; fix: check its schedule and its state (`why x`)"
            in tick.stderr), tick.stderr
    assert runs(home, "y") == ["success", "success"] and runs(home, "x") == ["success"]


def test_a_view_loaded_ahead_of_its_minute_sees_what_changed_before_the_go(home, write_task,
                                                                           cli):
    """The daemon's held tick (cli/warm.py) loads the files ahead of the minute and refreshes
    them at the go: edits, new, removed and broken files and a moved outside path all count,
    exactly as a cold tick at that minute would see them (the oracle: tests/test_cache.py)."""
    from test_cache import T0, checked_tick

    from mdcron.schedule.cache import load
    from mdcron.settings.config import load_config

    (home / "work").mkdir()
    write_task("edit", schedule="0 0 1 1 *", timezone="UTC", command="true")
    write_task("same", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("gone", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("breaks", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("cwd", schedule="0 0 1 1 *", timezone="UTC", command="true", cwd="work")
    checked_tick(home, T0)  # first seen at 09:00; ages the rows
    config, _ = load_config(home)
    view = load(config)  # ahead of 09:05
    write_task("edit", schedule="*/5 * * * *", timezone="UTC", command="true",
               title="now every five minutes")
    write_task("new", schedule="*/5 * * * *", timezone="UTC", command="true")
    (home / "tasks" / "gone.md").unlink()
    (home / "tasks" / "breaks.md").write_text(
        "---\nid: breaks\nschedule: '* *'\ncommand: 'true'\n---\n")
    (home / "work").rmdir()
    view.refresh()
    report = checked_tick(home, T0.replace(minute=5), view=view)
    assert sorted(p.task.id for p in report.planned) == ["edit", "new", "same"]
    assert {(p.path.name, p.severity) for p in report.problems} >= {
        ("breaks.md", "error"), ("cwd.md", "warning")}
    # and the tick saved what it read: the next command finds every file in the cache
    before = digest(home)
    assert set(listed(cli, "2026-11-23T09:05:30+00:00")) == {"edit", "same", "cwd", "new",
                                                             "breaks"}
    assert digest(home) == before


def test_validate_reads_every_file_and_leaves_the_state_folder_untouched(home, write_task, cli):
    """`validate` (and the other commands on the whole task set) read the files themselves:
    not even a read-only look at the cache, which would leave -wal/-shm files behind."""
    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("y", schedule="*/5 * * * *", timezone="UTC", command="true")
    warm(home, cli)
    state = home / "state"
    before = (sorted(os.listdir(state)), state.stat().st_mtime_ns)
    out = cli("validate")
    assert (out.returncode, out.stdout) == (0, "2 valid task(s), 0 error(s), 0 warning(s)\n")
    assert (sorted(os.listdir(state)), state.stat().st_mtime_ns) == before
    (home / "tasks" / "y.md").write_text("---\nid: y\nschedule: '* *'\n---\n")
    out = cli("validate")
    assert out.returncode == 1 and "y.md" in out.stdout + out.stderr
    assert out.stdout.startswith("1 valid task(s), "), out.stdout


def test_many_tasks_through_a_warm_cache(home, write_task, cli):
    """Past 50 tasks the cached rows are fetched in one query (issue 27): every task is still
    listed as its file says, by `list`, `validate` and the tick."""
    for i in range(60):
        write_task(f"t{i:02d}", schedule=f"{i % 60} 6 * * *", timezone="UTC", command="true",
                   title=f"task number {i}")
    warm(home, cli)
    rows = listed(cli)
    assert len(rows) == 60
    assert all(rows[f"t{i:02d}"]["title"] == f"task number {i}" for i in range(60))
    assert rows["t07"]["next_fire"] == "2026-11-24T06:07:00+00:00"
    out = cli("validate")
    assert out.stdout == "60 valid task(s), 0 error(s), 0 warning(s)\n", out.stdout + out.stderr
    done = cli("tick", "--now", "2026-11-24T06:07:00+00:00")
    assert done.returncode == 0 and "t07: success" in done.stdout, done.stdout + done.stderr
    assert runs(home, "t07") == ["success"] and runs(home, "t08") == []


def dry_and_real(cli, now: str) -> tuple[list[str], list[str]]:
    """(what `tick --dry-run` says would run, what the tick then ran) at the same instant."""
    dry = cli("tick", "--dry-run", "--now", now)
    assert dry.returncode in (0, 1), dry.stdout + dry.stderr
    would = sorted(line.split(":")[0] for line in dry.stdout.splitlines() if ": would run" in line)
    real = cli("tick", "--now", now)
    assert real.returncode in (0, 1), real.stdout + real.stderr
    ran = sorted(line.split("] ")[1].split(":")[0] for line in real.stdout.splitlines()
                 if ": success" in line or ": failed" in line)
    return would, ran


def test_dry_run_says_what_the_tick_then_does_with_state(home, write_task, cli, state_url):
    """`tick --dry-run` reads the states the tick would act on: a slot already run is not run
    again, a missed one is, a disabled task is not, and where the clock went back (a state
    stamped later than --now) it clears as the tick clears. On both state back ends: with
    PostgreSQL the states come from there, the cache from this host's file."""
    if state_url:
        (home / "scheduler.yaml").write_text(f"state_url: '{state_url}'\n")
    write_task("five", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("daily", schedule="0 9 * * *", timezone="UTC", command="true")
    assert dry_and_real(cli, "2026-11-23T08:59:00+00:00") == ([], [])  # first seen
    assert dry_and_real(cli, "2026-11-23T09:00:00+00:00") == (["daily", "five"],
                                                               ["daily", "five"])
    age(home)
    assert dry_and_real(cli, "2026-11-23T09:00:30+00:00") == ([], [])  # already run
    write_task("other", schedule="0 0 1 1 *", timezone="UTC", command="true")  # a new file:
    assert dry_and_real(cli, "2026-11-23T09:00:40+00:00") == ([], [])  # the full path says so
    assert dry_and_real(cli, "2026-11-23T09:07:00+00:00") == (["five"], ["five"])  # 09:05 late
    age(home)
    assert cli("disable", "five").returncode == 0
    assert dry_and_real(cli, "2026-11-23T09:10:00+00:00") == ([], [])
    assert cli("enable", "five").returncode == 0
    age(home)
    # enabled again at the real clock's minute, later than this --now: as the tick, the dry
    # run clears that (the clock went back) and this minute's fire runs
    assert dry_and_real(cli, "2026-11-23T09:15:00+00:00") == (["five"], ["five"])
    # the clock went back a day: cleared as the tick clears it; this minute's fire runs
    assert dry_and_real(cli, "2026-11-22T09:00:00+00:00") == (["daily", "five"],
                                                               ["daily", "five"])


def test_show_finds_one_task_before_and_after_the_state_exists(home, write_task, cli):
    """`show` reads the files before any tick (no state database) and through the cache after:
    the same task either way, and a duplicate id named with both its files either way."""
    write_task("x", schedule="0 6 * * *", timezone="UTC", command="echo x")
    write_task("twin", filename="a.md", schedule="0 6 * * *", timezone="UTC", command="true")
    write_task("twin", filename="b.md", schedule="0 6 * * *", timezone="UTC", command="true")
    for first in (True, False):
        shown = cli("show", "x")
        assert shown.returncode == 0 and "echo x" in shown.stdout, shown.stdout + shown.stderr
        assert (home / "state").exists() is not first  # `show` creates no state of its own
        twin = cli("show", "twin")
        assert twin.returncode == 2, twin.stdout + twin.stderr
        assert (f"duplicate id 'twin' in {home / 'tasks' / 'a.md'}:2 and"
                f" {home / 'tasks' / 'b.md'}:2") in twin.stderr, twin.stderr
        assert cli("tick", "--now", AT).returncode == 2  # makes the state: nothing runs
        age(home)


def test_a_chain_runs_after_its_upstream_through_a_warm_cache(home, write_task, cli):
    """A task with `after:` has no fires of its own: the cached ticks look at it every time,
    and it runs once per success of its upstream."""
    write_task("up", schedule="0 9 * * *", timezone="UTC", command="true")
    write_task("down", schedule="after up", command="true")
    warm(home, cli, "2026-11-23T08:59:00+00:00")
    for minute in ("00", "01", "02"):
        out = cli("tick", "--now", f"2026-11-23T09:{minute}:00+00:00")
        assert out.returncode == 0, out.stdout + out.stderr
        age(home)
    assert runs(home, "up") == ["success"] and runs(home, "down") == ["success"]
    assert listed(cli)["down"]["schedule"] == "after up"
    for day in ("24", "25"):
        for minute in ("00", "01"):
            assert cli("tick", "--now", f"2026-11-{day}T09:{minute}:00+00:00").returncode == 0
            age(home)
    assert runs(home, "up") == ["success"] * 3 and runs(home, "down") == ["success"] * 3


def test_outside_paths_of_policies_scripts_and_allowed_folders_are_watched(home, write_task,
                                                                          tmp_path):
    """A warm tick reports what a cold one reports when a cwd policy's folder, a script in it,
    or a folder outside the home (allowed in scheduler.yaml) appears, goes or turns into a
    symlink (the oracle of tests/test_cache.py compares each tick's problems and plan)."""
    from test_cache import T0, checked_tick

    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "scheduler.yaml").write_text(
        f"cwd_policies: {{data: work/data}}\nallow_outside_home: [{outside}]\n")
    (home / "work" / "data").mkdir(parents=True)
    script = home / "work" / "data" / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    write_task("pol", schedule="*/5 * * * *", timezone="UTC", command="true",
               cwd_policy="data")
    write_task("scr", schedule="*/5 * * * *", timezone="UTC", command="./run.sh",
               run_as="script", cwd_policy="data")
    write_task("out", schedule="*/5 * * * *", timezone="UTC", command="true",
               cwd=str(outside))
    write_task("plain", schedule="*/5 * * * *", timezone="UTC", command="true")
    steps = [
        lambda: None,
        lambda: script.unlink(),
        lambda: (home / "work" / "data").rename(home / "work" / "moved"),
        lambda: outside.rmdir(),
        lambda: (home / "work" / "data").symlink_to(home / "work" / "moved"),
        lambda: ((home / "work" / "data").unlink(),
                 (home / "work" / "moved").rename(home / "work" / "data"),
                 outside.mkdir()),
        lambda: (script.write_text("#!/bin/sh\necho ran\n"), script.chmod(0o755)),
    ]
    seen = []
    for i, step in enumerate(steps):
        step()
        report = checked_tick(home, T0 + timedelta(minutes=5 * i))
        seen.append(sorted(p.path.stem for p in report.problems))
    assert seen == [[], ["scr"], ["scr"], ["out", "scr"], ["out", "scr"], ["scr"], []]


def digest(home) -> tuple[str, int]:
    """The database's bytes, and how many bytes of writes wait in its WAL (a read-only
    connection may leave an empty -wal file behind: nothing written)."""
    import hashlib

    wal = home / "state" / "mdcron.db-wal"
    return (hashlib.sha256((home / "state" / "mdcron.db").read_bytes()).hexdigest(),
            wal.stat().st_size if wal.exists() else 0)


def test_commands_write_nothing_when_nothing_changed(home, write_task, cli):
    """Once the cache holds every file (and its next fires), `list`, `show`, `next` and a dry
    run read it and leave the state database byte for byte as it was: no file is parsed
    again, so no row is written again."""
    write_task("a", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("b", schedule="0 6 * * *", timezone="UTC", command="true")
    # its folder is missing: a warning, cached with the row like any problem
    write_task("c", schedule="*/5 * * * *", timezone="UTC", command="true", cwd="work")
    warm(home, cli)
    listed(cli, "2026-11-23T09:01:00+00:00")  # the next fires, as of the tick's claims
    before = digest(home)
    assert before[1] == 0
    listed(cli, "2026-11-23T09:01:00+00:00")
    assert digest(home) == before, "list"
    assert cli("show", "a").returncode == 0
    assert digest(home) == before, "show"
    assert cli("next", "a").returncode == 0
    assert digest(home) == before, "next"
    assert cli("tick", "--dry-run", "--now", "2026-11-23T09:05:00+00:00").returncode == 0
    assert digest(home) == before, "dry run"


def test_a_fire_time_problem_without_an_id_names_no_why():
    """The message for a file whose id is not known yet cannot point at `why <id>`."""
    from pathlib import Path

    from mdcron.schedule.cache import maths_problem

    got = maths_problem(None, "/t/x.md", OverflowError("date value out of range"))
    assert (got.path, got.severity, got.message) == (
        Path("/t/x.md"), "error", "its next fire cannot be computed (OverflowError: date value"
        " out of range); this tick skips it; fix: check its schedule and its state")
    assert maths_problem("x", "/t/x.md", ValueError("v")).message.endswith(
        "(ValueError: v); this tick skips it; fix: check its schedule and its state (`why x`)")


def test_a_dry_run_over_an_empty_state_database_plans_as_a_first_tick(home, write_task, cli):
    """A state database with no tables yet (an empty file, a tick killed while creating it):
    the dry run reads no states, plans as a first tick would, and still writes nothing."""
    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="true")
    (home / "state").mkdir()
    (home / "state" / "mdcron.db").write_bytes(b"")
    dry = cli("tick", "--dry-run", "--now", AT)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "x: would run slot 2026-11-23T09:00:00+00:00" in dry.stdout, dry.stdout
    assert (home / "state" / "mdcron.db").read_bytes() == b""


def test_warm_ticks_run_the_tasks_for_this_host_and_leave_the_others(home, write_task, cli):
    """`hosts:` through warm ticks (the fast path reads the cache's list of tasks meant for
    other hosts): a task for this host runs at each of its fires, one for another never."""
    (home / "scheduler.yaml").write_text("host: alpha\n")
    write_task("mine", schedule="*/5 * * * *", timezone="UTC", command="true", hosts=["alpha"])
    write_task("both", schedule="*/5 * * * *", timezone="UTC", command="true",
               hosts=["beta", "alpha"])
    write_task("theirs", schedule="*/5 * * * *", timezone="UTC", command="true",
               hosts=["beta"])
    write_task("theirs2", schedule="0 0 1 1 *", timezone="UTC", command="true",
               hosts=["beta"])
    warm(home, cli)
    for minute in ("03", "05", "07", "10"):
        out = cli("tick", "--now", f"2026-11-23T09:{minute}:00+00:00")
        assert out.returncode == 0, out.stdout + out.stderr
        age(home)
    assert runs(home, "mine") == ["success"] * 3 and runs(home, "both") == ["success"] * 3
    assert runs(home, "theirs") == []
    (home / "tasks" / "theirs.md").unlink()  # now nothing due is meant for another host
    age(home)
    for minute in ("13", "15"):
        out = cli("tick", "--now", f"2026-11-23T09:{minute}:00+00:00")
        assert out.returncode == 0, out.stdout + out.stderr
        age(home)
    assert runs(home, "mine") == ["success"] * 4 and runs(home, "both") == ["success"] * 4


def test_every_warm_tick_exits_1_while_a_task_file_is_invalid(home, write_task, cli):
    """The problem is said once, when found; but each tick's exit status keeps saying that a
    task file is invalid (cron's mail, a monitor), also on the minutes the cache answers."""
    write_task("x", schedule="0 6 * * *", timezone="UTC", command="true")
    bad = home / "tasks" / "b.md"
    bad.write_text("---\nid: b\nschedule: '* *'\ncommand: 'true'\n---\n")
    first = cli("tick", "--now", AT)
    assert first.returncode == 1 and "b.md:3: error: schedule" in first.stderr, first.stderr
    age(home)
    for minute in ("01", "02"):
        out = cli("tick", "--now", f"2026-11-23T09:{minute}:00+00:00")
        assert (out.returncode, out.stdout, out.stderr) == (1, "", ""), out.stdout + out.stderr
    write_task("b", filename="b.md", schedule="0 7 * * *", timezone="UTC", command="true")
    assert cli("tick", "--now", "2026-11-23T09:03:00+00:00").returncode == 0
    age(home)
    out = cli("tick", "--now", "2026-11-23T09:04:00+00:00")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), out.stdout + out.stderr


def test_a_tasks_folder_that_cannot_be_listed_is_named_with_the_reason(home, cli):
    folder = home / "tasks"
    folder.rmdir()
    folder.write_text("not a folder\n")
    out = cli("tick", "--now", AT)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{folder}: error: cannot list the tasks folder: Not a directory" in out.stderr
    folder.unlink()  # missing: said once, as missing, not as unlistable
    out = cli("tick", "--now", AT)
    assert out.returncode == 2 and "cannot list" not in out.stderr, out.stderr
    assert f"{folder}: error: the tasks folder does not exist" in out.stderr, out.stderr


def test_the_cache_alone_decides_only_an_on_time_single_fire():
    """What the tick may run without asking decide(): the fire at or before now, less than
    59 s late, with the next fire still ahead (tests/test_duefast.py holds the same table; its
    name keeps it out of mutmut's runs, this one's does not)."""
    from mdcron.schedule.cache import PLAIN_LATE
    from mdcron.schedule.cache import plain_due as decided

    assert PLAIN_LATE == 59.0
    assert decided(60.0, 120.0, 60.0)  # at the fire
    assert decided(60.0, 120.0, 118.999)  # 58.999 s late
    assert not decided(60.0, 120.0, 119.0)  # 59 s late: catchup decides
    assert not decided(60.0, 120.0, 59.999)  # not yet
    assert not decided(60.0, 120.0, 120.0)  # the next fire is due too: coalescing decides
    assert not decided(60.0, 100.0 + 5e-7, 100.0)  # within the slack of now: due too
    assert decided(60.0, 100.0 + 2e-6, 100.0)
    assert not decided(60.0, None, 61.0)  # the fire after unknown
    assert not decided(None, 120.0, 61.0)  # no fire at all
    assert not decided(None, None, 61.0)
