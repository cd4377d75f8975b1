"""Chains (`schedule: after x`, `after: [a, b]`): real ticks as subprocesses (`tick --now`),
real SQLite, a real SIGKILL between an upstream's success and its downstream's start."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import SCHEDULER, run_cli

from mdcron.run.locks import TaskLock
from mdcron.run.resources import unit_path
from mdcron.settings.config import load_config

BEFORE = "2026-11-23T08:59:00+00:00"
NOW = "2026-11-23T09:00:00+00:00"
SLOT_0900 = 1795424400.0  # 2026-11-23 09:00 UTC


def runs(home: Path) -> list[tuple[str, float, str, str | None]]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    out = list(db.execute("SELECT task_id, scheduled_for, status, error FROM runs"
                          " WHERE kind = 'run' ORDER BY id"))
    db.close()
    return out


def tick(home: Path, now: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, "tick", "--now", now)


def test_chain_of_three_in_one_tick_with_the_upstreams_slot(home, write_task):
    write_task("extract", schedule="0 9 * * *", timezone="UTC", command="echo e")
    write_task("transform", schedule="after extract", command="echo t")
    write_task("load", schedule="after", after=["transform"], command="echo l")
    tick(home, BEFORE)
    done = tick(home, NOW)
    assert done.returncode == 0, done.stdout + done.stderr
    assert runs(home) == [("extract", SLOT_0900, "success", None),
                          ("transform", SLOT_0900, "success", None),
                          ("load", SLOT_0900, "success", None)]
    tick(home, "2026-11-23T09:01:00+00:00")  # nothing more: one run per upstream success
    assert len(runs(home)) == 3
    listed = {r["id"]: r for r in json.loads(run_cli(home, "list", "--json").stdout)}
    assert (listed["load"]["schedule"], listed["load"]["after"]) == ("after transform",
                                                                     ["transform"])
    assert listed["transform"]["schedule"] == "after extract"


def test_a_chain_survives_its_tick_killed_between_upstream_and_downstream(home, write_task):
    (home / "scheduler.yaml").write_text("resources: {gpu: 1}\ntimezone: UTC\n")
    write_task("extract", schedule="0 9 * * *", command="echo e")
    # transform waits for the gpu the test holds: the tick dies while it waits
    write_task("transform", schedule="after extract", uses=["gpu"], busy_wait="10m",
               command="echo t")
    write_task("report", schedule="after transform", command="echo r")
    tick(home, BEFORE)
    config, _ = load_config(home)
    gpu = TaskLock(unit_path(config, "gpu", 0))
    assert gpu.try_acquire()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    first = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                              "--now", NOW], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
    deadline = time.monotonic() + 30
    while not (home / "state" / "mdcron.db").exists() or not runs(home) or \
            runs(home)[0][2] != "success":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # the tick is now waiting for the gpu on transform's behalf
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    gpu.release()
    assert runs(home) == [("extract", SLOT_0900, "success", None)]
    done = tick(home, "2026-11-23T09:01:00+00:00")
    assert done.returncode == 0, done.stdout + done.stderr
    assert runs(home) == [("extract", SLOT_0900, "success", None),
                          ("transform", SLOT_0900, "success", None),
                          ("report", SLOT_0900, "success", None)]


def test_failed_upstream_skips_the_downstream_with_the_reason(home, write_task):
    write_task("extract", schedule="0 9 * * *", timezone="UTC", command="exit 3")
    write_task("transform", schedule="after extract", command="echo t")
    tick(home, BEFORE)
    assert tick(home, NOW).returncode == 1
    assert runs(home)[1] == ("transform", SLOT_0900, "skipped",
                             "upstream extract failed at 09:00 (exit 3)")
    why = run_cli(home, "why", "transform").stdout
    assert "runs after extract" in why
    assert "waiting for extract: its last run (2026-11-23 09:00 UTC) failed" in why


def test_diamond_runs_the_join_once_per_window(home, write_task):
    write_task("a", schedule="0 9 * * *", timezone="UTC", command="true")
    write_task("b", schedule="after a", command="true")
    write_task("c", schedule="after a", command="true")
    write_task("d", schedule="after", after=["b", "c"], timezone="UTC", command="true")
    tick(home, BEFORE)
    assert tick(home, NOW).returncode == 0
    assert [r[0] for r in runs(home)].count("d") == 1
    tick(home, "2026-11-23T09:05:00+00:00")
    assert [r[0] for r in runs(home)].count("d") == 1
    tick(home, "2026-11-24T09:00:00+00:00")  # the next day's window
    assert [r[0] for r in runs(home)].count("d") == 2
    assert [r[2] for r in runs(home)] == ["success"] * 8


def test_a_cycle_is_refused_naming_every_file(home, write_task):
    write_task("a", schedule="after c", filename="first.md", command="true")
    write_task("b", schedule="after a", filename="second.md", command="true")
    write_task("c", schedule="after b", filename="third.md", command="true")
    write_task("ok", schedule="* * * * *", command="true")
    done = run_cli(home, "validate")
    assert done.returncode != 0
    cycle = [line for line in done.stderr.splitlines() if "chain cycle" in line]
    assert len(cycle) == 3
    for line in cycle:
        assert "first.md, " in line or "files: first.md" in line
        for name in ("first.md", "second.md", "third.md"):
            assert name in line
    ticked = tick(home, NOW)
    assert ticked.returncode == 1 and "chain cycle" in ticked.stderr + ticked.stdout
    assert {r[0] for r in runs(home)} <= {"ok"}


def test_unknown_upstream_and_disabled_upstream(home, write_task):
    write_task("extract", schedule="0 9 * * *", enabled=False, command="true")
    write_task("t1", schedule="after extrct", command="true")
    write_task("t2", schedule="after extract", command="true")
    out = run_cli(home, "validate")
    assert "after: unknown upstream task 'extrct'; did you mean 'extract'?" in out.stderr
    assert "upstream 'extract' (extract.md) is disabled" in out.stdout


def test_run_triggers_the_chain_unless_no_chain(home, write_task):
    write_task("extract", schedule="0 9 * * *", timezone="UTC", command="echo e")
    write_task("transform", schedule="after extract", command="echo t")
    done = run_cli(home, "run", "extract", "--no-chain")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r[0] for r in runs(home)] == ["extract"]
    # the next tick does not start it either: one at the real minute, unless that is 09:00
    # UTC, when extract itself is due (and its chain with it)
    now = datetime.now(UTC)
    at = now - timedelta(minutes=1) if (now.hour, now.minute) == (9, 0) else now
    run_cli(home, "tick", "--now", at.replace(second=0, microsecond=0).isoformat())
    assert [r[0] for r in runs(home)] == ["extract"]
    done = run_cli(home, "run", "extract")
    assert done.returncode == 0 and "transform: success" in done.stdout
    rows = runs(home)
    assert [r[0] for r in rows] == ["extract", "extract", "transform"]
    assert rows[2][1] == rows[1][1]  # the downstream's slot is the upstream's


def test_next_of_a_downstream(home, write_task):
    write_task("extract", schedule="30 6 * * *", timezone="UTC", command="true")
    write_task("transform", schedule="after extract", command="true")
    out = run_cli(home, "next", "transform").stdout
    assert out.splitlines()[0] == "after extract"
    assert "extract next fires " in out and "06:30 UTC" in out


def test_chain_keys_are_validated(home, write_task):
    write_task("x", schedule="after", command="true")
    write_task("y", schedule="0 9 * * *", after=["x"], command="true")
    write_task("z", schedule="after z", command="true")
    err = run_cli(home, "validate").stderr
    assert 'schedule: "after" needs the upstream task' in err
    assert "after: only works with schedule: after" in err
    assert "after: a task cannot run after itself" in err


def test_a_skipped_downstream_alerts_only_with_notify_on_always(home, write_task, http_sink):
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n"
        "  default: ops\ntimezone: UTC\n")
    write_task("extract", schedule="0 9 * * *", command="exit 3", notify_on="never")
    write_task("quiet", schedule="after extract", command="true")  # notify_on: failure
    write_task("loud", schedule="after extract", command="true", notify_on="always")
    tick(home, BEFORE)
    tick(home, NOW)
    titles = [b.get("title", "") for b in http_sink.bodies() if isinstance(b, dict)]
    assert titles == ["mdcron: loud (loud) skipped"]
    [body] = [b for b in http_sink.bodies() if isinstance(b, dict)]
    assert "upstream extract failed at 09:00 (exit 3)" in body["message"]


def test_run_of_a_chain_head_prints_each_run_in_order_and_notes_who_started_them(
        home, write_task, http_sink):
    """Issue 25: `run extract` prints extract's run, then each downstream's, with run numbers;
    the downstream rows say the manual run started them; a failing downstream alerts once."""
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n  default: ops\n")
    write_task("extract", schedule="0 9 * * *", timezone="UTC", command="echo e")
    write_task("transform", schedule="after extract", command="echo t")
    write_task("load", schedule="after transform", command="exit 4", self_heal=False)
    done = run_cli(home, "run", "extract")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("run ")]
    assert [line.split(": ")[1] for line in lines] == ["extract", "transform", "load"], done.stdout
    assert [line.split(":")[0] for line in lines] == ["run 1", "run 2", "run 3"], done.stdout
    history = {r["task_id"]: r for r in json.loads(run_cli(home, "history", "--json").stdout)}
    assert history["extract"]["note"] is None
    for task_id in ("transform", "load"):
        assert history[task_id]["note"] == "started by manual run 1", history[task_id]
    assert history["load"]["status"] == "failed"
    alerts = [b for b in http_sink.bodies() if "load" in json.dumps(b)]
    assert len(alerts) == 1, alerts
