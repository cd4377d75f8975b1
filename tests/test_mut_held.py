"""Suspensions held in the state (schedule/held.py, issue 22) as people read them and as the tick
honours them (issue 28: mutation survivors): why the file could not be written, the line `list`,
`show` and `doctor` print, which due tasks a hold keeps back and when an edit lifts it. A real
SQLite state; the immutable case uses a real `chattr +i` (root only)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from mdcron.schedule.held import describe, held, honour, lift, record
from mdcron.state.store import Store
from mdcron.tasks.task import Task

AT = 1795428000.0  # 2026-11-23 10:00 UTC


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "state" / "mdcron.db") as s:
        yield s


def task_file(tmp_path: Path, task_id: str, text: str = "---\nid: x\n---\n") -> Task:
    path = tmp_path / "tasks" / f"{task_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return Task(id=task_id, path=path, schedule="* * * * *", title=task_id)


@pytest.mark.parametrize(("exc", "why"), [
    (OSError(errno.EROFS, "Read-only file system"), "read-only filesystem"),
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
    (PermissionError(errno.EPERM, "Operation not permitted"), "operation not permitted"),
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on device"),
    (ValueError("no frontmatter"), "ValueError"),
], ids=["erofs", "eacces", "eperm-not-immutable", "other-errno", "no-errno"])
def test_the_hold_says_why_the_file_could_not_be_written(store, tmp_path, exc, why):
    t = task_file(tmp_path, "flaky")
    sentence = record(store, t, AT, exc)
    assert sentence == (f"could not write tasks/flaky.md ({why}): the suspension is recorded in"
                        " the state; `scheduler.py enable flaky` lifts it")
    assert held(store) == {"flaky": {
        "at": AT, "path": str(t.path), "why": why,
        "sha256": hashlib.sha256(t.path.read_bytes()).hexdigest()}}


def test_an_immutable_file_is_named_so(store, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    t = task_file(tmp_path, "locked")
    if subprocess.run(["chattr", "+i", str(t.path)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute")
    try:
        sentence = record(store, t, AT, PermissionError(errno.EPERM, "Operation not permitted"))
    finally:
        subprocess.run(["chattr", "-i", str(t.path)], capture_output=True)
    assert "(read-only: immutable)" in sentence
    assert held(store)["locked"]["why"] == "read-only: immutable"


def test_a_file_that_cannot_be_read_is_held_without_a_digest_and_stays_held(store, tmp_path):
    t = task_file(tmp_path, "gone")
    t.path.unlink()
    record(store, t, AT, OSError(errno.EROFS, "Read-only file system"))
    assert held(store)["gone"]["sha256"] is None
    task_file(tmp_path, "gone", "---\nid: gone\nschedule: '* * * * *'\n---\n")
    said: list[str] = []
    assert honour(store, [t], said.append) == []  # nothing to compare with: a person lifts it
    assert said == []


def test_the_tick_keeps_back_only_held_tasks_until_their_file_changes(store, tmp_path):
    kept, other = task_file(tmp_path, "kept"), task_file(tmp_path, "other")
    edited = task_file(tmp_path, "edited")
    for t in (kept, edited):
        record(store, t, AT, OSError(errno.EROFS, "Read-only file system"))
    said: list[str] = []
    assert honour(store, [kept, other, edited], said.append) == [other]
    assert said == []
    edited.path.write_text("---\nid: edited\nenabled: true\n---\n", encoding="utf-8")
    assert honour(store, [kept, other, edited], said.append) == [other, edited]
    assert said == ["edited: its file changed after the suspension held in the state: enabled"
                    " again"]
    assert set(held(store)) == {"kept"}  # the edit lifted it for good
    assert honour(store, [edited], said.append) == [edited] and len(said) == 1
    assert honour(store, [], said.append) == []


def test_no_hold_leaves_the_due_tasks_as_they_are(store, tmp_path):
    tasks = [task_file(tmp_path, "a"), task_file(tmp_path, "b")]
    assert honour(store, tasks, print) is tasks


def test_enable_lifts_a_hold_once(store, tmp_path):
    t = task_file(tmp_path, "flaky")
    record(store, t, AT, OSError(errno.EROFS, "Read-only file system"))
    assert lift(store, "flaky") is True
    assert lift(store, "flaky") is False
    assert held(store) == {}
    assert honour(store, [t], print) == [t]


def test_a_damaged_hold_still_holds(store, tmp_path):
    store.set_meta("held:broken", "{not json")
    store.set_meta("heldx", json.dumps({"at": AT}))  # another key: not a hold
    assert held(store) == {"broken": {}}
    t = task_file(tmp_path, "broken")
    assert honour(store, [t], print) == []
    assert describe({}, "broken") == (
        "suspended, held in the state: broken could not be written (?); `scheduler.py enable"
        " broken` lifts it")


def test_the_line_list_show_and_doctor_print(store, tmp_path):
    t = task_file(tmp_path, "flaky")
    record(store, t, AT, OSError(errno.EROFS, "Read-only file system"))
    assert describe(held(store)["flaky"], "flaky") == (
        "suspended since 2026-11-23 10:00 UTC, held in the state: tasks/flaky.md could not be"
        " written (read-only filesystem); `scheduler.py enable flaky` lifts it")
    assert describe({"at": 0, "path": "/flaky.md", "why": "permission denied"}, "flaky") == (
        "suspended since 1970-01-01 00:00 UTC, held in the state: flaky.md could not be written"
        " (permission denied); `scheduler.py enable flaky` lifts it")
