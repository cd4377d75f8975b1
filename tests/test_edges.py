"""Issue 28: the edges a tired developer moves by one (found by mutation testing). Each test is
written against what a person or another host sees: a run or no run, an alert held or sent, a
process killed or spared, a lease taken or kept."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from conftest import SCHEDULER, overdue_lock, run_cli

from mdcron.alerts.notify import Alert, enqueue
from mdcron.hosts.lease import acquire, renew
from mdcron.run.locks import read_info
from mdcron.run.process import group_alive
from mdcron.settings.notify import parse_notify_config
from mdcron.state.store import Store

DAY = "2026-11-23"


def statuses(home: Path, task_id: str) -> list[str]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    try:
        return [s for (s,) in db.execute(
            "SELECT status FROM runs WHERE task_id = ? ORDER BY id", (task_id,))]
    finally:
        db.close()


def wait_until(check, what: str, timeout: float = 30.0) -> None:
    """Wait for an event with a deadline, never for the clock."""
    give_up = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < give_up, f"{what} never happened"
        time.sleep(0.02)


# ---------------------------------------------------------------- the catch-up window


@pytest.mark.parametrize(("late", "runs"), [
    ("09:10:00", True),    # the tenth minute after the slot: still caught up
    ("09:10:30", True),    # (lateness counts in whole minutes, as cron's ticks come)
    ("09:11:00", False),   # the eleventh: past a 10 m window
    ("09:00:30", True),    # under a minute late is on time, whatever the window
])
def test_a_late_slot_runs_up_to_the_end_of_its_catchup_window(home, write_task, late, runs):
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    write_task("late", schedule="0 9 * * *", catchup="10m", command="true")
    assert run_cli(home, "tick", "--now", f"{DAY}T08:59:00+00:00").returncode == 0  # first seen
    out = run_cli(home, "tick", "--now", f"{DAY}T{late}+00:00")
    assert out.returncode == 0, out.stdout + out.stderr
    assert statuses(home, "late") == (["success"] if runs else ["skipped"]), out.stdout


@pytest.mark.parametrize(("at", "decision"), [
    ("09:10:00", "due: runs"), ("09:10:30", "due: runs"), ("09:11:00", "skipped — missed by 11m")])
def test_why_at_the_edge_of_the_catchup_window(home, write_task, at, decision):
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    write_task("late", schedule="0 9 * * *", catchup="10m", command="true")
    assert run_cli(home, "tick", "--now", f"{DAY}T08:59:00+00:00").returncode == 0
    out = run_cli(home, "why", "late", "--at", f"{DAY}T{at}+00:00").stdout
    assert f"decision: {decision}" in out, out


def test_with_no_catchup_a_slot_a_minute_late_is_skipped(home, write_task):
    (home / "scheduler.yaml").write_text("timezone: UTC\ncatchup: 0\n")
    write_task("strict", schedule="0 9 * * *", command="true")
    write_task("ontime", schedule="0 9 * * *", command="true")
    assert run_cli(home, "tick", "--now", f"{DAY}T08:59:00+00:00").returncode == 0
    assert run_cli(home, "tick", "--now", f"{DAY}T09:00:30+00:00").returncode == 0
    assert statuses(home, "strict") == ["success"]  # 30 s late is on time (a margin)
    write_task("strict2", schedule="0 10 * * *", command="true")
    assert run_cli(home, "tick", "--now", f"{DAY}T09:59:00+00:00").returncode == 0
    assert run_cli(home, "tick", "--now", f"{DAY}T10:01:00+00:00").returncode == 0
    assert statuses(home, "strict2") == ["skipped"]  # 60 s late is late


# ---------------------------------------------------------------- quiet hours' edges


def _cfg(quiet: str):
    raw = {"timezone": "Europe/Riga",
           "notify": {"quiet_hours": quiet, "destinations": {"home": "json://127.0.0.1:9/x"}}}
    cfg, problems = parse_notify_config(raw, Path("scheduler.yaml"), environ={})
    assert not problems
    return cfg


@pytest.mark.parametrize(("quiet", "hour", "minute", "outcome"), [
    ("22:00-07:00", 21, 59, "queued"),
    ("22:00-07:00", 22, 0, "held"),     # the start belongs to the quiet hours
    ("22:00-07:00", 6, 59, "held"),
    ("22:00-07:00", 7, 0, "queued"),    # the end does not
    ("01:00-05:00", 0, 59, "queued"),   # a span that does not wrap past midnight
    ("01:00-05:00", 1, 0, "held"),
    ("01:00-05:00", 4, 59, "held"),
    ("01:00-05:00", 5, 0, "queued"),
])
def test_quiet_hours_hold_from_their_start_to_just_before_their_end(
        tmp_path, quiet, hour, minute, outcome):
    when = datetime(2026, 11, 24, hour, minute, tzinfo=ZoneInfo("Europe/Riga")).timestamp()
    alert = Alert("failure", "backup", "backup: failure", "exit 2")
    with Store(tmp_path / "state" / "mdcron.db") as store:
        assert enqueue(store, _cfg(quiet), alert, when) == outcome


# ---------------------------------------------------------------- the stale-lock grace


def _hung_task_orphaned(home: Path, write_task) -> int:
    """A task that ignores TERM, left running by a tick killed with SIGKILL: its lock stays
    held by the task. Returns the task's process group."""
    (home / "scheduler.yaml").write_text("timezone: UTC\nkill_grace: 1s\n")
    started = home / "started"
    write_task("hung", schedule="0 10 * * *", timeout=5,
               command=f"trap '' TERM; touch {started}; sleep 300")
    assert run_cli(home, "tick", "--now", f"{DAY}T09:59:00+00:00").returncode == 0
    tick = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                             "--now", f"{DAY}T10:00:00+00:00"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = home / "state" / "locks" / "hung.lock"
    wait_until(lambda: started.exists() and (read_info(lock) or _NOINFO).pgid, "the task's lock")
    pgid = read_info(lock).pgid
    tick.send_signal(signal.SIGKILL)  # the task lives on, holding its lock
    tick.communicate()
    return pgid


class _NOINFO:
    pgid = None


def test_a_run_past_its_timeout_but_within_the_grace_is_left_alone(home, write_task):
    pgid = _hung_task_orphaned(home, write_task)
    try:
        # 5 s timeout, 30 s later on the monotonic clock the lock records: 25 s past the
        # deadline, inside the 60 s grace. The next tick must not kill it.
        overdue_lock(home, "hung", seconds=30)
        out = run_cli(home, "tick", "--now", f"{DAY}T10:01:00+00:00")
        assert group_alive(pgid), out.stdout + out.stderr
        assert statuses(home, "hung") == ["running"]
        # past the grace: the next tick ends it
        overdue_lock(home, "hung", seconds=600)
        out = run_cli(home, "tick", "--now", f"{DAY}T10:02:00+00:00")
        assert "timeout" in out.stdout, out.stdout + out.stderr
        wait_until(lambda: not group_alive(pgid), "the hung group's end")
        assert statuses(home, "hung") == ["timeout"]
    finally:
        if group_alive(pgid):
            import os

            os.killpg(pgid, signal.SIGKILL)


# ---------------------------------------------------------------- PID reuse


def test_a_stale_lock_naming_a_reused_pid_spares_that_process(home, write_task):
    """The record names a process group by pid and start time. When that pid now belongs to
    someone else (PID reuse: here, an innocent process whose pid we write in), the stale-lock
    kill must spare it and still end the real run."""
    pgid = _hung_task_orphaned(home, write_task)
    innocent = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        path = home / "state" / "locks" / "hung.lock"
        record = json.loads(path.read_text())
        record["pgid"] = innocent.pid  # the same pid number, another process
        with open(path, "r+", encoding="utf-8") as handle:  # in place: the task keeps its flock
            handle.truncate()
            handle.write(json.dumps(record, sort_keys=True))
        overdue_lock(home, "hung", seconds=600)
        out = run_cli(home, "tick", "--now", f"{DAY}T10:10:00+00:00")
        assert innocent.poll() is None, "a process that merely reused the pid was killed"
        wait_until(lambda: not group_alive(pgid), "the real run's end (through its mark)")
        assert statuses(home, "hung") == ["timeout"], out.stdout + out.stderr
    finally:
        innocent.kill()
        innocent.wait()
        if group_alive(pgid):
            import os

            os.killpg(pgid, signal.SIGKILL)


# ---------------------------------------------------------------- lease renewal


def test_a_lapsed_lease_is_not_revived_by_its_holders_late_renewal(state_url, tmp_path):
    """Host a stopped renewing (frozen); its lease lapsed by the database's clock. Nobody has
    taken it yet when a wakes up: a's renewal must be refused, and b takes the lease."""
    path = tmp_path / "state" / "mdcron.db"
    with Store(path, url=state_url, host="a") as a, Store(path, url=state_url, host="b") as b:
        lease_a, refused, _ = acquire(a, "job", 1, "a:1:x", 0.3)
        assert lease_a is not None and refused is None
        wait_until(lambda: b.lease_busy("job") is None, "the lease's lapse")
        assert not renew(a, lease_a, 60)
        lease_b, refused, taken = acquire(b, "job", 2, "b:1:x", 60)
        assert lease_b is not None and lease_b.fence == 2, refused


# ---------------------------------------------------------------- the editor's last line


@pytest.mark.parametrize("text", [
    "---\nid: tail\nschedule: \"0 9 * * *\"\ncommand: \"true\"\n---\n\nThe last line has no end",
    "---\nid: tail\nschedule: \"0 9 * * *\"\ncommand: \"true\"\n---",
    "---\r\nid: tail\r\nschedule: \"0 9 * * *\"\r\ncommand: \"true\"\r\n---\r\n\r\nno end",
])
def test_disable_keeps_a_last_line_without_a_newline(home, text):
    path = home / "tasks" / "tail.md"
    path.write_bytes(text.encode())

    def without_the_edit() -> str:
        lines = path.read_bytes().decode().splitlines(keepends=True)
        return "".join(x for x in lines if not x.startswith(("enabled:", "disabled_reason:")))

    out = run_cli(home, "disable", "tail")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "enabled: false" in path.read_text() and without_the_edit() == text
    assert run_cli(home, "enable", "tail").returncode == 0
    assert without_the_edit() == text
