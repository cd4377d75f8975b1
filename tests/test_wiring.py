"""The tick with everything plugged in: alerts to a real HTTP endpoint through apprise,
incidents, and Claude (prompt tasks, healing, comments) through the real SDK against the fake
Messages API. Time is injected; nothing sleeps for the clock."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import REPO, run_cli
from fake_anthropic import tool_use

from mdcron.cli.commands import SELF_HEAL
from mdcron.core.clock import Clock
from mdcron.run.tick import run_tick
from mdcron.settings.config import load_config

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def setup_home(home: Path, sink, extra: str = "") -> None:
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{sink.json_url('/hook')}\"\n  default: ops\n"
        f"claude:\n  retry_backoff: 0.01\n{extra}")
    shutil.copytree(REPO / "prompts", home / "prompts")


def tick(home: Path, at: datetime, environ: dict | None = None):
    config, _ = load_config(home)
    env = {"PATH": "/usr/bin:/bin", **(environ or {})}
    return run_tick(config, Clock(at), say=lambda _l: None, environ=env, selfheal=SELF_HEAL)


def titles(sink) -> list[str]:
    return [b.get("title", "") for b in sink.bodies() if isinstance(b, dict)]


def incidents(home: Path) -> list[tuple]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    rows = db.execute("SELECT task_id, kind, status, count FROM incidents ORDER BY id").fetchall()
    db.close()
    return rows


def test_failure_alert_then_suspension_then_recovery(home, write_task, http_sink):
    setup_home(home, http_sink)
    path = write_task("nightly", schedule="*/30 * * * *", command="echo boom; exit 1",
                      title="Nightly import")
    tick(home, T0 - timedelta(minutes=1))
    tick(home, T0)
    [first] = http_sink.bodies()
    assert "Nightly import (nightly) failed" in first["title"]
    assert "exit 1" in first["message"] and "boom" in first["message"]
    tick(home, T0 + timedelta(minutes=30))  # collapsed: same task and kind within the hour
    assert len(http_sink.bodies()) == 1
    tick(home, T0 + timedelta(minutes=60))  # third failure in a row: suspended, forced alert
    assert "SUSPENDED" in titles(http_sink)[-1]
    assert "disabled_reason: auto_suspended" in path.read_text()
    assert incidents(home) == [("nightly", "suspended", "open", 1)]
    # a person fixes it and enables it again; the incident resolves, success says recovered
    write_task("nightly", schedule="*/30 * * * *", command="echo fine", title="Nightly import")
    tick(home, T0 + timedelta(minutes=75))
    assert incidents(home)[0][2] == "resolved"
    tick(home, T0 + timedelta(minutes=90))
    assert "recovered" in titles(http_sink)[-1]


def test_a_success_still_resolves_its_incident_and_sends_its_success_alert(
        home, write_task, http_sink):
    """Issue 27: after a success the alerts are skipped only when they would do nothing
    (store.quiet_success): an open incident of the task is still resolved, and a task with
    `notify_on: success` still has its alert; an outbox message still goes at the end."""
    setup_home(home, http_sink)
    write_task("plain", schedule="*/30 * * * *", command="true")
    write_task("loud", schedule="*/30 * * * *", command="true", notify_on="success")
    tick(home, T0 - timedelta(minutes=1))
    config, _ = load_config(home)
    from mdcron.state.store import state_store

    with state_store(config) as store:
        store.open_or_bump_incident("plain", "timeout", "slow", None, T0.timestamp() - 30)
    tick(home, T0)
    assert incidents(home) == [("plain", "timeout", "resolved", 1)]
    assert [t for t in titles(http_sink) if "loud" in t] != []
    assert not [t for t in titles(http_sink) if "plain" in t]


def test_timeout_alerts_and_opens_an_incident(home, write_task, http_sink):
    setup_home(home, http_sink, "kill_grace: 0.2\n")
    write_task("slow", schedule="0 10 * * *", command="sleep 30", timeout=1, notify_on="never")
    tick(home, T0)
    tick(home, T0.replace(hour=10))
    assert http_sink.bodies() == []  # notify_on: never silences even the timeout alert
    write_task("slow2", schedule="0 11 * * *", command="sleep 30", timeout=1)
    tick(home, T0.replace(hour=10, minute=30))
    tick(home, T0.replace(hour=11))
    assert any("slow2" in t and "timed out" in t for t in titles(http_sink))
    assert ("slow2", "timeout", "open", 1) in incidents(home)


def test_quiet_hours_hold_until_morning(home, write_task, http_sink):
    setup_home(home, http_sink)
    cfg = (home / "scheduler.yaml").read_text().replace(
        "  default: ops\n", "  default: ops\n  quiet_hours: \"22:00-07:00\"\n")
    (home / "scheduler.yaml").write_text("timezone: UTC\n" + cfg)
    write_task("night", schedule="0 23 * * *", command="exit 1")
    tick(home, T0.replace(hour=22, minute=30))
    tick(home, T0.replace(hour=23))
    assert http_sink.bodies() == []
    tick(home, (T0 + timedelta(days=1)).replace(hour=7, minute=1))
    assert any("night" in t for t in titles(http_sink))


def test_duplicate_ids_alert_at_most_hourly(home, write_task, http_sink, cli):
    setup_home(home, http_sink)
    write_task("twin", filename="a.md", command="true")
    write_task("twin", filename="b.md", command="true")
    for minute in range(3):
        out = cli("tick", "--now", (T0 + timedelta(minutes=minute)).isoformat())
        assert out.returncode == 2
    dup = [t for t in titles(http_sink) if "duplicate" in t.lower()]
    assert len(dup) == 1
    assert incidents(home) == [("*", "duplicate_id", "open", 3)]
    cli("tick", "--now", (T0 + timedelta(minutes=61)).isoformat())
    assert len([t for t in titles(http_sink) if "duplicate" in t.lower()]) == 2


def test_crashed_tick_alerts_and_the_next_tick_works(home, write_task, http_sink, cli):
    setup_home(home, http_sink)
    write_task("ok", schedule="0 10 * * *", command="true")
    assert cli("tick", "--now", T0.isoformat()).returncode == 0
    # a row left 'running' by a tick that is gone, and a locks folder that is not a folder
    db = sqlite3.connect(home / "state" / "mdcron.db")
    db.execute("INSERT INTO runs(task_id, scheduled_for, trigger, status, started_at, owner_pid)"
               " VALUES ('ok', 1, 'schedule', 'running', 1, 999999999)")
    db.commit()
    db.close()
    shutil.rmtree(home / "state" / "locks", ignore_errors=True)
    (home / "state" / "locks").write_text("not a folder")
    out = cli("tick", "--now", (T0 + timedelta(minutes=1)).isoformat())
    assert out.returncode == 1 and "tick crashed" in out.stderr
    assert any("tick crashed" in t for t in titles(http_sink))
    assert ("*", "tick_crashed", "open", 1) in incidents(home)
    (home / "state" / "locks").unlink()
    assert cli("tick", "--now", (T0 + timedelta(minutes=2)).isoformat()).returncode == 0


def gone_tick(home: Path, task_id: str) -> None:
    """A run left 'running' by a tick that is gone."""
    db = sqlite3.connect(home / "state" / "mdcron.db")
    db.execute("INSERT INTO runs(task_id, scheduled_for, trigger, status, started_at, owner_pid)"
               " VALUES (?, 1, 'schedule', 'running', 1, 999999999)", (task_id,))
    db.commit()
    db.close()


def test_incident_command_runs_for_each_way_an_incident_opens(home, write_task, http_sink, cli):
    """Issue 27: run/ lends alerts/ the incident runner; every caller that opens an incident
    (a tick's ladder, a run found crashed, duplicate ids, a crashed tick, `run`) passes it."""
    said = home / "incidents.txt"
    setup_home(home, http_sink, f"kill_grace: 0.2\nincident_command: 'echo"
                                f" \"$MDCRON_INCIDENT_KIND $MDCRON_TASK_ID\" >> {said}'\n")
    write_task("slow", schedule="0 10 * * *", command="sleep 30", timeout=1)
    write_task("byhand", schedule="0 0 1 1 *", command="sleep 30", timeout=1)
    assert cli("tick", "--now", T0.isoformat()).returncode == 0
    assert cli("tick", "--now", T0.replace(hour=10).isoformat()).returncode == 1
    gone_tick(home, "byhand")
    assert cli("tick", "--now", T0.replace(hour=10, minute=1).isoformat()).returncode == 0
    assert cli("run", "byhand").returncode == 1
    twin = write_task("slow", filename="twin.md", command="true")
    assert cli("tick", "--now", T0.replace(hour=10, minute=2).isoformat()).returncode == 2
    twin.unlink()
    shutil.rmtree(home / "state" / "locks", ignore_errors=True)
    (home / "state" / "locks").write_text("not a folder")
    gone_tick(home, "slow")  # its recovery looks in the locks folder: the tick crashes
    assert cli("tick", "--now", T0.replace(hour=10, minute=3).isoformat()).returncode == 1
    assert said.read_text().splitlines() == [
        "timeout slow", "crashed byhand", "timeout byhand", "duplicate_id *", "tick_crashed *"]


def test_prompt_task_runs_through_the_tick(home, write_task, http_sink, fake_claude):
    setup_home(home, http_sink)
    write_task("ask", schedule="0 10 * * *", run_as="claude",
               body="Summarise the day in one line.\n")
    fake_claude.text("All quiet today.")
    tick(home, T0, fake_claude.environ)
    [outcome] = tick(home, T0.replace(hour=10), fake_claude.environ).ladders
    assert outcome.final.ok and "All quiet today." in outcome.final.output_tail
    assert outcome.final.extra["output_tokens"] == 7
    assert "Summarise the day" in str(fake_claude.requests[0]["messages"])


def test_claude_heal_inside_the_ladder(home, write_task, http_sink, fake_claude):
    setup_home(home, http_sink)
    script = home / "job.sh"
    script.write_text("#!/bin/sh\nech hello\n")
    script.chmod(0o755)
    write_task("job", schedule="0 10 * * *", run_as="script", command="job.sh")
    fake_claude.tools(tool_use("replace_in_file", path="job.sh", old="ech hello",
                               new="echo hello"))
    fake_claude.tools(tool_use("finish", diagnosis="typo: ech"))
    tick(home, T0, fake_claude.environ)
    [o] = tick(home, T0.replace(hour=10), fake_claude.environ).ladders
    assert o.final.ok and [k for _, k, _ in o.steps] == ["run", "heal", "retry"]
    assert any("was healed" in t for t in titles(http_sink))
    hist = run_cli(home, "history", "--json").stdout
    assert '"kind": "heal"' in hist and "typo: ech" in hist


def test_comment_skip_through_the_tick(home, write_task, http_sink, fake_claude, cli):
    setup_home(home, http_sink)
    write_task("c", schedule="0 10 * * *", command=f"touch {home}/ran")
    assert cli("comment", "c", "please skip today, the server is down").returncode == 0
    fake_claude.tools(tool_use("decide", action="skip", reason="Skipping as asked."))
    tick(home, T0, fake_claude.environ)
    tick(home, T0.replace(hour=10), fake_claude.environ)
    assert not (home / "ran").exists()
    thread = cli("comments", "c").stdout
    assert "Skipping as asked." in thread and "[skip]" in thread


def test_show_and_history_carry_the_heal(home, write_task, http_sink, fake_claude, cli):
    test_claude_heal_inside_the_ladder(home, write_task, http_sink, fake_claude)
    shown = cli("show", "job")
    assert "typo: ech" in shown.stdout and "+echo hello" in shown.stdout
    assert "heal: typo: ech" in cli("history").stdout


def test_manual_run_alerts_like_a_scheduled_one(home, write_task, http_sink, cli):
    setup_home(home, http_sink)
    write_task("byhand", schedule="0 0 1 1 *", command="echo nope; exit 4")
    out = cli("run", "byhand")
    assert out.returncode == 1 and "exit 4" in out.stdout
    assert any("byhand" in t and "failed" in t for t in titles(http_sink))
    hist = cli("history", "--json").stdout
    assert '"trigger": "manual"' in hist


def test_heal_backups_age_out_with_the_runs(home, write_task, http_sink, fake_claude):
    from mdcron.selfheal.healer import RevertError, revert_heal
    from mdcron.state.store import Store

    setup_home(home, http_sink)
    (home / "scripts").mkdir()
    script = home / "scripts" / "job.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    write_task("job", schedule="0 10 * * *", run_as="script", command="scripts/job.sh")
    fake_claude.tools(tool_use("write_file", path="scripts/job.sh", content="#!/bin/sh\necho\n"))
    fake_claude.tools(tool_use("finish", diagnosis="the script exited 3; now it does not"))
    tick(home, T0, fake_claude.environ)
    tick(home, T0.replace(hour=10), fake_claude.environ)
    backups = home / "logs" / "heal-backups" / "job"
    [backup] = list(backups.iterdir())
    tick(home, T0.replace(hour=10) + timedelta(days=30), fake_claude.environ)
    assert backup.exists()  # within retention_days (90)
    tick(home, T0.replace(hour=10) + timedelta(days=91), fake_claude.environ)
    assert backup.exists()  # 61 days after the last tick: retention waits for one that agrees
    tick(home, T0.replace(hour=10) + timedelta(days=91, minutes=1), fake_claude.environ)
    assert not backup.exists() and not backups.exists()
    config, _ = load_config(home)
    with Store(config.db_path) as store:
        try:
            revert_heal(config, store, "job", now=(T0 + timedelta(days=91)).timestamp())
        except RevertError as exc:
            assert "is gone: heal backups are kept for retention_days (90)" in str(exc)
        else:
            raise AssertionError("reverted a heal whose backup is gone")
