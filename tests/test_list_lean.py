"""Issue 27 item 4: `list --json` without a View when every file's cache row holds
(schedule/cache_listed.py): the same bytes as the View's path for every shape of task and
state, and every file's stat still checked against its row (a changed, racily clean, new or
removed file, a row with problems, a repeated id or a due hint to compute: the View)."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime

from conftest import age_cache as age
from test_cmds_scale import _many, _odd_states

from mdcron.schedule.cache_listed import due_hints, held_rows, read_rows
from mdcron.settings.config import load_config
from mdcron.state.idle import scan
from mdcron.state.task_state import state_rows

AT = "2026-11-23T10:00:00+00:00"


def _lean(home):
    """held_rows' answer for the home as it stands, and due_hints' for its state rows."""
    config = load_config(home)[0]
    cached = read_rows(config)
    rows = None if cached is None else held_rows(scan(str(config.tasks_dir)), cached)
    if rows is None:
        return None, None
    db = sqlite3.connect(home / "state" / "mdcron.db")
    try:
        return rows, due_hints(rows, state_rows(db))
    finally:
        db.close()


def _home(home, write_task, cli) -> None:
    _many(home, write_task)
    for name in ("bad", "off"):  # invalid files ("off" is YAML's false): always the View
        (home / "tasks" / f"{name}.md").unlink()
    write_task("paused", schedule="0 10 * * *", command="true", enabled=False,
               disabled_reason="paused")
    assert cli("tick", "--now", AT).returncode in (0, 1)  # some tasks fail
    _odd_states(home)


def test_list_json_without_a_view_writes_what_the_view_writes(home, write_task, cli):
    """Every shape of row (a Claude task, jitter, a chain, a script, held, running, failing,
    escaped statuses and hosts, a state ahead of its due hint), now and two days on, with the
    config's zone or the machine's, with resources or none (task_rows made only at the first
    row that is not plain): the rows made from the cache's rows alone are byte for
    byte those of the View (the first `list` after a config change reads every file)."""
    _home(home, write_task, cli)
    for zone, resources in (("timezone: Europe/Riga\n", "resources:\n  db: 1\n"),
                            ("", "resources:\n  db: 1\n"), ("", "")):
        if not resources:  # `uses: [db]` with no db: an invalid file
            write_task("chain", after=["t01"], command="true", schedule="after")
        for now in (AT, "2026-11-23T10:00:30+00:00", "2026-11-25T11:00:00+00:00"):
            (home / "scheduler.yaml").write_text(f"{zone}{resources}# {now}\n",
                                                 encoding="utf-8")
            assert _lean(home)[0] is None  # another cache key: the View reads every file
            cold = cli("list", "--json", "--now", now)
            age(home)
            rows, dues = _lean(home)
            assert rows is not None and dues is not None  # the next list takes the rows
            assert len(rows) == 58 and {"claude", "chain", "script"} <= {r.id for r in rows}
            warm = cli("list", "--json", "--now", now)
            assert cold.returncode == warm.returncode == 0, warm.stderr
            assert warm.stdout == cold.stdout
    shown = {r["id"]: r for r in json.loads(warm.stdout)}
    assert shown["t03"]["enabled"] is False and shown["t09"]["running_since"]
    assert shown["claude"]["command"] == "claude: Summarise the news"


def test_a_file_changed_since_its_row_is_read_by_list_json(home, write_task, cli):
    """The files are the truth: a title edited in place (same size) after the rows were
    written shows at once; the row no longer holds, so the View reads the file."""
    _home(home, write_task, cli)
    cli("list", "--json", "--now", AT)
    age(home)
    assert _lean(home)[0] is not None
    path = home / "tasks" / "t07.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"echo 7"', '"echo 8"'), encoding="utf-8")
    assert _lean(home)[0] is None
    rows = {r["id"]: r for r in json.loads(cli("list", "--json", "--now", AT).stdout)}
    assert rows["t07"]["command"] == "echo 8"


def test_a_declined_list_json_reads_the_cache_rows_once(home, write_task, cli, monkeypatch):
    """When a file changed, the View takes the rows and listings the fast path read (one
    read of the 10,000 rows, not two), and writes what `list --json` writes after it."""
    from test_run_costs import spy

    from mdcron.cli.cmd_list import _json_items
    from mdcron.state import task_cache

    _home(home, write_task, cli)
    cli("list", "--json", "--now", AT)
    age(home)
    path = home / "tasks" / "t07.md"
    path.write_text(path.read_text(encoding="utf-8").replace('"echo 7"', '"echo 8"'),
                    encoding="utf-8")
    reads = spy(monkeypatch, task_cache, "read_cache")
    listed = spy(monkeypatch, task_cache, "listings")
    items = _json_items(load_config(home)[0], datetime.fromisoformat(AT).timestamp())
    assert reads == [] and listed == []
    assert any('"command": "echo 8"' in i for i in items)
    after = cli("list", "--json", "--now", AT)  # rows racily clean: the View reads again
    age(home)
    assert json.loads(after.stdout) == json.loads(f"[{', '.join(items)}]")
    assert cli("list", "--json", "--now", AT).stdout == after.stdout  # the rows, held


def test_held_rows_hold_only_while_every_file_is_its_row(home, write_task, cli):
    """held_rows declines (None) for each thing load() would read, drop or report, and the
    rows hold again once a `list` has saved what it read."""
    _home(home, write_task, cli)
    cli("list", "--json", "--now", AT)
    age(home)
    assert _lean(home)[0] is not None

    def again() -> None:  # the View reads and saves; the rows hold again
        cli("list", "--json", "--now", AT)
        age(home)
        assert _lean(home)[0] is not None

    path = home / "tasks" / "t01.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # the stat only: read again
    assert _lean(home)[0] is None
    again()
    cli("list", "--json", "--now", AT)  # a row read just now is racily clean: not yet
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("BEGIN")
    sealed = db.execute("SELECT value FROM meta WHERE key = 'cache_sealed'").fetchone()
    db.execute("UPDATE task_cache SET read_ns = mtime_ns WHERE path = ?", (str(path),))
    db.execute("UPDATE meta SET value = ? WHERE key = 'cache_sealed'", sealed)
    db.execute("COMMIT")
    db.close()
    assert _lean(home)[0] is None
    again()
    write_task("new", schedule="0 6 * * *", command="true")  # a file without a row
    assert _lean(home)[0] is None
    again()
    (home / "tasks" / "new.md").unlink()  # a row without a file
    assert _lean(home)[0] is None
    again()
    write_task("t02", filename="t02-copy.md", schedule="0 6 * * *", command="true")  # an id
    cli("list", "--json", "--now", AT)  # twice: the View keeps both rows, held_rows declines
    age(home)
    assert _lean(home)[0] is None
    (home / "tasks" / "t02-copy.md").unlink()
    again()
    (home / "tasks" / "broken.md").write_text("---\nid: broken\n---\n", encoding="utf-8")
    cli("list", "--json", "--now", AT)  # an invalid file: its row of `list --json`
    age(home)
    assert _lean(home)[0] is None
    (home / "tasks" / "broken.md").unlink()
    again()  # the script task's warning (job.sh not executable) is no reason to decline
    assert any(r.id == "script" for r in _lean(home)[0])
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("UPDATE task_state SET last_slot = coalesce(last_slot, 0) + 60"
                " WHERE task_id = 't04'")  # the state moved on: its due hint is computed
    db.close()
    rows, dues = _lean(home)
    assert rows is not None and dues is None
    cli("list", "--json", "--now", AT)  # fill_dues computes it and save() keeps it
    assert _lean(home)[1] is not None
