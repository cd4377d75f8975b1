"""Issue 23 (items 5 and 6), several hosts on one PostgreSQL: a chain's downstream owed while
its previous run still runs on another host waits instead of being skipped; a suspension is
lifted by a change of the file's content, never by its age (a fresh copy of the same bytes)."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from conftest import render_task, run_cli
from test_hosts import history, make_home, start_tick

BEFORE = "2026-11-23T09:59:00+00:00"
T1000 = "2026-11-23T10:00:00+00:00"
T1001 = "2026-11-23T10:01:00+00:00"
T1002 = "2026-11-23T10:02:00+00:00"


def wait_for(path: Path, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_downstream_owed_while_its_previous_run_holds_another_host_runs_once_later(
        pg_url, tmp_path):
    """a runs extract at 10:00 and its downstream, which blocks on a marker; meanwhile b runs
    extract at 10:01: b must not record the 10:01 downstream `skipped`, only say it waits. Once
    the first downstream ends, the 10:01 one runs exactly once (a's tick finds it owed)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    go = tmp_path / "go"
    homes = []
    for name in ("a", "b"):
        home = make_home(tmp_path, name, pg_url, marks, 0)
        tasks = home / "tasks"
        (tasks / "extract.md").write_text(render_task(
            "extract", schedule="* 10 * * *", command=f"echo {name} >> {marks}/extract"),
            encoding="utf-8")
        (tasks / "load.md").write_text(render_task(
            "load", schedule="after extract", timeout="10m",
            command=f"touch {marks}/load-started-$MDCRON_RUN_ID;"
                    f" while [ ! -e {go} ]; do sleep 0.05; done; echo {name} >> {marks}/load"),
            encoding="utf-8")
        homes.append(home)
    a, b = homes
    for home in homes:
        out = run_cli(home, "tick", "--now", BEFORE)
        assert out.returncode == 0, out.stderr
    first = start_tick(a, T1000)
    try:
        deadline = time.monotonic() + 120
        while not list(marks.glob("load-started-*")):
            assert time.monotonic() < deadline and first.poll() is None, first.stderr
            time.sleep(0.05)
        out = run_cli(b, "tick", "--now", T1001, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "load: waits for the previous run (still running on host a since" in out.stdout
        assert "skipped" not in out.stdout
        rows = history(b)
        assert [(r["task_id"], r["status"]) for r in rows if r["task_id"] == "load"] == \
            [("load", "running")]
        why = run_cli(b, "why", "load")
        assert "waits for the previous run (still running on host a since" in why.stdout, why
        again = run_cli(b, "tick", "--now", T1001, timeout=120)  # cron's next try: still waits
        assert again.returncode == 0 and "waits for the previous run" in again.stdout
    finally:
        go.touch()
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    out = run_cli(b, "tick", "--now", T1001, timeout=120)  # nothing more is owed
    assert out.returncode == 0, out.stderr
    rows = [r for r in history(a) if r["task_id"] == "load"]
    assert sorted((r["scheduled_for"], r["status"]) for r in rows) == [
        (T1000, "success"), (T1001, "success")], rows
    assert Counter(r["scheduled_for"] for r in rows).most_common(1)[0][1] == 1
    assert (marks / "load").read_text().split() == ["a", "a"]  # a's round, once it was free
    assert sorted((marks / "extract").read_text().split()) == ["a", "b"]


def suspended_pair(pg_url: str, tmp_path: Path) -> tuple[Path, Path, Path]:
    """a and b with the same `flaky` file; a's tick suspends it (a's copy: enabled: false)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    homes = []
    for name in ("a", "b"):
        home = make_home(tmp_path, name, pg_url, marks, 0)
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write("max_consecutive_failures: 1\n")
        (home / "tasks" / "flaky.md").write_text(render_task(
            "flaky", "Fails on purpose.\n", schedule="* * * * *", self_heal=False,
            command=f"echo ran >> {marks}/ran; exit 1"), encoding="utf-8")
        homes.append(home)
    a, b = homes
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 1  # fails, suspended on a
    assert "enabled: false" in (a / "tasks" / "flaky.md").read_text()
    return a, b, marks


def test_a_fresh_copy_of_a_suspended_task_does_not_lift_the_suspension(pg_url, tmp_path):
    """b's copy is re-copied (`cp`, a new mtime, the same content: still enabled: true, as it
    was before a suspended it) and touched into the future: still suspended on every host."""
    a, b, marks = suspended_pair(pg_url, tmp_path)
    mine = b / "tasks" / "flaky.md"
    copy = tmp_path / "fresh-clone.md"
    shutil.copyfile(mine, copy)
    mine.unlink()
    shutil.copyfile(copy, mine)  # a new file, a new mtime, the same bytes
    later = time.time() + 3600
    os.utime(mine, (later, later))
    for home, now in ((b, T1000), (a, T1001), (b, T1002)):
        out = run_cli(home, "tick", "--now", now)
        assert out.returncode == 0, out.stderr
        if home == b:
            assert "suspended on host a" in out.stdout and "file changed" not in out.stdout
    assert (marks / "ran").read_text().split() == ["ran"]  # a's one run only


def test_a_real_edit_of_a_suspended_task_lifts_it_for_every_host(pg_url, tmp_path):
    """b's copy gets the fixed command, its mtime kept from before the suspension (`rsync -a`
    of a fix made elsewhere earlier): the content differs, so the suspension is lifted."""
    a, b, marks = suspended_pair(pg_url, tmp_path)
    mine = b / "tasks" / "flaky.md"
    text = mine.read_text()
    assert "exit 1" in text
    mine.write_text(text.replace("exit 1", "exit 0"), encoding="utf-8")
    old = datetime.fromisoformat(BEFORE).timestamp() - 3600
    os.utime(mine, (old, old))
    out = run_cli(b, "tick", "--now", T1000)
    assert out.returncode == 0, out.stderr
    assert "flaky: its file changed after the suspension on host a: enabled again" in out.stdout
    assert (marks / "ran").read_text().split() == ["ran", "ran"]
    rows = [r for r in history(b) if r["task_id"] == "flaky"]
    assert [(r["host"], r["status"]) for r in rows] == [("b", "success"), ("a", "failed")]


def test_the_content_hash_ignores_only_what_the_suspension_writes():
    from conftest import render_task as task

    from mdcron.tasks.content_hash import content_hash
    from mdcron.tasks.frontmatter_edit import set_keys

    plain = task("x", "Body.\n", schedule="* * * * *", command="echo hi")
    said_on = task("x", "Body.\n", schedule="* * * * *", enabled=True, command="echo hi")
    suspended = set_keys(said_on, {"enabled": False, "disabled_reason": "auto_suspended"})
    added = set_keys(plain, {"enabled": False, "disabled_reason": "auto_suspended"})
    same = {content_hash(t.encode()) for t in (said_on, suspended)}
    assert len(same) == 1
    assert content_hash(plain.encode()) == content_hash(added.encode())
    assert content_hash(said_on.replace("\n", "\r\n").encode()) in same  # a checkout's CRLF
    for edit in (said_on.replace("echo hi", "echo ho"), said_on.replace("* * * * *", "0 * * * *"),
                 said_on.replace("Body.", "Body!")):
        assert content_hash(edit.encode()) not in same


LOCKER = """
import fcntl, os, sys, time
from pathlib import Path
handle = open(sys.argv[1], "a")
fcntl.flock(handle, fcntl.LOCK_EX)  # held, nothing written yet: a run that is starting
Path(sys.argv[2]).touch()
deadline = time.monotonic() + 300
while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def test_a_downstream_whose_lock_is_taken_meanwhile_gives_its_claim_back(home, tmp_path):
    """One host: the downstream's lock is taken by another process between the tick's look and
    its claim (a flock held, its holder not yet recorded). The claim is given back, not
    recorded `skipped`; the next tick runs that slot, once, and the next one after it."""
    import subprocess
    import sys

    from mdcron.settings.config import load_config

    marks = tmp_path / "marks"
    marks.mkdir()
    tasks = home / "tasks"
    (tasks / "extract.md").write_text(render_task(
        "extract", schedule="* 10 * * *", command="true"), encoding="utf-8")
    (tasks / "load.md").write_text(render_task(
        "load", schedule="after extract", command=f"echo $MDCRON_RUN_ID >> {marks}/load"),
        encoding="utf-8")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    lock = load_config(home)[0].locks_dir / "load.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    held, go = tmp_path / "held", tmp_path / "go"
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(lock), str(held), str(go)])
    try:
        wait_for(held)
        out = run_cli(home, "tick", "--now", T1000)
        assert out.returncode == 0, out.stderr
        assert "load: waits for the previous run (previous run still running)" in out.stdout
        assert "skipped" not in out.stdout
        assert [r["task_id"] for r in history(home)] == ["extract"]
    finally:
        go.touch()
        locker.wait(timeout=60)
    out = run_cli(home, "tick", "--now", T1001)
    assert out.returncode == 0, out.stderr
    rows = [r for r in history(home) if r["task_id"] == "load"]
    assert sorted((r["scheduled_for"], r["status"]) for r in rows) == [
        (T1000, "success"), (T1001, "success")], rows
    assert len((marks / "load").read_text().split()) == 2
