"""Issue 27 item 4: the read-only commands at scale (10,000 tasks, 1,000,000 runs) read what a
tick left them and pay no rebuild twice; their output stays what it was."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import zlib

import pytest
from conftest import REPO
from conftest import age_cache as age

from mdcron.core.clock import minute_floor
from mdcron.core.lock_info import LockInfo, boot_id, process_start_time
from mdcron.core.outcome import Outcome, RunResult
from mdcron.state.store import Owner, Store

NOW = minute_floor(1_795_000_000.0)
OWNER = Owner(pid=4242, start=1, boot="boot")

PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], *sys.argv[2:]])
print("EXIT", code, "YAML", "yaml" in sys.modules, file=sys.stderr)
"""


def _cli(home, *words: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, str(home), *words], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    return out.stderr.strip().splitlines()[-1]


def test_a_read_only_command_after_a_config_change_checks_it_once(home, write_task):
    """After scheduler.yaml changed, the first `list` reads it with PyYAML and keeps its key
    (state/config-checked), as a tick would: the commands after it read it without PyYAML
    (each one paid the parse until the next tick)."""
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 2\n", encoding="utf-8")
    write_task("plain", command="true")
    for minute in (0, 1):  # the first tick creates state/, the second keeps the key
        assert _cli(home, "tick", "--now", f"2026-11-23T10:0{minute}:00+00:00").startswith(
            "EXIT 0")
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 3\n", encoding="utf-8")
    checked = (home / "state" / "config-checked").read_bytes()
    assert _cli(home, "tick", "--dry-run") == "EXIT 0 YAML True"
    assert (home / "state" / "config-checked").read_bytes() == checked  # a dry run keeps none
    assert _cli(home, "list", "--json") == "EXIT 0 YAML True"  # both parsers, the key kept
    age(home)  # the task file's row trusted: a file read again would import yaml for itself
    for words in (["list", "--json"], ["list"], ["show", "plain"], ["history"],
                  ["next", "plain"]):
        assert _cli(home, *words) == "EXIT 0 YAML False", words



@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    with Store(tmp_path / "state" / "mdcron.db", url=url, host="hosta") as s:
        yield s


def test_last_run_briefs_reads_the_newest_row_of_the_ids_asked_for(store):
    """`list`'s last-run columns (issue 27: the ids it lists, not a skip-scan of every id in
    1,000,000 runs), the same on SQLite and PostgreSQL."""
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    won = store.claim_slots([("a", NOW, None, "/t/a.md"), ("b", NOW, None, "/t/b.md")], NOW,
                            OWNER)
    later = store.start_run("a", scheduled_for=NOW, trigger="manual", attempt=1, kind="run",
                            now=NOW + 5, owner=OWNER, task_file=None)
    store.start_run("gone", scheduled_for=NOW, trigger="manual", attempt=1, kind="run",
                    now=NOW + 6, owner=OWNER, task_file=None)
    assert store.finish_run(later, RunResult(Outcome.FAILED, exit_code=1, duration=1.0,
                                             fail_reason="exit 1"), NOW + 7)
    briefs = store.last_run_briefs(iter(["a", "b", "never", "a"]))
    assert briefs == {"a": {"started_at": NOW + 5, "status": "failed", "host": "hosta"},
                      "b": {"started_at": NOW, "status": "running", "host": "hosta"}}
    assert store.run(won[("b", NOW)])["status"] == "running"
    assert store.last_run_briefs([]) == {}


def _many(home, write_task) -> None:
    """60 tasks of every shape `list` shows (past View.records' 50-row threshold)."""
    for i in range(52):
        write_task(f"t{i:02d}", schedule=f"{i % 60} {i % 24} * * *", command=f"echo {i}",
                   timezone=["UTC", "Europe/Riga", None][i % 3], tags=["a", f"g{i % 4}"])
    write_task("claude", schedule="0 6 * * *", run_as="claude", prompt="Summarise the news")
    # never due at the tests' 10:00 tick: a tick waits for a jittered start within its minute
    # (up to 60 s of real time, by the home's hash)
    write_task("jitter", schedule="3-59/5 * * * *", command="true", jitter="3m")
    write_task("off", schedule="0 10 * * *", command="true", enabled=False,
               disabled_reason="paused")
    write_task("chain", after=["t01"], command="true", uses=["db"],
               schedule="after")
    write_task("uni", title="Sauvegarde “nuit” ✓", schedule="@every 2h", command="a\tb")
    write_task("script", schedule="@hourly", run_as="script", command="job.sh --x")
    (home / "job.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (home / "tasks" / "bad.md").write_text("---\nid: bad\n---\n", encoding="utf-8")
    (home / "scheduler.yaml").write_text("timezone: UTC\nresources:\n  db: 1\n",
                                         encoding="utf-8")


def test_list_reads_only_the_listed_fields_and_shows_what_it_showed(home, write_task, cli):
    """At more than 50 cached tasks `list` decodes only the fields it shows (schedule/
    listing.py, schema 9): the same JSON and the same table as with every file read again; a
    listing whose checksum fails, or that is missing, is read the careful way."""
    _many(home, write_task)
    at = "2026-11-23T10:00:00+00:00"
    assert cli("tick", "--now", at).returncode in (0, 1)
    age(home)
    warm = [cli("list", "--json", "--now", at).stdout,
            cli("list", "--now", at, env={"COLUMNS": "200"}).stdout,
            cli("list", "--now", at, env={"COLUMNS": "80"}).stdout,
            cli("list", "--wide", "--now", at).stdout]
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    path = str(home / "tasks" / "t07.md")
    text = db.execute("SELECT listing FROM task_cache_data WHERE path = ?", (path,)).fetchone()[0]
    assert '"t07"' in text
    for forged in (text.replace('"t07"', '"forged"', 2), text.split(" ", 1)[1], "1 [", None):
        db.execute("UPDATE task_cache_data SET listing = ? WHERE path = ?", (forged, path))
        assert cli("list", "--json", "--now", at).stdout == warm[0]  # its file says t07
    db.execute("DELETE FROM task_cache")
    db.close()
    cold = [cli("list", "--json", "--now", at).stdout,
            cli("list", "--now", at, env={"COLUMNS": "200"}).stdout,
            cli("list", "--now", at, env={"COLUMNS": "80"}).stdout,
            cli("list", "--wide", "--now", at).stdout]
    assert warm == cold
    rows = {r["id"]: r for r in json.loads(warm[0])}
    assert rows["claude"]["command"] == "claude: Summarise the news"
    assert rows["uni"]["title"] == "Sauvegarde “nuit” ✓" and rows["chain"]["uses"] == ["db"]
    assert rows["jitter"]["next_run"] != rows["jitter"]["next_fire"]


def test_show_reads_another_tasks_changed_file_which_now_takes_its_id(home, write_task, cli):
    """`show` reads only the short rows of other ids (state/task_cache.read_cache `only`); a
    file whose row no longer holds is read again, and a duplicate id it now makes is refused."""
    for i in range(60):
        write_task(f"job{i:02d}", schedule=f"{i} 6 * * *", command="true")
    assert cli("tick", "--now", "2026-11-23T10:00:00+00:00").returncode == 0
    age(home)
    assert cli("show", "job03").returncode == 0
    write_task("job03", filename="job10.md", schedule="5 7 * * *", command="echo again")
    shown = cli("show", "job03")
    assert shown.returncode != 0 and "duplicate id 'job03'" in shown.stderr, shown.stderr
    assert cli("show", "job10").returncode != 0  # job10 is gone: its file says job03


def test_print_json_writes_each_item_as_the_stdlib_encoder_does(capsys):
    """render.print_json builds json's C encoder once for a list's items (issue 27): each line
    is what json.JSONEncoder(default=str).encode writes, whatever the item."""
    from pathlib import Path

    from mdcron.cli.render import print_json

    items = [{"a": 1, "b": [1.5, None, True], "c": "é\u2028\n\"", "p": Path("/x"), "n": 10**20},
             "text", 3, 2.0, None, [], {}, {"inf": float("inf")}, {1: "int key"}, [Path("/y")]]
    print_json(items)
    encode = json.JSONEncoder(default=str).encode
    assert capsys.readouterr().out == "[\n" + ",\n".join(
        "  " + encode(i) for i in items) + "\n]\n"


def test_a_schema_8_database_gains_the_listing_column_and_lists_as_before(home, write_task,
                                                                         cli):
    """Schema 9 (issue 27) adds task_cache_data.listing; a database of schema 8 migrates on
    its first open, and the cache rows written after it carry their listing."""
    for i in range(55):
        write_task(f"job{i:02d}", schedule=f"{i} 6 * * *", command="true")
    at = "2026-11-23T10:00:00+00:00"
    assert cli("tick", "--now", at).returncode == 0
    shown = cli("list", "--json", "--now", at).stdout
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("ALTER TABLE task_cache_data DROP COLUMN listing")
    db.execute("PRAGMA user_version = 8")
    db.close()
    assert cli("list", "--json", "--now", at).stdout == shown
    age(home)
    assert cli("list", "--json", "--now", at).stdout == shown
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 9
    listings = [r[0] for r in db.execute("SELECT listing FROM task_cache_data")]
    db.close()
    assert len(listings) == 55 and all(x and '"true"' in x for x in listings)


def _odd_states(home) -> None:
    """What makes a `list --json` row other than plain (cli/list_json.py): a held suspension,
    a lock with a record in it, failures in a row, last runs with a host and a status to
    escape, a state that moved on behind the cache's due hint."""
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("INSERT INTO meta(key, value) VALUES ('held:t03', '{}')")
    db.execute("UPDATE task_state SET consecutive_failures = 3 WHERE task_id IN ('t04', 'off')")
    db.execute("UPDATE task_state SET last_slot = not_before + 3600 WHERE task_id = 't05'")
    for tid, status, host in (("t06", "failed", "hôte-b"), ("t07", "success", None),
                              ("off", "timeout", "b"), ("t08", "odd \"one\"", "b")):
        db.execute("INSERT INTO runs(task_id, scheduled_for, trigger, status, started_at, host)"
                   " VALUES (?, ?, 'manual', ?, ?, ?)", (tid, NOW, status, NOW + 1.25, host))
    db.close()
    (home / "state" / "locks").mkdir(exist_ok=True)
    import os  # a live holder: this test's own process

    info = LockInfo("t09", None, os.getpid(), process_start_time(os.getpid()), boot_id(), None,
                    None, NOW + 2.5, NOW + 600)
    (home / "state" / "locks" / "t09.lock").write_text(info.to_json(), encoding="utf-8")


@pytest.mark.parametrize("zone", ["timezone: Europe/Riga\n", ""])
def test_list_json_writes_the_rows_list_rows_makes(home, write_task, cli, zone):
    """`list --json` writes a plain task's row from the cache's listing texts (issue 27,
    cli/list_json.py) and the others through queries.TaskRows: byte for byte what every file
    read again (the first `list` after a config change) writes, for every shape of task and
    state, now and two days on (every task overdue), with the config's zone or the machine's."""
    _many(home, write_task)
    at = "2026-11-23T10:00:00+00:00"
    assert cli("tick", "--now", at).returncode in (0, 1)
    _odd_states(home)
    (home / "scheduler.yaml").write_text(zone + "resources:\n  db: 1\n", encoding="utf-8")
    for now in (at, "2026-11-23T10:00:30+00:00", "2026-11-25T11:00:00+00:00"):
        cold = cli("list", "--json", "--now", now)  # the config changed: every file read
        age(home)
        warm = cli("list", "--json", "--now", now)  # the listings' texts
        assert cold.returncode == warm.returncode == 0, warm.stderr
        assert warm.stdout == cold.stdout
        (home / "scheduler.yaml").write_text(zone + "resources:\n  db: 1\n# " + now + "\n",
                                             encoding="utf-8")
    rows = {r["id"]: r for r in json.loads(warm.stdout)}
    assert rows["t03"]["enabled"] is False and rows["t04"]["consecutive_failures"] == 3
    assert rows["t06"]["last_host"] == "hôte-b" and rows["t01"]["overdue_since"]
    assert rows["t09"]["running_since"] and rows["t08"]["last_status"] == 'odd "one"'
    assert rows["bad"]["valid"] is False


def test_list_json_copies_a_plain_tasks_row_from_its_listing(home, write_task, cli):
    """The plain rows are the listing's texts put together, not a dict encoded again: a listing
    whose checksum holds is what `list --json` shows (the cache is trusted as listed() trusts
    it; the file's stat, id, enabled flag and path still decide whether the row is used)."""
    _many(home, write_task)
    at = "2026-11-23T10:00:00+00:00"
    assert cli("tick", "--now", at).returncode in (0, 1)
    age(home)
    before = cli("list", "--json", "--now", at).stdout
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    path = str(home / "tasks" / "t07.md")
    text = db.execute("SELECT listing FROM task_cache_data WHERE path = ?", (path,)).fetchone()[0]
    fields = text.split(" ", 1)[1].split("\n")
    assert fields[:2] == ['"t07"', '"t07"']  # the id and the title, one field a line
    body = "\n".join([fields[0], '"Listed t07"', *fields[2:]])
    _put_listing(db, path, body)
    db.close()
    after = cli("list", "--json", "--now", at).stdout
    assert after == before.replace('"id": "t07", "title": "t07"',
                                   '"id": "t07", "title": "Listed t07"') != before


def test_list_decodes_the_listings_at_once_and_a_bad_one_row_by_row(home, write_task, cli):
    """`list` decodes every listing in one json.loads (schedule/listing._decode_all). A listing
    whose checksum holds but which does not make exactly one array of its own (not JSON; two
    arrays; another id) costs that shortcut, never a row: the table is the one before."""
    _many(home, write_task)
    at = "2026-11-23T10:00:00+00:00"
    assert cli("tick", "--now", at).returncode in (0, 1)
    age(home)
    wide = {"COLUMNS": "200"}
    before = cli("list", "--now", at, env=wide).stdout
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    path = str(home / "tasks" / "t07.md")
    text = db.execute("SELECT listing FROM task_cache_data WHERE path = ?", (path,)).fetchone()[0]
    body = text.split(" ", 1)[1]
    for forged in ("{", body + "],[" + body, body.replace('"t07"', '"forged"')):
        _put_listing(db, path, forged)
        assert cli("list", "--now", at, env=wide).stdout == before, forged
    db.close()


def _put_listing(db: sqlite3.Connection, path: str, body: str) -> None:
    """A file's cached listing replaced by `body` under a checksum that holds, the cache's seal
    kept (a writer that went round the cache's own code)."""
    db.execute("BEGIN")
    db.execute("UPDATE task_cache_data SET listing = ? WHERE path = ?",
               (f"{zlib.crc32(body.encode())} {body}", path))
    sealed = db.execute("SELECT value FROM meta WHERE key = 'cache_sealed'").fetchone()
    db.execute("UPDATE meta SET value = ? WHERE key = 'cache_sealed'", sealed)
    db.execute("COMMIT")
