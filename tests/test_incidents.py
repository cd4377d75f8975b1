"""Incidents in a real SQLite file; incident_command as a real shell process."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from mdcron.alerts.incidents import (
    get_incident,
    list_incidents,
    open_or_bump,
    resolve,
    resolve_for_task,
)
from mdcron.run.incident_command import run_incident_command
from mdcron.state.store import Store

T0 = 1_795_000_000.0


@pytest.fixture
def store(tmp_path: Path, state_url: str | None):  # both back ends (issue 11)
    with Store(tmp_path / "state" / "mdcron.db", url=state_url) as s:
        yield s


def test_open_bump_resolve_one_open_per_task_and_kind(store):
    first = open_or_bump(store, task_id="backup", kind="suspended", error="exit 1",
                         output_tail="a", now=T0)
    again = open_or_bump(store, task_id="backup", kind="suspended", error="exit 2",
                         output_tail="b", now=T0 + 60)
    other = open_or_bump(store, task_id="backup", kind="timeout", error="timeout after 5 s",
                         output_tail="", now=T0 + 61)
    assert first[1] is True and again == (first[0], False) and other[1] is True
    row = get_incident(store, first[0])
    assert row is not None
    assert (row["count"], row["last_seen"], row["last_error"], row["output_tail"],
            row["opened_at"]) == (2, T0 + 60, "exit 2", "b", T0)

    assert resolve_for_task(store, "backup", T0 + 120, "task succeeded") == [first[0], other[0]]
    assert resolve_for_task(store, "backup", T0 + 121, "task succeeded") == []
    assert list_incidents(store) == []
    reopened = open_or_bump(store, task_id="backup", kind="suspended", error="exit 3",
                            output_tail="", now=T0 + 180)
    assert reopened[1] is True and reopened[0] not in (first[0], other[0])
    listed = list_incidents(store, include_resolved=True)
    assert [r["id"] for r in listed] == [reopened[0], other[0], first[0]]  # open first
    assert listed[2]["resolution"] == "task succeeded" and listed[2]["resolved_at"] == T0 + 120


def test_resolve_by_hand_once(store):
    incident_id, _ = open_or_bump(store, task_id=None, kind="tick_crashed", error="boom",
                                  output_tail=None, now=T0)
    assert get_incident(store, incident_id)["task_id"] == "*"
    assert resolve(store, incident_id, T0 + 5) is True
    assert resolve(store, incident_id, T0 + 6) is False
    assert resolve(store, 9999, T0) is False
    assert get_incident(store, incident_id)["resolution"] == "resolved by hand"


def test_concurrent_bumps_keep_one_open_incident(tmp_path: Path):
    db = tmp_path / "mdcron.db"
    Store(db).connect()  # migrate once
    barrier = threading.Barrier(4)
    opened: list[bool] = []

    def worker() -> None:
        with Store(db) as s:
            barrier.wait()
            for i in range(10):
                opened.append(open_or_bump(s, task_id="t", kind="failure", error=str(i),
                                           output_tail="", now=T0 + i)[1])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with Store(db) as s:
        [row] = list_incidents(s)
    assert row["count"] == 40 and opened.count(True) == 1


def test_incident_command_gets_json_on_stdin_and_env_without_secrets(store, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    incident_id, _ = open_or_bump(store, task_id="backup", kind="suspended",
                                  error="exit 2", output_tail="disk full", now=T0)
    incident = get_incident(store, incident_id)
    out = tmp_path / "out"
    command = (f'cat > {out}.json; env > {out}.env; echo "ran for $MDCRON_INCIDENT_ID"')
    environ = {"PATH": "/usr/bin:/bin", "KEEP_ME": "yes", "GITHUB_TOKEN": "ghp-secret",
               "ANTHROPIC_API_KEY": "sk-ant"}
    error = run_incident_command(command, incident, home=home, environ=environ,
                                 secret_names=("*_TOKEN",))
    assert error is None
    data = json.loads(Path(f"{out}.json").read_text())
    assert (data["id"], data["task_id"], data["kind"], data["last_error"], data["count"]) == (
        incident_id, "backup", "suspended", "exit 2", 1)
    assert data["opened_at"].startswith("2026-") and data["title"] == "backup: suspended"
    env = dict(line.split("=", 1) for line in Path(f"{out}.env").read_text().splitlines()
               if "=" in line)
    assert env["MDCRON_INCIDENT_ID"] == str(incident_id)
    assert env["MDCRON_INCIDENT_KIND"] == "suspended" and env["MDCRON_TASK_ID"] == "backup"
    assert env["MDCRON_INCIDENT_TITLE"] == "backup: suspended" and env["KEEP_ME"] == "yes"
    assert "GITHUB_TOKEN" not in env and "ANTHROPIC_API_KEY" not in env
    log = home / "logs" / "incidents" / f"{incident_id}.log"
    assert f"ran for {incident_id}" in log.read_text()


def test_failing_or_hanging_incident_command_returns_an_error(tmp_path: Path):
    incident = {"id": 7, "task_id": "t", "kind": "timeout"}
    env = {"PATH": "/usr/bin:/bin"}
    error = run_incident_command("echo nope >&2; exit 3", incident, home=tmp_path, environ=env)
    assert error is not None and "incident #7" in error and "exit 3" in error
    start = time.monotonic()
    error = run_incident_command("sleep 30", incident, home=tmp_path, environ=env, timeout=0.5,
                                 kill_grace=0.5)
    assert error is not None and "timeout" in error and time.monotonic() - start < 10
    missing = run_incident_command("no-such-command-mdcron", incident, home=tmp_path,
                                   environ=env)
    assert missing is not None and "exit 127" in missing
