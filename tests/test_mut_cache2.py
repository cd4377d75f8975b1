"""The task-file cache's pieces in process (issue 28: mutmut survivors in schedule/cache_*.py):
the JSON its rows keep (a task, a file's problems, a listing's record), the fire times it keeps
(next_due and the fire after), the summary the idle tick reads, and the view of one pass, each
through its public result. Fast: mutmut runs these first for every mutant they reach."""

from __future__ import annotations

import gc
import json
import sqlite3
import zlib
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import age_cache as age
from conftest import render_task

from mdcron.core.problems import Problem
from mdcron.schedule import cache
from mdcron.schedule.cache_due import fire_after, next_due, zone_bound
from mdcron.schedule.cache_json import Damaged, record_of
from mdcron.settings.config import load_config
from mdcron.tasks.taskfile import parse_task_text

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC).timestamp()  # a Monday


def task_of(home: Path, task_id: str = "x", **fields):
    config, _ = load_config(home)
    fields.setdefault("command", "true")
    task, problems = parse_task_text(render_task(task_id, **fields),
                                     home / "tasks" / f"{task_id}.md", config)
    assert task is not None, problems
    return task, config


def row(text: str) -> tuple[str, int]:
    return text, zlib.crc32(text.encode())


# --------------------------------------------------------------- the JSON of rows


def test_a_task_row_is_compact_json_with_paths_and_lists(home):
    task, _ = task_of(home, tags=["a", "b"], heal_paths=["s/*.sh"], env={"K": "v w"})
    text = cache.task_to_json(task)
    data = json.loads(text)
    assert data["path"] == str(home / "tasks" / "x.md") and data["tags"] == ["a", "b"]
    assert data["heal_paths"] == ["s/*.sh"] and data["env"] == {"K": "v w"}
    assert list(data) == sorted(data)  # the same task: the same bytes, row after row
    assert ", " not in text.replace('"v w"', "") and ": " not in text
    back = cache.task_from_json(text)
    assert back == task and isinstance(back.path, Path) and back.tags == ("a", "b")
    assert isinstance(back.heal_paths, tuple) and isinstance(back.after, tuple)


@pytest.mark.parametrize("text", ["{not json", "[]", "{}", '{"path": "/t/x.md"}', "null",
                                  '{"path": "/t/x.md", "tags": 5}'])
def test_a_damaged_task_row_is_refused(home, text):
    if text.endswith("5}"):  # every field there, one tuple field not a list
        task, _ = task_of(home)
        data = json.loads(cache.task_to_json(task))
        data["tags"] = 5
        text = json.dumps(data)
    with pytest.raises(Damaged):
        cache.task_from_json(text)


def test_problems_round_trip_through_their_row():
    found = [Problem(Path("/t/a.md"), "schedule: bad", "schedule", 3, "error"),
             Problem(Path("/t/a.md"), "cwd: missing", "cwd", None, "warning")]
    text = cache.problems_to_json(found)
    assert text is not None and ", " not in text
    assert cache.problems_from_json(text) == found
    assert cache.problems_to_json([]) is None and cache.problems_from_json(None) == []


@pytest.mark.parametrize("text", ["{x", "[[1]]", "5", '[["/t/a.md", 5, null, null, "error"]]',
                                  '[["/t/a.md", "m", null, null, "fatal"]]',
                                  '[["/t/a.md", "m", null, null, "warning"], [1, 2]]'])
def test_damaged_problems_are_refused(text):
    with pytest.raises(Damaged):
        cache.problems_from_json(text)


def test_a_warning_alone_is_a_valid_problems_row():
    text = '[["/t/a.md","m",null,null,"warning"]]'
    assert cache.problems_from_json(text) == [Problem(Path("/t/a.md"), "m", None, None,
                                                      "warning")]


def test_the_problems_digest_ignores_order_and_knows_none():
    a = Problem(Path("/t/a.md"), "one")
    b = Problem(Path("/t/b.md"), "two", severity="warning")
    assert cache.problems_digest([]) == cache.EMPTY_DIGEST
    assert __import__("hashlib").sha256(b"").hexdigest() == cache.EMPTY_DIGEST
    assert cache.problems_digest([a, b]) == cache.problems_digest([b, a])
    assert cache.problems_digest([a]) != cache.problems_digest([b])


def test_a_listing_record_is_the_row_when_it_agrees(home):
    task, _ = task_of(home, title="A title", tags=["t"])
    text = cache.task_to_json(task)
    path = str(task.path)
    got = record_of(row(text), "x", True, path)
    assert got is not None and (got.id, got.title, got.path, got.tags) == (
        "x", "A title", path, ["t"])
    assert record_of(None, "x", True, path) is None
    assert record_of((text, zlib.crc32(text.encode()) + 1), "x", True, path) is None
    assert record_of(row(text), "y", True, path) is None
    assert record_of(row(text), "x", False, path) is None
    assert record_of(row(text), "x", True, path + "2") is None
    assert record_of(row("{not json"), "x", True, path) is None
    assert record_of(row("[1]"), "x", True, path) is None
    assert record_of(row("{}"), "x", True, path) is None


# --------------------------------------------------------------- fire times


def test_next_due_is_the_first_fire_after_both_floors(home):
    task, config = task_of(home, schedule="*/5 * * * *", timezone="UTC")
    assert next_due(task, config, None, T0) == T0  # not_before at a fire: that fire
    assert next_due(task, config, None, T0 + 1) == T0 + 300
    assert next_due(task, config, T0, T0 - 3600) == T0 + 300  # last_slot the later floor
    assert next_due(task, config, T0 - 600, T0) == T0  # not_before the later floor
    assert next_due(task, config, T0 - 1, T0 - 3600) == T0
    assert fire_after(task, config, T0) == T0 + 300
    assert fire_after(task, config, None) is None


def test_a_chain_is_always_a_candidate_and_has_no_fire_after(home):
    task, config = task_of(home, schedule="after up")
    assert next_due(task, config, None, T0) == 0.0
    assert next_due(task, config, T0, T0) == 0.0
    assert fire_after(task, config, T0) is None


def test_a_schedule_past_its_last_fire_has_none(home):
    task, config = task_of(home, schedule="@at 2026-11-23T09:30", timezone="UTC")
    assert next_due(task, config, None, T0) == T0 + 1800
    assert fire_after(task, config, T0 + 1800) is None
    assert next_due(task, config, T0 + 1800, T0) is None


def test_only_a_task_without_any_zone_follows_the_system_zone(home):
    task, config = task_of(home)
    assert zone_bound(task, config)
    task, config = task_of(home, timezone="UTC")
    assert not zone_bound(task, config)
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    task, config = task_of(home)
    assert not zone_bound(task, config)


# --------------------------------------------------------------- the view of one pass


@contextmanager
def no_writes(home: Path):
    """Asserts that what runs inside commits no write to the state database (by the bytes'
    measure a checkpoint would move; by data_version any commit counts, even of equal values)."""
    watch = sqlite3.connect(home / "state" / "mdcron.db")
    try:
        version = watch.execute("PRAGMA data_version").fetchone()[0]
        yield
        assert watch.execute("PRAGMA data_version").fetchone()[0] == version, "written"
    finally:
        watch.close()


def warm_home(home: Path, write_task):
    """x follows the system zone (no zone anywhere), y is in UTC, both every 5 minutes;
    ticked at 09:00 (both ran) and aged: every row of the cache holds."""
    from test_cache import checked_tick

    write_task("x", schedule="*/5 * * * *", command="true")
    write_task("y", schedule="*/5 * * * *", timezone="UTC", command="echo y")
    checked_tick(home, datetime.fromtimestamp(T0, UTC))
    config, _ = load_config(home)
    return config


def a_pass(view, at: float) -> list[str]:
    """What a tick's pass does with the cache, writing what it changed: the candidates' ids."""
    from mdcron.state.store import Store

    with Store(view.config.db_path) as store:
        states = view.observe(store, at)
        due = view.candidates(states, at)
        view.save(store)
    return sorted(t.id for t in due)


def test_a_refreshed_view_of_unchanged_files_reads_and_writes_nothing(home, write_task):
    """The held tick (cli/warm.py) refreshes its view at the go: files whose stat holds keep
    their entry, the due times computed for the system zone still hold, so the pass between
    two fires writes nothing to the state database."""
    from conftest import age_cache

    config = warm_home(home, write_task)
    view = cache.load(config)
    assert a_pass(view, T0 + 60) == []  # first pass after the tick: settles its due rows
    with no_writes(home):
        view = cache.load(config)
        view.refresh()
        assert a_pass(view, T0 + 120) == []
    write_task("y", schedule="*/5 * * * *", timezone="UTC", command="echo edited")
    view = cache.load(config)
    view.refresh()
    assert a_pass(view, T0 + 180) == []  # the edited file read and its row written
    age_cache(home)
    with no_writes(home):
        assert a_pass(cache.load(config), T0 + 240) == []
    assert cached_task_json(home, "y.md")["command"] == "echo edited"
    view = cache.load(config)
    view.refresh()
    assert a_pass(view, T0 + 300) == ["x", "y"]


def damage_task_row(home: Path, name: str) -> None:
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("UPDATE task_cache_data SET task = '{not json' WHERE path LIKE ?", (f"%/{name}",))
    db.close()


def cached_task_json(home: Path, name: str) -> dict:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    (text,) = db.execute("SELECT task FROM task_cache_data WHERE path LIKE ?",
                         (f"%/{name}",)).fetchone()
    db.close()
    return json.loads(text)


def test_a_damaged_task_row_is_read_from_its_file_and_repaired_once(home, write_task):
    """A task row that cannot be decoded is read from the file again and written back, so
    the next pass decodes it and writes nothing."""
    from conftest import age_cache

    config = warm_home(home, write_task)
    damage_task_row(home, "y.md")
    view = cache.load(config)
    assert [t.command for t in view.task_set().tasks] == ["true", "echo y"]
    assert a_pass(view, T0 + 60) == []
    assert cached_task_json(home, "y.md")["command"] == "echo y"
    age_cache(home)
    view = cache.load(config)
    assert a_pass(view, T0 + 90) == []
    with no_writes(home):
        view = cache.load(config)
        assert [t.command for t in view.task_set().tasks] == ["true", "echo y"]
        assert a_pass(view, T0 + 120) == []


def test_a_file_edited_under_a_damaged_row_waits_for_the_next_pass(home, write_task):
    """A pass that must read a file again (its row is damaged) and finds it says something
    else than its row (another id, another enabled flag) leaves that task out of this pass:
    the next pass reads it afresh. Never a task under its old entry's id or flag."""
    config = warm_home(home, write_task)
    view = cache.load(config)
    write_task("z", filename="y.md", schedule="*/5 * * * *", timezone="UTC", command="true")
    damage_task_row(home, "y.md")
    assert [t.id for t in view.task_set().tasks] == ["x"]
    assert [t.id for t in cache.load(config).task_set().tasks] == ["x", "z"]
    view = cache.load(config)
    write_task("x", schedule="*/5 * * * *", command="true", enabled=False)
    damage_task_row(home, "x.md")
    assert [t.id for t in view.task_set().tasks] == ["z"]
    assert [(t.id, t.enabled) for t in cache.load(config).task_set().tasks] == [
        ("x", False), ("z", True)]


def cached_home(home: Path, write_task, count: int):
    """`count` tasks that never fire soon, read once into the cache and aged."""
    from conftest import age_cache

    from mdcron.state.store import Store

    for i in range(count):
        write_task(f"t{i:02d}", schedule="0 0 1 1 *", timezone="UTC", command=f"echo {i}")
    config, _ = load_config(home)
    view = cache.load(config)
    with Store(config.db_path) as store:
        view.save(store)
    age_cache(home)
    return config


def task_row_reads(view, use) -> tuple[list, int]:
    """What `use(view)` returns, and how many statements it sent for task rows."""
    sent: list[str] = []
    view.db.set_trace_callback(sent.append)
    got = use(view)
    view.db.set_trace_callback(None)
    return got, sum("task_cache_data" in s for s in sent)


@pytest.mark.parametrize("count, reads", [(50, 50), (51, 1)])
def test_past_fifty_cached_tasks_are_decoded_from_one_query(home, write_task, count, reads):
    """issue 27: a task set or a listing of more than 50 cached tasks reads their rows in one
    query, not one per task; either way each task is what its file says."""
    config = cached_home(home, write_task, count)
    want = [(f"t{i:02d}", f"echo {i}") for i in range(count)]
    view = cache.load(config)
    tasks, sent = task_row_reads(view, lambda v: v.task_set().tasks)
    assert ([(t.id, t.command) for t in tasks], sent) == (want, reads)
    assert view.task_set().tasks == tasks  # decoded once: no statement, the same tasks
    view.close()
    view = cache.load(config)
    records, sent = task_row_reads(view, lambda v: v.records())
    assert ([(t.id, t.command) for t in records], sent) == (want, reads)
    view.close()
    assert gc.isenabled()  # paused while the entries and records were built, on again after
    cached_home(home, write_task, count + 1)  # one more: past 50 rows besides the edited
    write_task("t00", schedule="0 0 1 1 *", timezone="UTC", command="echo edited")
    view = cache.load(config)  # an edited file is listed as read now, never as its old row
    assert [(t.id, t.command) for t in view.records()][:2] == [("t00", "echo edited"),
                                                               ("t01", "echo 1")]
    view.close()


def rewrite_task_row(home: Path, name: str, **changes) -> None:
    """The row's task JSON changed behind the cache, with a checksum that matches (unless
    `stale` is given: then the old checksum stays)."""
    stale = changes.pop("stale", False)
    data = cached_task_json(home, name)
    data.update(changes)
    text = json.dumps(data)
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    if stale:
        db.execute("UPDATE task_cache_data SET task = ? WHERE path LIKE ?", (text, f"%/{name}"))
    else:
        db.execute("UPDATE task_cache_data SET task = ?, crc = ? WHERE path LIKE ?",
                   (text, zlib.crc32(text.encode()), f"%/{name}"))
    db.close()


@pytest.mark.parametrize("changes", [{"id": "other"}, {"enabled": False},
                                     {"path": "/elsewhere/y.md"}, {"command": "echo row"},
                                     {"command": "echo row", "stale": True}])
def test_a_task_row_that_disagrees_with_its_entry_is_not_used(home, write_task, changes):
    """A task row whose id, enabled flag or file is not its entry's is read from the file
    again (a row only checked by its checksum could run another task's command)."""
    config = warm_home(home, write_task)
    rewrite_task_row(home, "y.md", **changes)
    got = {t.id: (t.enabled, str(t.path), t.command) for t in cache.load(config).task_set().tasks}
    want = (True, str(home / "tasks" / "y.md"), "echo y")
    if changes == {"command": "echo row"}:  # the checksum matches, the row agrees: it counts
        want = (True, want[1], "echo row")
    assert got["y"] == want and set(got) == {"x", "y"}
    records = {t.id: t for t in cache.load(config).records()}
    assert (records["y"].command, str(records["y"].path)) == (want[2], want[1])


def test_a_renamed_or_disabled_file_moves_its_state_row(home, write_task):
    """A pass tells the state what each file now says: a task renamed to another file, a
    task disabled in its file, a new task; the other rows are left as they are."""
    from mdcron.state.store import Store

    config = warm_home(home, write_task)
    (home / "tasks" / "x.md").rename(home / "tasks" / "w.md")
    write_task("y", schedule="*/5 * * * *", timezone="UTC", command="echo y", enabled=False)
    write_task("v", schedule="*/5 * * * *", timezone="UTC", command="true")
    view = cache.load(config)
    with Store(config.db_path) as store:
        states = view.observe(store, T0 + 60)
        rows = store.state_rows()
    got = {k: (Path(s.path).name, bool(s.enabled)) for k, s in rows.items()}
    assert got == {"x": ("w.md", True), "y": ("y.md", False), "v": ("v.md", True)}
    assert rows["x"].last_slot == T0  # its run at 09:00 still counts
    assert {k: (Path(s.path).name, bool(s.enabled)) for k, s in states.items()} == got


# --------------------------------------------------------------- the summary the fast path reads


def fast_dry_run(home: Path, at: float):
    """The cheap dry run (state/idle.py) from the cache's summary: its exit status, or None
    when the summary does not let it answer (the full dry run does)."""
    import time

    from mdcron.state import idle as fastpath

    try:
        return fastpath.idle_tick(str(home), at, True, time.monotonic())
    finally:
        fastpath.drop_scan()  # its scan is for a tick at the same instant, not for the next


def test_the_summary_counts_tasks_and_errors_for_the_cheap_dry_run(home, write_task, capsys):
    from conftest import age_cache

    config = warm_home(home, write_task)
    capsys.readouterr()
    assert fast_dry_run(home, T0 + 60) == 0
    said = capsys.readouterr().out
    assert said == "2026-11-23T09:01:00+00:00: nothing due among 2 task(s)\n"
    assert fast_dry_run(home, T0 + 300) is None  # both due: the full dry run plans them
    (home / "tasks" / "b.md").write_text("---\nid: b\nschedule: '* *'\ncommand: 'true'\n---\n")
    a_pass(cache.load(config), T0 + 30)
    age_cache(home)
    assert fast_dry_run(home, T0 + 60) is None  # an error: the full dry run prints it
    (home / "tasks" / "b.md").write_text("---\nid: b\nschedule: '0 0 1 1 *'\ntimezone: UTC\n"
                                         "command: 'true'\ncwd: nowhere\n---\n")  # a warning
    a_pass(cache.load(config), T0 + 30)
    age_cache(home)
    capsys.readouterr()
    assert fast_dry_run(home, T0 + 60) == 0
    assert capsys.readouterr().out.endswith(": nothing due among 3 task(s)\n")


# --------------------------------------------------------------- loading


def test_one_task_is_found_with_every_files_problems_and_its_twins(home, write_task):
    """find_task (show, next, enable, ...): the task with this id, every file's problems, and
    a duplicate id even when the second file was just edited to claim it; the same before
    any state exists and through a warm cache."""
    from conftest import age_cache

    write_task("x", schedule="*/5 * * * *", timezone="UTC", command="echo x")
    write_task("y", schedule="*/5 * * * *", timezone="UTC", command="echo y")
    (home / "tasks" / "b.md").write_text("---\nid: b\nschedule: '* *'\ncommand: 'true'\n---\n")
    config, _ = load_config(home)
    for _ in range(2):
        found = cache.find_task(config, "x")
        assert [(t.id, t.command) for t in found.tasks] == [("x", "echo x")]
        assert [p.path.name for p in found.problems] == ["b.md"] and found.duplicates == {}
        assert [t.id for t in cache.find_task(config, "y").tasks] == ["y"]
        assert cache.find_task(config, "b").tasks == []
        a_pass(cache.load(config), T0)  # the state and the cache exist from here
        age_cache(home)
    # one task's view: the files whose rows hold and name other ids, with no problems, are
    # left out (issue 27); the asked id's file and the files with problems are in
    assert [Path(e.path).name for e in cache.load(config, only="x").entries] == ["b.md", "x.md"]
    write_task("x", filename="y.md", schedule="0 6 * * *", timezone="UTC", command="echo twin")
    with no_writes(home):  # reading an edited file for `show` leaves its row to the tick
        found = cache.find_task(config, "x")
    assert sorted(t.command for t in found.tasks) == ["echo twin", "echo x"]
    assert found.duplicates == {"x": [home / "tasks" / "x.md", home / "tasks" / "y.md"]}
    assert cache.find_task(config, "y").tasks == []


def test_a_cache_rebuilt_by_one_task_lookup_is_kept(home, write_task):
    """After a config change the first command that looks up one task reads every file and
    saves the rebuilt cache: the next lookup writes nothing."""
    from conftest import age_cache

    config = warm_home(home, write_task)
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    config, _ = load_config(home)
    assert [t.command for t in cache.find_task(config, "y").tasks] == ["echo y"]
    db = sqlite3.connect(home / "state" / "mdcron.db")
    (stored,) = db.execute("SELECT value FROM meta WHERE key = 'cache_key'").fetchone()
    db.close()
    from mdcron.schedule.cache_summary import cache_key_of

    assert stored == cache_key_of(config)  # the rows saved hold for the new config
    age_cache(home)
    with no_writes(home):
        assert [t.command for t in cache.find_task(config, "y").tasks] == ["echo y"]


def test_a_tasks_folder_missing_or_not_a_folder(home):
    config, _ = load_config(home)
    (home / "tasks").rmdir()
    view = cache.load(config)
    assert (view.entries, view.problems, view.key) == ([], [], None)
    (home / "tasks").write_text("a file\n")
    view = cache.load(config)
    assert view.entries == [] and view.key is None
    assert [(p.path, p.message) for p in view.problems] == [
        (home / "tasks", "cannot list the tasks folder: Not a directory")]


def test_a_removed_file_leaves_the_cache_and_its_count(home, write_task, capsys):
    """A file removed since the last pass: its row goes, so the summary counts the others
    and the cheap dry run answers again."""
    from conftest import age_cache

    config = warm_home(home, write_task)
    (home / "tasks" / "y.md").unlink()
    assert fast_dry_run(home, T0 + 60) is None  # the cache still holds y.md
    view = cache.load(config)
    assert [e.path for e in view.entries] == [str(home / "tasks" / "x.md")]
    assert a_pass(view, T0 + 30) == []
    age_cache(home)
    capsys.readouterr()
    assert fast_dry_run(home, T0 + 60) == 0
    assert capsys.readouterr().out.endswith(": nothing due among 1 task(s)\n")


def test_a_dry_run_names_a_task_whose_fires_cannot_be_computed(home, write_task):
    """As the tick does (tests/test_mut_cache.py): the dry run names the task whose state row
    is out of range, with the fix, and plans the others."""
    from test_cache import FrozenClock

    from mdcron.run.tick import run_tick

    config = warm_home(home, write_task)
    db = sqlite3.connect(home / "state" / "mdcron.db")
    db.execute("UPDATE task_state SET not_before = -1e18 WHERE task_id = 'x'")
    db.commit()
    db.close()
    report = run_tick(config, FrozenClock(datetime.fromtimestamp(T0 + 300, UTC)),
                      dry_run=True, say=lambda _line: None)
    assert [(p.task.id, p.action) for p in report.planned] == [("y", "run")]
    assert [(p.path.name, p.message.split(" (")[0]) for p in report.problems] == [
        ("x.md", "its next fire cannot be computed")]
    print(report.problems[0].message)


def test_the_cache_key_is_tied_to_the_config_files_text(home):
    """Rows hold for one scheduler.yaml text: a Config that is not what the file says (or no
    readable file) gets no key, so nothing is read from or written to the cache."""
    from mdcron.core.records import replace
    from mdcron.schedule.cache_summary import cache_key_of, open_cache
    from mdcron.state import cache_key as keys

    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    config, _ = load_config(home)
    key = cache_key_of(config)
    assert key is not None and key == keys.cache_key(keys.config_text(str(home)))
    assert cache_key_of(replace(config, timezone="Asia/Tokyo")) is None
    try:  # cli.main notes the text it read just before load_config: trusted as is
        keys.note_config(config, "timezone: UTC\n# noted\n")
        assert cache_key_of(config) == keys.cache_key("timezone: UTC\n# noted\n")
        other, _ = load_config(home)
        assert cache_key_of(other) == key  # another Config: checked against the file
    finally:
        keys.note_config(None, None)
    (home / "scheduler.yaml").write_text("timezone: [\n")  # the file no longer loads
    assert cache_key_of(config) is None
    (home / "scheduler.yaml").unlink()
    (home / "scheduler.yaml").mkdir()  # cannot be read as text
    assert cache_key_of(config) is None
    assert open_cache(config) is None  # no state database yet
    config.db_path.parent.mkdir()
    config.db_path.mkdir()
    assert open_cache(config) is None


def fast_tick(home: Path, at: float):
    """The cheap tick (state/idle.py) from the cache's summary: its exit status, or None when
    the full tick must run."""
    import time

    from mdcron.alerts.heartbeat import ping
    from mdcron.schedule.pause import idle_blocked
    from mdcron.state import idle as fastpath

    try:  # what cli/main.py lends it: the pause check and the heartbeat
        return fastpath.idle_tick(str(home), at, False, time.monotonic(), blocked=idle_blocked,
                                  ping=ping)
    finally:
        fastpath.drop_scan()


def test_a_task_moved_to_another_host_is_left_to_it_by_the_cheap_tick(home, write_task, cli):
    """The summary lists the enabled tasks whose `hosts:` leave this host out; an edit that
    moves a task away is in it after the pass that read the edit, so the cheap tick passes
    over that task's fires here (and runs nothing), while a task still meant for this host
    sends the tick down the full path."""
    from conftest import age_cache

    (home / "scheduler.yaml").write_text("host: alpha\n")
    write_task("mine", schedule="*/5 * * * *", timezone="UTC", command="true", hosts=["alpha"])
    write_task("theirs", schedule="*/5 * * * *", timezone="UTC", command="true",
               hosts=["beta"])
    write_task("stopped", schedule="*/5 * * * *", timezone="UTC", command="true", hosts=["beta"],
               enabled=False)
    assert cli("tick", "--now", "2026-11-23T09:00:00+00:00").returncode == 0
    age_cache(home)
    assert fast_tick(home, T0 + 60) == 0  # nothing due
    assert fast_tick(home, T0 + 300) is None  # `mine` is due here
    config, _ = load_config(home)
    write_task("mine", schedule="*/5 * * * *", timezone="UTC", command="true",
               hosts=["beta", "gamma"])
    assert a_pass(cache.load(config), T0 + 120) == ["theirs"]  # its 09:00, not run here
    age_cache(home)
    assert fast_tick(home, T0 + 300) == 0  # both due tasks are for other hosts


def test_a_task_file_turned_into_a_folder_is_named_every_pass(home, write_task):
    """A `*.md` that is not a regular file (a folder here) is never cached: each pass names
    it, and its old row goes, so the count of tasks is right again once it is gone."""
    from conftest import age_cache

    config = warm_home(home, write_task)
    (home / "tasks" / "y.md").unlink()
    (home / "tasks" / "y.md").mkdir()
    for at in (T0 + 30, T0 + 45):
        view = cache.load(config)
        assert [p.path.name for p in view.problems] == ["y.md"]
        assert [e.id for e in view.valid] == ["x"]
        assert a_pass(view, at) == []
        age_cache(home)
    assert fast_dry_run(home, T0 + 60) is None  # not a regular file: the full path says so
    (home / "tasks" / "y.md").rmdir()
    assert a_pass(cache.load(config), T0 + 50) == []
    age_cache(home)
    assert fast_dry_run(home, T0 + 60) == 0


def test_a_config_change_with_a_file_removed_rebuilds_the_whole_cache(home, write_task,
                                                                      capsys):
    """A changed scheduler.yaml makes every row stale: the pass reads every file and replaces
    the cache, rows of files removed meanwhile included, so the summary counts the files
    there are and the cheap dry run answers again."""
    from conftest import age_cache

    config = warm_home(home, write_task)
    (home / "tasks" / "y.md").unlink()
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    config, _ = load_config(home)
    view = cache.load(config)
    assert [e.id for e in view.valid] == ["x"]
    a_pass(view, T0 + 30)
    age_cache(home)
    capsys.readouterr()
    assert fast_dry_run(home, T0 + 60) == 0
    assert capsys.readouterr().out.endswith(": nothing due among 1 task(s)\n")


# --------------------------------------------------------------- next fires for `list`


def listing(config, fill: bool = True) -> dict:
    """What `list` takes from the cache for its next-fire column: id -> (floor, next_due)
    where the cached next_due still holds (after fill_dues, saved as `list` saves it)."""
    from mdcron.state.store import Store

    view = cache.load(config)
    filled = None
    with Store(config.db_path) as store:
        states = store.state_rows()
        if fill:
            filled = view.fill_dues(states)
            view.save(store)
    view.close()
    hints = view.due_hints(states)
    if fill:  # fill_dues' own pass hands back the same hints (`list` takes those)
        assert filled == hints and list(filled) == list(hints)
    return hints


def test_list_next_fires_come_from_the_cache_and_are_filled_once(home, write_task):
    """After a tick every enabled task's next fire is known from its row: the first fire
    after max(last slot, not_before - 1 µs). After a config change the rows are read again
    without one: `list` computes them once (a disabled task, one whose maths fails, and a
    task with no state row yet do not stop the others) and saves them for the next `list`."""
    from conftest import age_cache

    from mdcron.core.cron import next_fire

    write_task("a", schedule="*/5 * * * *", timezone="UTC", command="true", enabled=False)
    write_task("b", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("c", schedule="*/5 * * * *", timezone="UTC", command="true")
    write_task("d", schedule="0 6 * * *", timezone="UTC", command="true")
    write_task("z", schedule="0 7 * * *", command="true")  # no zone: the system's (UTC)
    from test_cache import checked_tick

    checked_tick(home, datetime.fromtimestamp(T0 - 60, UTC))  # first seen 08:59
    checked_tick(home, datetime.fromtimestamp(T0, UTC))  # b and c ran at 09:00
    config, _ = load_config(home)
    nb = T0 - 60  # not_before: the minute each was first seen
    day = T0 + 21 * 3600  # 06:00 the next day
    want = {"b": (T0, T0 + 300), "c": (T0, T0 + 300), "d": (nb - 1e-6, day),
            "z": (nb - 1e-6, day + 3600)}
    assert listing(config, fill=False) == want
    from mdcron.state.store import Store

    with Store(config.db_path) as store:  # the hints from TaskState rows (queries.load_all)
        assert cache.load(config).due_hints(store.task_states()) == want
    got = {k: next_fire(task, config, T0 + 30, want.get(k))
           for k, task in ((t.id, t) for t in cache.load(config).task_set().tasks)}
    assert {k: v.timestamp() if v else None for k, v in got.items()} == {
        "a": None, "b": T0 + 300, "c": T0 + 300, "d": day, "z": day + 3600}
    (home / "scheduler.yaml").write_text("host: alpha\n")  # every row read again
    config, _ = load_config(home)
    write_task("e", schedule="*/5 * * * *", timezone="UTC", command="true")  # no state row
    db = sqlite3.connect(home / "state" / "mdcron.db")
    db.execute("UPDATE task_state SET not_before = -1e18 WHERE task_id = 'b'")
    db.commit()
    db.close()
    assert listing(config, fill=False) == {}
    kept = {k: v for k, v in want.items() if k != "b"}  # b's maths fails: no next fire
    assert listing(config) == kept
    age_cache(home)
    assert listing(config, fill=False) == kept
    assert listing(config) == kept
    with no_writes(home):  # found in the rows: nothing computed, nothing written
        assert listing(config) == kept


def test_outside_paths_that_stay_put_cost_no_reading_and_no_writing(home, write_task, tmp_path):
    """A task whose checks look outside its file (its cwd, a cwd policy's folder, its script,
    a folder allowed outside the home) and an invalid file whose error is not about a path
    are kept from their rows while nothing moved: a pass then writes nothing. A script that
    goes is seen at the next pass all the same."""
    from conftest import age_cache

    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "scheduler.yaml").write_text(
        f"cwd_policies: {{data: work/data}}\nallow_outside_home: [{outside}]\n")
    (home / "work" / "data").mkdir(parents=True)
    for script in (home / "run.sh", home / "work" / "data" / "job.sh"):
        script.write_text("#!/bin/sh\necho ran\n")
        script.chmod(0o755)
    write_task("cwd", schedule="0 0 1 1 *", timezone="UTC", command="true", cwd="work")
    write_task("pol", schedule="0 0 1 1 *", timezone="UTC", command="true", cwd_policy="data")
    write_task("scr", schedule="0 0 1 1 *", timezone="UTC", command="./run.sh",
               run_as="script")
    write_task("job", schedule="0 0 1 1 *", timezone="UTC", command="./job.sh",
               run_as="script", cwd_policy="data")
    write_task("out", schedule="0 0 1 1 *", timezone="UTC", command="true", cwd=str(outside))
    (home / "tasks" / "bad.md").write_text("---\nid: bad\nschedule: '* *'\ncommand: 'true'\n"
                                           "---\n")
    config, _ = load_config(home)
    a_pass(cache.load(config), T0)
    age_cache(home)
    assert {Path(p).name for p in cached_rows(home)} == {
        "cwd.md", "pol.md", "scr.md", "job.md", "out.md", "bad.md"}
    a_pass(cache.load(config), T0 + 30)
    with no_writes(home):
        view = cache.load(config)
        assert [p.path.name for p in view.problems] == ["bad.md"]
        assert a_pass(view, T0 + 60) == []
    (home / "work" / "data" / "job.sh").unlink()
    view = cache.load(config)
    assert sorted(p.path.name for p in view.problems) == ["bad.md", "job.md"]
    (home / "tasks" / "bad2.md").write_text("---\nid: bad2\nschedule: '* *'\n---\n")
    a_pass(cache.load(config), T0 + 90)  # an invalid file read now is cached as well
    assert "bad2.md" in {Path(p).name for p in cached_rows(home)}


def cached_rows(home: Path) -> list[str]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    got = [p for (p,) in db.execute("SELECT path FROM task_cache")]
    db.close()
    return got


def test_a_relative_allowed_folder_that_moves_is_seen(home, write_task, tmp_path):
    """`allow_outside_home` entries count from the home: a relative one that is repointed
    makes a task's folder escape the home, and a warm pass says so as a cold one does."""
    from test_cache import checked_tick

    (tmp_path / "real" / "w").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (home / "scheduler.yaml").write_text("allow_outside_home: [../link]\n")
    write_task("w", schedule="0 0 1 1 *", timezone="UTC", command="true",
               cwd=str(tmp_path / "real" / "w"))
    start = datetime.fromtimestamp(T0, UTC)
    assert checked_tick(home, start).problems == []
    assert checked_tick(home, start.replace(minute=1)).problems == []
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to(tmp_path / "other")
    report = checked_tick(home, start.replace(minute=2))
    assert [(p.path.name, p.severity) for p in report.problems] == [("w.md", "error")]


# --------------------------------------------------------------- the tick's due times


def tick_at(home: Path, at: float):
    from test_cache import checked_tick

    return checked_tick(home, datetime.fromtimestamp(at, UTC))


def cache_decides(config, at: float) -> dict[str, float]:
    """The fires a tick at `at` would run from the cache alone (View.plain: on time, the next
    fire known and later), among its candidates."""
    from mdcron.state.store import Store

    view = cache.load(config)
    with Store(config.db_path) as store:
        states = view.observe(store, at)
        due = view.candidates(states, at)
        plain = view.plain(due, states, at)
    view.close()
    return plain


def test_after_each_run_the_next_fire_is_known_from_the_cache(home, write_task, capsys):
    """Once a tick has run a task, its next fire and the one after are in the cache: the
    next tick decides that fire from the cache alone, and between fires the cheap dry run
    answers. Also after a catch-up run of a later slot than the cached next fire."""
    from conftest import age_cache

    write_task("later", schedule="0 0 1 1 *", timezone="UTC", command="true")  # not due
    config = warm_home(home, write_task)
    assert cache_decides(config, T0 + 300) == {"x": T0 + 300, "y": T0 + 300}
    assert cache_decides(config, T0 + 330) == {"x": T0 + 300, "y": T0 + 300}
    assert cache_decides(config, T0 + 359.5) == {}  # 59.5 s late: decide() judges it
    assert cache_decides(config, T0 + 600) == {}  # two fires passed: decide() coalesces
    report = tick_at(home, T0 + 720)  # 09:12: 09:05 and 09:10 missed, 09:10 runs
    assert sorted((p.task.id, p.slot) for p in report.planned) == [("x", T0 + 600),
                                                                    ("y", T0 + 600)]
    age_cache(home)
    capsys.readouterr()
    assert fast_dry_run(home, T0 + 780) == 0  # 09:13: nothing due until 09:15
    assert cache_decides(config, T0 + 900) == {"x": T0 + 900, "y": T0 + 900}
    tick_at(home, T0 + 900)
    assert cache_decides(config, T0 + 1200) == {"x": T0 + 1200, "y": T0 + 1200}


def test_a_change_of_the_system_zone_moves_only_the_zoneless_tasks(home, write_task, cli):
    """A task with no zone anywhere follows the system's ($TZ): its cached next fire holds
    only for the zone it was computed in; a task with its own zone keeps its row."""
    write_task("local", schedule="0 6 * * *", command="true")
    write_task("utc", schedule="0 6 * * *", timezone="UTC", command="true")
    out = cli("tick", "--now", "2026-11-23T09:00:00+00:00", env={"TZ": "UTC"})
    assert out.returncode == 0, out.stdout + out.stderr
    age(home)
    tokyo = {"TZ": "Asia/Tokyo"}
    for _ in range(2):
        rows = {r["id"]: r["next_fire"] for r in json.loads(cli(
            "list", "--json", "--now", "2026-11-23T09:01:00+00:00", env=tokyo).stdout)}
        assert rows == {"local": "2026-11-23T21:00:00+00:00",
                        "utc": "2026-11-24T06:00:00+00:00"}
        age(home)
    rows = {r["id"]: r["next_fire"] for r in json.loads(cli(
        "list", "--json", "--now", "2026-11-23T09:01:00+00:00", env={"TZ": "UTC"}).stdout)}
    assert rows == {"local": "2026-11-24T06:00:00+00:00", "utc": "2026-11-24T06:00:00+00:00"}


def test_the_cheap_tick_pings_the_heartbeat_the_summary_names(home, write_task, cli, http_sink,
                                                              capsys):
    """The summary carries the heartbeat URL as written: the cheap tick pings it as the full
    tick would, and with no heartbeat configured it pings nothing and says nothing."""
    from conftest import age_cache

    write_task("x", schedule="0 6 * * *", timezone="UTC", command="true")
    (home / "scheduler.yaml").write_text(f"heartbeat_url: http://127.0.0.1:{http_sink.port}/hb\n")
    assert cli("tick", "--now", "2026-11-23T09:00:00+00:00").returncode == 0
    age_cache(home)
    before = len(http_sink.requests)
    capsys.readouterr()
    assert fast_tick(home, T0 + 60) == 0
    assert [r.path for r in http_sink.requests[before:]] == ["/hb"]
    assert capsys.readouterr().out == ""
    (home / "scheduler.yaml").write_text("")
    assert cli("tick", "--now", "2026-11-23T09:02:00+00:00").returncode == 0
    age_cache(home)
    before = len(http_sink.requests)
    assert fast_tick(home, T0 + 180) == 0
    assert http_sink.requests[before:] == [] and capsys.readouterr().out == ""


def test_a_claim_moves_next_due_past_its_slot_whatever_was_planned_before_it(home, write_task):
    """View.claimed(): a planned task the view has no entry for, or no state row for, is passed
    over and never stops the claims after it; two claims in a row (the fire after the first
    not computed yet) still move next_due to the task's real next fire."""
    from mdcron.state.store import Store

    config = warm_home(home, write_task)  # x and y every 5 minutes, ran at 09:00
    ghost, _ = task_of(home, "ghost", schedule="*/5 * * * *")
    x, _ = task_of(home, "x", schedule="*/5 * * * *")  # as their files say
    y, _ = task_of(home, "y", schedule="*/5 * * * *", timezone="UTC", command="echo y")
    view = cache.load(config)
    with Store(config.db_path) as store:
        states = view.observe(store, T0 + 300)
    entry = {e.id: e for e in view.valid}
    assert entry["x"].next_due == entry["y"].next_due == T0 + 300
    odd = {**states, "ghost": states["y"]}  # a state row without a file ...
    del odd["y"]  # ... and a file without a state row
    view.claimed([(ghost, T0 + 300), (y, T0 + 300), (x, T0 + 300)], odd)
    assert (entry["x"].next_due, entry["x"].due_last) == (T0 + 600, T0 + 300)
    assert (entry["y"].next_due, entry["y"].due_last) == (T0 + 300, T0)  # left as it was
    view.claimed([(x, T0 + 600)], states)  # claimed again before complete() ran
    assert (entry["x"].next_due, entry["x"].due_last) == (T0 + 900, T0 + 600)


def test_a_summary_over_a_damaged_problems_row_says_damaged(home, write_task):
    """write_summary(): a row whose problems JSON cannot be read makes the summary say
    `damaged` (the cheap tick then hands over to the full tick, which reads the file again),
    never a digest of the problems it could read."""
    from mdcron.schedule.cache_summary import cache_key_of, write_summary

    config = warm_home(home, write_task)
    db = sqlite3.connect(home / "state" / "mdcron.db")
    try:
        with db:
            write_summary(db, cache_key_of(config), config)
        assert db.execute("SELECT value FROM meta WHERE key = 'cache_problems'").fetchone()[0] \
            != "damaged"
        with db:
            db.execute("UPDATE task_cache SET problems = '[[' WHERE task_id = 'x'")
            write_summary(db, cache_key_of(config), config)
        assert db.execute("SELECT value FROM meta WHERE key = 'cache_problems'").fetchone() \
            == ("damaged",)
    finally:
        db.close()
