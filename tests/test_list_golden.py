"""Issue 27 item 4: `list` made faster prints what it printed. A home of 70 tasks (more than
50: the listing path of schedule/listing.py and cli/list_json.py) in a named zone, with every
kind of row: run and failed, never run, disabled, held by the ladder, overdue, a chain, a
jittered task (by a second at most: the offset hashes the home), a task in its own zone, one
whose next fire is next year, a 64-character id, a title with a tab, a Claude task, and two
invalid files. Its `list` at 80 and 200 columns, `--wide`, `--tag` and `--json` are compared
byte for byte with what the code before the speed-ups printed (tests/golden/, written by it;
the home's path, of a fixed length, as PLACE)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from conftest import render_task, run_cli

GOLDEN = Path(__file__).parent / "golden"
BEFORE = "2026-11-23T09:58:00+00:00"
TEN = "2026-11-23T10:00:00+00:00"
NOW = "2026-11-23T11:06:30+00:00"  # 10:00's hourly fires are overdue by now
LONG_ID = "nightly-warehouse-export-to-the-analytics-bucket-with-sha256-v2x"
PLACE = "/tmp/mdcron-golden-XXXXXXXX"  # mkdtemp's name: always this long


def _write(home: Path, task_id: str, body: str = "", **fields: object) -> None:
    fields.setdefault("timeout", "5m")
    (home / "tasks" / f"{task_id}.md").write_text(render_task(task_id, body, **fields))


@pytest.fixture(scope="module")
def golden_home():
    base = Path(tempfile.mkdtemp(prefix="mdcron-golden-", dir="/tmp"))
    assert len(str(base)) == len(PLACE), base
    home = base / "home"
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text("timezone: Europe/Berlin\n")
    for i in range(60):  # plain tasks: most never run, a few at 10:00 (UTC+1: 11:00 local)
        _write(home, f"job{i:03d}", schedule=f"{i % 60} {i % 24} * * {'1-5' if i % 3 else '*'}",
               command=f"echo {i}", title=f"Job number {i}", tags=["bench"] if i % 2 else [])
    _write(home, "hourly-ok", schedule="0 * * * *", command="true", title="Hourly, succeeds")
    _write(home, "hourly-fails", schedule="0 * * * *", command="exit 3", title="Fails")
    _write(home, "turned-off", schedule="0 * * * *", command="true", enabled=False,
           disabled_reason="paused")
    (home / "tasks" / "chained.md").write_text(
        "---\nid: chained\nschedule: after hourly-ok\ncommand: echo after\ntimeout: 5m\n---\n")
    _write(home, "jittered", schedule="30 12 * * *", command="true", jitter="1s")
    _write(home, "in-tokyo", schedule="15 9 * * *", command="true", timezone="Asia/Tokyo")
    _write(home, "new-year", schedule="@at 2027-01-05 10:00", command="true")
    _write(home, LONG_ID, schedule="45 23 * * *", command="echo export",
           title="Export the warehouse\tto the analytics bucket", tags=["ops", "nightly"])
    _write(home, "ask-claude", schedule="0 8 * * 1", run_as="claude",
           prompt="Summarise the week's alerts\nin three lines")
    _write(home, "suspended", schedule="*/5 * * * *", command="true")
    (home / "tasks" / "broken-yaml.md").write_text('---\nid: broken\nschedule: "0 2 * *\n---\n')
    (home / "tasks" / "bad-schedule.md").write_text(
        "---\nid: bad-schedule\nschedule: 0 25 * * *\ncommand: echo x\ntimeout: forever\n---\n")
    env = {"ANTHROPIC_API_KEY": ""}
    assert run_cli(home, "tick", "--now", BEFORE, env=env).returncode == 1  # the invalid files
    assert run_cli(home, "tick", "--now", TEN, env=env).returncode == 1  # hourly-fails fails
    held = {"at": 1795430000.0, "path": str(home / "tasks" / "suspended.md"),
            "sha256": hashlib.sha256((home / "tasks" / "suspended.md").read_bytes()).hexdigest(),
            "why": "read-only filesystem"}
    with sqlite3.connect(home / "state" / "mdcron.db") as db:
        # as the ladder holds a suspension it could not write (schedule/held.py)
        db.execute("INSERT INTO meta(key, value) VALUES ('held:suspended', ?)",
                   (json.dumps(held),))
        # the runs' start times to their minute (each tick here is at :00; a loaded machine
        # may start a run a second or more late) and one host name: the same on every machine
        db.execute("UPDATE runs SET started_at = CAST(started_at AS INTEGER)"
                   " - CAST(started_at AS INTEGER) % 60, host = 'box'")
    yield home
    shutil.rmtree(base, ignore_errors=True)


CASES = {  # golden file: (list arguments, $COLUMNS)
    "list-80.txt": (("list",), "80"),
    "list-200.txt": (("list",), "200"),
    "list-wide.txt": (("list", "--wide"), "80"),
    "list-json.txt": (("list", "--json"), "80"),
    "list-tag.txt": (("list", "--tag", "bench"), "200"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_list_prints_what_it_printed_before(golden_home, name):
    args, columns = CASES[name]
    for _ in range(2):  # the first call may rebuild the cache (another code fingerprint)
        done = run_cli(golden_home, *args, "--now", NOW,
                       env={"COLUMNS": columns, "ANTHROPIC_API_KEY": ""})
        text = (f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
                ).replace(str(golden_home.parent), PLACE)
        # the jitter is a hash of the host and the home: under a second, written as "…"
        text = re.sub(r'"2026-11-23T11:30:00\.\d+\+00:00"', '"2026-11-23T11:30:00.…+00:00"', text)
        if os.environ.get("MDCRON_WRITE_GOLDEN"):  # run once with the code before
            GOLDEN.mkdir(exist_ok=True)
            (GOLDEN / name).write_text(text)
        assert text == (GOLDEN / name).read_text()
