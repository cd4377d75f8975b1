"""The task-file cache never changes an outcome: every cached tick is checked against the plan the
uncached logic (each file through load_task_file, observe, plan over every task) makes at the
same instant, through edits, removals, renames, duplicates, clock changes, damaged rows and
config changes. The idle fast path (fastpath.py) is checked end to end through the real CLI in
a subprocess.

A row is trusted only once its file is 2 s older than the reading (the racy rule); tests age the
cache instead of sleeping: read_ns moves 10 s back, as if the tick had read the files earlier."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import REPO, SCHEDULER, render_task, run_cli
from conftest import age_cache as age

from mdcron.core.clock import Clock
from mdcron.core.records import replace
from mdcron.run.tick import plan, run_tick
from mdcron.schedule import cache
from mdcron.schedule.observe import observe
from mdcron.settings.config import load_config
from mdcron.state import idle as fastpath
from mdcron.state.store import Store
from mdcron.tasks.task import find_duplicate_ids
from mdcron.tasks.taskfile import load_task_file, parse_task_text

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday
SATURDAY = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


class FrozenClock(Clock):
    """`now` exactly at the anchor, so the uncached plan and the tick see the same instant."""

    def now(self) -> float:
        return self.anchor.timestamp()


def db_of(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)


def states_of(home: Path) -> dict:
    if not (home / "state" / "mdcron.db").exists():
        return {}
    with Store(home / "state" / "mdcron.db") as s:
        return s.task_states()


def uncached_tasks(config) -> tuple[list, list]:
    """The oracle: every *.md in file-name order (hidden skipped), each read from its file."""
    names = sorted(n for n in os.listdir(config.tasks_dir)
                   if n.endswith(".md") and not n.startswith("."))
    tasks, problems = [], []
    for name in names:
        task, found = load_task_file(config.tasks_dir / name, config)
        problems += found
        tasks += [task] if task is not None else []
    return tasks, problems


def went_back(state, now: float):
    """The oracle's clock-back rule (issue 22): a slot or not_before stamped after now + the
    slack is cleared: the task counts as first seen at now's minute."""
    limit = now + fastpath.FUTURE_SLACK
    if (state.last_slot or 0) > limit or state.not_before > limit:
        return replace(state, last_slot=None, not_before=now - now % 60)
    return state


def checked_tick(home: Path, at: datetime, **kw):
    """run_tick through the cache, asserting it plans exactly what the uncached logic plans."""
    config, _ = load_config(home)
    now = at.timestamp()
    tasks, problems = uncached_tasks(config)
    duplicates = find_duplicate_ids(tasks)
    states = {k: went_back(s, now) for k, s in states_of(home).items()}
    observed = {**states, **{t.id: observe(states.get(t.id), t, now) for t in tasks}}
    expected = [] if duplicates else plan(tasks, observed, config, now)
    report = run_tick(config, FrozenClock(at), say=lambda _line: None,
                      environ={"PATH": "/usr/bin:/bin"}, **kw)
    assert report.problems == problems
    assert report.duplicates == duplicates
    assert report.tasks == len(tasks)
    got = [(p.task, p.action, p.slot, p.reason, p.missed) for p in report.planned]
    assert got == [(p.task, p.action, p.slot, p.reason, p.missed) for p in expected]
    if not kw.get("dry_run"):
        age(home)
    return report


def runs(home: Path, task_id: str) -> list[tuple]:
    db = db_of(home)
    rows = db.execute("SELECT scheduled_for, status, output_tail FROM runs WHERE task_id = ?"
                      " ORDER BY id", (task_id,)).fetchall()
    db.close()
    return [(datetime.fromtimestamp(s, UTC), status, tail) for s, status, tail in rows]


def cached_paths(home: Path) -> list[str]:
    db = db_of(home)
    paths = [Path(p).name for (p,) in db.execute("SELECT path FROM task_cache ORDER BY path")]
    db.close()
    return paths


# --------------------------------------------------------------- the cache in process


def test_task_json_round_trip(home):
    text = render_task("full", "The body.\n", schedule="0 6 * * 1-5", timezone="Europe/Riga",
                       timeout="90s", retry=True, catchup="always", env={"A": "1", "B": "x y"},
                       secrets=["GH_TOKEN"], tags=["a", "b"], heal_paths=["scripts/*.sh"],
                       notify_on="always", command="echo hi")
    config, _ = load_config(home)
    task, problems = parse_task_text(text, home / "tasks" / "full.md", config)
    assert task is not None and problems == []
    assert cache.task_from_json(cache.task_to_json(task)) == task


def test_racy_rule():
    read = 100_000_000_000
    assert fastpath.racy((1, read - 1, 7, read - 3_000_000_000), read)  # mtime too recent
    assert fastpath.racy((1, read - 3_000_000_000, 7, read), read)  # ctime too recent
    assert not fastpath.racy((1, read - 2_000_000_001, 7, read - 2_000_000_001), read)


def test_warm_ticks_plan_what_uncached_ticks_plan(home, write_task):
    write_task("every5", schedule="*/5 * * * *", command="true", timezone="UTC")
    write_task("daily", schedule="0 6 * * *", command="true", timezone="UTC")
    write_task("q", schedule="@every 15m", command="true")
    write_task("once", schedule="@at 2026-11-23T09:30", command="true", timezone="UTC")
    write_task("riga", schedule="30 3 * * *", command="true", timezone="Europe/Riga")
    write_task("off", schedule="* * * * *", command="true", enabled=False)
    write_task("local", schedule="0 10 * * *", command="true")  # the system's zone
    (home / "tasks" / "broken.md").write_text("---\nid: broken\nschedule: [x\n---\n")
    for minutes in (0, 5, 7, 30, 31, 60, 24 * 60 + 5):
        checked_tick(home, T0 + timedelta(minutes=minutes))
    assert [r[1] for r in runs(home, "once")] == ["success"]
    assert len(runs(home, "every5")) == 5  # 09:00, 09:05, 09:30 (coalesced), 10:00, +1 day
    assert len(cached_paths(home)) == 8  # invalid files are cached too (their problems)


def test_edits_removals_and_renames(home, write_task):
    write_task("a", schedule="*/5 * * * *", command="true")
    path_b = write_task("b", schedule="0 * * * *", command="true")
    write_task("c", schedule="*/10 * * * *", command="true")
    checked_tick(home, T0)
    write_task("a", schedule="*/2 * * * *", command="true")  # edited: due at 09:02 now
    assert [p.task.id for p in checked_tick(home, T0 + timedelta(minutes=2)).planned] == ["a"]
    path_b.rename(home / "tasks" / "renamed.md")
    (home / "tasks" / "c.md").unlink()
    report = checked_tick(home, T0 + timedelta(hours=1))
    assert sorted(p.task.id for p in report.planned) == ["a", "b"]
    assert cached_paths(home) == ["a.md", "renamed.md"]
    db = db_of(home)
    assert db.execute("SELECT count(*) FROM runs WHERE task_id = 'b'").fetchone() == (2,)
    assert db.execute("SELECT path FROM task_state WHERE task_id = 'b'").fetchone()[0].endswith(
        "renamed.md")
    db.close()
    write_task("b", filename="renamed.md", schedule="0 * * * *", command="true", enabled=False)
    assert checked_tick(home, T0 + timedelta(hours=2)).planned[0].task.id == "a"


def test_racy_rows_are_read_again_until_the_file_is_old_enough(home, write_task):
    write_task("r", schedule="0 0 1 1 *", command="true")
    config, _ = load_config(home)
    run_tick(config, FrozenClock(T0), say=lambda _line: None)
    assert [e.parsed for e in cache.load(config).entries] == [True]  # written just now: racy
    age(home)
    assert [e.parsed for e in cache.load(config).entries] == [False]


def test_task_state_moving_behind_the_cache_is_seen(home, write_task):
    write_task("d", schedule="0 10 * * *", command="true", timezone="UTC", catchup="always")
    checked_tick(home, T0.replace(hour=11))  # first seen at 11:00: next due tomorrow 10:00
    db = db_of(home)  # as if re-enabled earlier (a tick with an earlier --now): 09:00
    db.execute("UPDATE task_state SET not_before = ?", (T0.timestamp(),))
    db.close()
    report = checked_tick(home, T0.replace(hour=11, minute=1))
    assert [(p.task.id, p.action) for p in report.planned] == [("d", "run")]


def test_same_size_rewrite_with_the_old_mtime_is_seen(home, write_task):
    path = write_task("t", schedule="* * * * *", command="echo aa")
    checked_tick(home, T0)
    before = path.stat()
    path.write_text(path.read_text().replace("echo aa", "echo bb"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    checked_tick(home, T0 + timedelta(minutes=1))
    assert [r[2].strip() for r in runs(home, "t")] == ["aa", "bb"]


def test_clock_back_before_the_cache_and_jumps_forward(home, write_task):
    write_task("every5", schedule="*/5 * * * *", command="true", timezone="UTC")
    write_task("daily", schedule="0 6 * * *", command="true", timezone="UTC")
    checked_tick(home, T0)

    def planned(at: datetime) -> set[tuple[str, str, int]]:
        return {(p.task.id, p.action, p.missed) for p in checked_tick(home, at).planned}

    # a day earlier than the cache: the clock went back; this minute's fire runs at once
    assert planned(T0 - timedelta(days=1)) == {("every5", "run", 0)}
    # forward again (07:57): the fires since coalesce; daily 06:00 is 2 h late: skipped
    assert planned(T0 - timedelta(hours=1, minutes=3)) == {("every5", "run", 274),
                                                           ("daily", "skip", 0)}
    assert planned(T0 + timedelta(hours=3, minutes=2)) == {("every5", "run", 48)}
    report = checked_tick(home, T0 + timedelta(days=1, hours=2))  # daily 06:00: 3 h late
    assert {(p.task.id, p.action) for p in report.planned} == {("every5", "run"),
                                                               ("daily", "skip")}
    checked_tick(home, T0 + timedelta(days=2, hours=-3, seconds=20))  # 06:00:20: on time
    assert runs(home, "daily")[-1][:2] == (T0 + timedelta(days=2, hours=-3), "success")


@pytest.mark.parametrize(("zone", "start"), [
    ("Europe/Riga", datetime(2026, 10, 24, 23, 0, tzinfo=UTC)),  # 04:00 EEST -> 03:00 EET
    ("America/New_York", datetime(2026, 3, 8, 5, 0, tzinfo=UTC)),  # 02:00 EST -> 03:00 EDT
])
def test_warm_ticks_across_daylight_saving_changes(home, write_task, zone, start):
    write_task("fixed", schedule="30 2 * * *", timezone=zone, command="true")
    write_task("fixed3", schedule="30 3 * * *", timezone=zone, command="true")
    write_task("hourly", schedule="15 * * * *", timezone=zone, command="true")
    write_task("often", schedule="*/20 * * * *", timezone=zone, command="true")
    for minutes in range(0, 300, 5):
        checked_tick(home, start + timedelta(minutes=minutes))


def test_random_edits_and_instants_against_the_uncached_plan(home, write_task):
    rnd = random.Random(7)
    schedules = ["*/5 * * * *", "0 * * * *", "30 9 * * 1-5", "@every 20m", "@daily",
                 "15,45 8-18 * * *", "@at 2026-11-23T11:00", "0 0 1 1 *"]
    at = T0
    for step in range(40):
        if step % 4 == 0:
            name = f"t{rnd.randrange(6)}"
            if rnd.random() < 0.15 and (home / "tasks" / f"{name}.md").exists():
                (home / "tasks" / f"{name}.md").unlink()
            else:
                write_task(name, schedule=rnd.choice(schedules), command="true",
                           timezone=rnd.choice(["UTC", "Europe/Riga"]),
                           enabled=rnd.random() > 0.2, catchup=rnd.choice(["10m", "always"]))
        at += timedelta(minutes=rnd.choice([1, 3, 7, 20, 61, 300, -30]))
        checked_tick(home, at)


def test_damaged_or_deleted_cache_rows_are_read_again(home, write_task):
    write_task("a", schedule="*/5 * * * *", command="echo a")
    write_task("b", schedule="*/5 * * * *", command="echo b", env={"X": "1"})
    (home / "tasks" / "bad.md").write_text("---\nid: bad\nschedule: '61 * * * *'\n---\n")
    checked_tick(home, T0)
    db = db_of(home)
    db.execute("UPDATE task_cache_data SET task = '{not json' WHERE path LIKE '%/a.md'")
    db.execute("UPDATE task_cache_data SET task = replace(task, '\"X\":\"1\"', '\"X\":\"2\"')")
    db.execute("UPDATE task_cache SET problems = '[[1]]' WHERE path LIKE '%/bad.md'")
    db.close()
    report = checked_tick(home, T0 + timedelta(minutes=5))
    assert sorted(t.id for t, _, _ in report.results) == ["a", "b"]
    assert next(p.task for p in report.planned if p.task.id == "b").env == {"X": "1"}
    db = db_of(home)
    assert cache.task_from_json(db.execute(
        "SELECT task FROM task_cache_data WHERE path LIKE '%/a.md'").fetchone()[0]).id == "a"
    db.execute("DELETE FROM task_cache")
    db.close()
    checked_tick(home, T0 + timedelta(minutes=10))
    assert cached_paths(home) == ["a.md", "b.md", "bad.md"]
    db = db_of(home)
    db.execute("DROP TABLE task_cache_data")  # a cache that cannot even be written
    db.close()
    checked_tick(home, T0 + timedelta(minutes=15))
    checked_tick(home, T0 + timedelta(minutes=20))


def test_config_change_drops_the_cache(home, write_task):
    write_task("d", schedule="0 6 * * *", command="true")  # no zone: the config's
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    checked_tick(home, T0)
    (home / "scheduler.yaml").write_text("timezone: America/New_York\n")
    assert checked_tick(home, T0.replace(hour=10)).planned == []  # 05:00 in New York
    report = checked_tick(home, T0.replace(hour=11))  # 06:00 there; the cache said tomorrow
    assert [(p.task.id, p.action) for p in report.planned] == [("d", "run")]
    (home / "scheduler.yaml").write_text("timezone: UTC\ncatchup: 0\n")
    report = checked_tick(home, (T0 + timedelta(days=1)).replace(hour=6, minute=2))
    assert [(p.task.id, p.action) for p in report.planned] == [("d", "skip")]


def test_duplicates_stop_the_tick_when_both_files_are_cached(home, write_task, cli):
    write_task("good", command="true")
    checked_tick(home, T0)
    write_task("twin", filename="a.md", command="true")
    write_task("twin", filename="b.md", command="true")
    assert cli("list", "--json").returncode == 0  # list caches both files
    age(home)
    assert cached_paths(home) == ["a.md", "b.md", "good.md"]
    out = cli("tick", "--now", T0.isoformat())
    assert out.returncode == 2 and "a.md" in out.stderr and "b.md" in out.stderr
    report = checked_tick(home, T0)
    assert report.exit_code == 2 and len(report.duplicates["twin"]) == 2


def test_problems_are_cached_and_reported_when_they_change(home, write_task, cli):
    write_task("ok", schedule="0 0 1 1 *", command="true")
    bad = home / "tasks" / "bad.md"
    bad.write_text("---\nid: bad\nschedule: '* * *'\ncommand: x\n---\n")
    assert checked_tick(home, T0).problems_changed
    report = checked_tick(home, T0 + timedelta(minutes=1))
    assert not report.problems_changed and report.exit_code == 1
    rows = json.loads(cli("list", "--json").stdout)
    assert [r["valid"] for r in rows] == [True, False] and "schedule" in rows[1]["problem"]
    assert cli("validate").returncode == 1
    bad.write_text("---\nid: bad\nschedule: '* * * * *'\ncommand: 'true'\n---\n")
    report = checked_tick(home, T0 + timedelta(minutes=2))
    assert report.problems_changed and report.exit_code == 0


def test_outside_paths_are_watched(home, write_task):
    (home / "work").mkdir()
    (home / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (home / "run.sh").chmod(0o755)
    write_task("w", schedule="0 0 1 1 *", command="true", cwd="work")
    write_task("s", schedule="0 0 1 1 *", command="./run.sh", run_as="script")
    assert checked_tick(home, T0).problems == []
    (home / "work").rmdir()
    (home / "run.sh").unlink()
    report = checked_tick(home, T0 + timedelta(minutes=1))
    assert {(p.path.name, p.severity) for p in report.problems} == {("w.md", "warning"),
                                                                   ("s.md", "error")}
    (home / "work").mkdir()
    (home / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (home / "run.sh").chmod(0o755)  # else validation warns that it cannot start (issue 25)
    assert checked_tick(home, T0 + timedelta(minutes=2)).problems == []


def test_dry_run_reads_the_cache_and_writes_nothing(home, write_task):
    write_task("d", schedule="*/5 * * * *", command="touch should-not-exist")
    report = checked_tick(home, T0, dry_run=True)
    assert [p.task.id for p in report.planned] == ["d"] and not (home / "state").exists()
    checked_tick(home, T0)
    write_task("new", schedule="* * * * *", command="true")
    db = db_of(home)
    before = list(db.iterdump())
    report = checked_tick(home, T0 + timedelta(minutes=5), dry_run=True)
    assert sorted(p.task.id for p in report.planned) == ["d", "new"]
    assert list(db.iterdump()) == before
    db.close()


def test_list_through_the_cache_shows_what_it_showed(home, write_task, cli):
    write_task("a", schedule="0 10 * * *", command="true", timezone="UTC", tags=["x"])
    write_task("b", schedule="*/5 * * * *", command="true", timezone="Europe/Riga")
    write_task("c", schedule="@at 2026-11-23T09:30", command="true", timezone="UTC")
    write_task("d", schedule="0 10 * * *", command="true", enabled=False)
    (home / "tasks" / "bad.md").write_text("---\nid: bad\n---\n")
    for at in (T0, T0 + timedelta(minutes=30)):
        checked_tick(home, at)
    for at in (T0 + timedelta(minutes=31), T0 - timedelta(days=1), T0 + timedelta(days=3)):
        warm = json.loads(cli("list", "--json", "--now", at.isoformat()).stdout)
        db = db_of(home)
        db.execute("DELETE FROM task_cache")
        db.close()
        cold = json.loads(cli("list", "--json", "--now", at.isoformat()).stdout)
        assert warm == cold
        checked_tick(home, at + timedelta(days=5))  # write the due times again


# --------------------------------------------------------------- the idle fast path (CLI)

PROBE = """
import sys
from mdcron.cli.main import main
code = main(sys.argv[1:])
watch = ("mdcron.run.tick", "mdcron.schedule.cache", "yaml", "frontmatter", "croniter", "dateutil",
         "portalocker", "concurrent.futures", "rich", "anthropic", "apprise", "argparse")
print("PROBE", code, ",".join(m for m in watch if m in sys.modules))
"""


def probe(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, set, str]:
    """The CLI in a fresh interpreter: (exit status, heavy modules it loaded, its output)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-c", PROBE, "--home", str(home), *args], cwd=REPO,
                         capture_output=True, text=True, env=full_env, timeout=60)
    *lines, last = out.stdout.splitlines() or [""]
    assert last.startswith("PROBE "), out.stdout + out.stderr
    _, code, mods = last.split(" ", 2)
    return int(code), set(filter(None, mods.split(","))), "\n".join(lines) + out.stderr


def warm_home(home: Path, write_task, at: datetime = SATURDAY) -> None:
    for i in range(20):
        write_task(f"job{i}", schedule=f"{i} 6 * * 1-5", command="true")
    assert run_cli(home, "tick", "--now", at.isoformat()).returncode == 0
    age(home)


def test_idle_tick_imports_nothing_heavy(home, write_task):
    warm_home(home, write_task)
    code, mods, output = probe(home, "tick", "--now", SATURDAY.isoformat())
    assert (code, mods, output) == (0, set(), "")
    db = db_of(home)
    assert float(db.execute("SELECT value FROM meta WHERE key = 'last_tick'").fetchone()[0]) \
        >= SATURDAY.timestamp()
    db.execute("DELETE FROM meta WHERE key = 'retention_at'")  # the full tick, cache warm
    db.close()
    code, mods, output = probe(home, "tick", "--now", SATURDAY.isoformat())
    assert (code, output) == (0, "")
    assert mods == {"mdcron.run.tick", "mdcron.schedule.cache"}  # cron's line: no argparse


CODE_READS = """
import os, sys
package = os.path.join(os.getcwd(), "mdcron")
reads = []
sys.addaudithook(lambda e, a: reads.append(a[0]) if e == "os.scandir" and str(a[0]) == package
                 else None)
from mdcron.cli.main import main
code = main(sys.argv[1:])
print("READS", code, len(reads))
"""


def test_a_tick_with_work_reads_its_code_once(home, write_task):
    """The code fingerprint (a stat of every module) is read by the idle check and stands for
    the rest of the tick (issue 27: config_data and the cache asked again, ~0.5 ms each)."""
    warm_home(home, write_task)
    write_task("every", schedule="* * * * *", command="true")
    now = SATURDAY + timedelta(minutes=1)
    assert run_cli(home, "tick", "--now", now.isoformat()).returncode == 0
    age(home)
    out = subprocess.run([sys.executable, "-c", CODE_READS, "--home", str(home), "tick", "--now",
                          (now + timedelta(minutes=1)).isoformat()], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split()[-3:] == ["READS", "0", "1"], out.stdout + out.stderr


def test_idle_tick_without_the_upper_layers_hands_their_duties_over(home, write_task):
    """state/idle.py imports nothing above the state (issue 27 item 6): the pause check and the
    heartbeat come in from cli/main.py. A caller that passes neither (the daemon's look ahead)
    gets the full tick whenever a pause file exists or a heartbeat is set, never an idle tick
    that skipped them."""
    import time

    warm_home(home, write_task)
    at = SATURDAY.timestamp()

    def last_tick() -> str:
        db = db_of(home)
        try:
            return db.execute("SELECT value FROM meta WHERE key = 'last_tick'").fetchone()[0]
        finally:
            db.close()

    assert fastpath.idle_tick(str(home), at, False, time.monotonic()) == 0
    pauses = home / "state" / "paused_until.json"
    pauses.write_text(json.dumps({"job1": {"until": at + 3600, "path": "x"}}))
    assert fastpath.idle_tick(str(home), at, False, time.monotonic()) is None
    assert fastpath.idle_tick(str(home), at, False, time.monotonic(),
                              blocked=lambda h, now: False) == 0  # the exact check: not over
    pauses.unlink()
    db = db_of(home)
    db.execute("UPDATE meta SET value = 'http://127.0.0.1:9/' WHERE key = 'cache_heartbeat'")
    db.close()
    before = last_tick()
    assert fastpath.idle_tick(str(home), at + 60, False, time.monotonic()) is None
    assert last_tick() == before  # handed over before anything was written
    pinged = []
    assert fastpath.idle_tick(str(home), at + 60, False, time.monotonic(),
                              ping=lambda url, failed, env: pinged.append(url)) == 0
    assert pinged == ["http://127.0.0.1:9/"] and last_tick() != before


def test_exit_zero_ticks_take_the_idle_path(home, write_task):
    """`install --cron --exit-zero` writes `tick --exit-zero`: idle ticks stay idle (issue 27),
    and an invalid task file exits 0 there as in the full tick."""
    warm_home(home, write_task)
    now = SATURDAY.isoformat()
    assert probe(home, "tick", "--exit-zero", "--now", now)[:2] == (0, set())
    (home / "tasks" / "broken.md").write_text("---\nid: broken\n")
    code, mods, output = probe(home, "tick", "--exit-zero", "--now", now)
    assert code == 0 and "mdcron.run.tick" in mods and "broken.md" in output
    age(home)
    assert probe(home, "tick", "--exit-zero", "--now", now)[:2] == (0, set())
    assert probe(home, "tick", "--now", now)[:2] == (1, set())  # without it: 1, as always


def _running_row(db):
    db.execute("INSERT INTO runs(task_id, scheduled_for, trigger, status, started_at,"
               " owner_pid) VALUES ('job1', 0, 'schedule', 'running', 0, 999999999)")


def _pending_outbox(db):
    db.execute("INSERT INTO outbox(created_at, destination, kind, title, body)"
               " VALUES (0, 'x', 'failure', 't', 'b')")


def test_idle_tick_declines_whenever_the_full_tick_has_work(home, write_task):
    for i in range(3):
        write_task(f"job{i}", schedule=f"{i} 6 * * 1-5", command="true")
    assert run_cli(home, "tick", "--now", SATURDAY.isoformat()).returncode == 0
    assert "mdcron.run.tick" in probe(home, "tick", "--now", SATURDAY.isoformat())[1]  # racy rows
    warm_home(home, write_task)
    cases = [
        ("running row", _running_row),
        ("pending alert", _pending_outbox),
        ("retention due", lambda db: db.execute(
            "UPDATE meta SET value = '0' WHERE key = 'retention_at'")),
        ("problems not reported yet", lambda db: db.execute(
            "UPDATE meta SET value = 'x' WHERE key = 'problems_digest'")),
        ("task_state moved on", lambda db: db.execute(
            "UPDATE task_state SET last_slot = 1 WHERE task_id = 'job3'")),
        ("re-enabled earlier", lambda db: db.execute(
            "UPDATE task_state SET not_before = not_before - 86400 WHERE task_id = 'job3'")),
        ("disabled by hand in the state", lambda db: db.execute(
            "UPDATE task_state SET enabled = 0 WHERE task_id = 'job3'")),
        ("a duplicate row", lambda db: db.execute(
            "UPDATE task_cache SET task_id = 'job1' WHERE task_id = 'job2'")),
    ]
    path = home / "state" / "mdcron.db"
    db = db_of(home)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    saved = path.read_bytes()
    for name, damage in cases:
        db = db_of(home)
        damage(db)
        db.close()
        code, mods, output = probe(home, "tick", "--now", SATURDAY.isoformat())
        assert "mdcron.run.tick" in mods, name
        assert code == 0, (name, output)  # the full tick: nothing due, nothing wrong
        for suffix in ("-wal", "-shm"):  # back to the warm state for the next case
            Path(str(path) + suffix).unlink(missing_ok=True)
        path.write_bytes(saved)
        assert probe(home, "tick", "--now", SATURDAY.isoformat())[1] == set(), name


def test_idle_tick_sees_edits_config_zone_and_outside_paths(home, write_task):
    warm_home(home, write_task)
    now = SATURDAY.isoformat()
    # a same-size rewrite that keeps the old mtime: a yearly task becomes due every minute
    path = write_task("flip", schedule="0 0 1 1 *", command="echo flipped")
    assert run_cli(home, "tick", "--now", now).returncode == 0
    age(home)
    before = path.stat()
    path.write_text(path.read_text().replace("0 0 1 1 *", "* * * * *"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    later = (SATURDAY + timedelta(minutes=1)).isoformat()
    code, mods, output = probe(home, "tick", "--now", later)
    assert code == 0 and "flip: success" in output and "mdcron.run.tick" in mods
    age(home)
    # the system zone: a task without a zone follows $TZ
    write_task("local", schedule="0 6 * * *", command="echo local")
    sunday = SATURDAY + timedelta(days=1)
    assert probe(home, "tick", "--now", sunday.isoformat(), env={"TZ": "America/New_York"})[0] == 0
    age(home)
    monday = (sunday + timedelta(days=1)).replace(hour=6)  # 06:00 UTC is 01:00 in New York
    code, mods, output = probe(home, "tick", "--now", monday.isoformat(), env={"TZ": "UTC"})
    assert "local: success" in output and "flip: success" in output
    age(home)
    # scheduler.yaml changed: a full tick; then the idle tick pings the heartbeat itself
    (home / "scheduler.yaml").write_text("heartbeat_url: http://127.0.0.1:9/ping\n")
    at = monday.replace(hour=7).isoformat()
    env = {"TZ": "UTC"}
    assert "mdcron.run.tick" in probe(home, "tick", "--now", at, env=env)[1]
    age(home)
    code, mods, output = probe(home, "tick", "--now", at, env=env)
    assert mods == set() and "heartbeat (http://…)" in output  # port 9: refused, reported
    (home / "scheduler.yaml").write_text("max_parallel: 2\n")
    assert "mdcron.run.tick" in probe(home, "tick", "--now", at, env=env)[1]
    age(home)
    assert probe(home, "tick", "--now", at, env=env)[1] == set()
    # a script that disappears makes its task invalid, cache or not
    (home / "go.sh").write_text("#!/bin/sh\n")
    write_task("script", schedule="0 0 1 1 *", command="./go.sh", run_as="script")
    assert probe(home, "tick", "--now", at, env=env)[0] == 0
    age(home)
    assert probe(home, "tick", "--now", at, env=env)[1] == set()
    (home / "go.sh").unlink()
    code, mods, output = probe(home, "tick", "--now", at, env=env)
    assert code == 1 and "go.sh" in output


def test_idle_dry_run_prints_what_the_full_dry_run_prints(home, write_task):
    warm_home(home, write_task)
    now = SATURDAY.isoformat()
    db = db_of(home)
    before = list(db.iterdump())
    code, mods, fast = probe(home, "tick", "--now", now, "--dry-run")
    assert (code, mods) == (0, set())
    assert fast == f"{SATURDAY.isoformat(timespec='seconds')}: nothing due among 20 task(s)"
    assert list(db.iterdump()) == before
    db.execute("DELETE FROM task_cache")
    code, mods, full = probe(home, "tick", "--dry-run", "--now", now)
    assert (code, full) == (0, fast) and "mdcron.run.tick" in mods
    assert list(db.iterdump()) != before  # (only the rows deleted above)
    db.close()


def test_odd_command_lines_take_the_usual_path(home, write_task):
    warm_home(home, write_task)
    now = SATURDAY.isoformat()
    assert probe(home, "tick", f"--now={now}")[1] == set()
    for args in (("tick", "--dry", "--now", now), ("tick", "--now", now, "--now", now)):
        code, mods, _ = probe(home, *args)
        assert "argparse" in mods, args
    # a naive instant is read in the config's zone by the full tick (no argparse: plain words)
    assert "mdcron.run.tick" in probe(home, "tick", "--now", "2026-11-28T12:00")[1]
    out = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--bogus"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr


def test_idle_tick_pings_the_heartbeat(home, write_task, http_sink):
    (home / "scheduler.yaml").write_text(
        "heartbeat_url: \"http://127.0.0.1:${HB_PORT}/ping\"\n")
    env = {"HB_PORT": str(http_sink.port)}
    for i in range(5):
        write_task(f"job{i}", schedule=f"{i} 6 * * 1-5", command="true")
    assert run_cli(home, "tick", "--now", SATURDAY.isoformat(), env=env).returncode == 0
    age(home)
    code, mods, output = probe(home, "tick", "--now", SATURDAY.isoformat(), env=env)
    assert (code, mods, output) == (0, set(), "")  # idle, nothing heavy, nothing said
    assert [(r.method, r.path) for r in http_sink.requests] == [("GET", "/ping"), ("GET", "/ping")]
    # an invalid task file: the idle tick exits 1 and pings /fail, as the full tick would
    (home / "tasks" / "broken.md").write_text("---\nid: broken\n")
    run_cli(home, "tick", "--now", SATURDAY.isoformat(), env=env)
    age(home)
    code, mods, _ = probe(home, "tick", "--now", SATURDAY.isoformat(), env=env)
    assert (code, mods) == (1, set())
    assert http_sink.requests[-1].path == "/ping/fail"
