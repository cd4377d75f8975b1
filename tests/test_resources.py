"""Shared resources (`uses:`): real concurrent ticks, real flocks, real SIGKILLs."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SCHEDULER, overdue_lock, run_cli

from mdcron.run.locks import TaskLock
from mdcron.run.resources import holders, unit_path
from mdcron.settings.config import load_config

NOW = "2026-11-23T09:00:00+00:00"
BEFORE = "2026-11-23T08:59:00+00:00"


def statuses(home: Path) -> list[tuple[str, str, str | None]]:
    db = sqlite3.connect(home / "state" / "mdcron.db")
    out = list(db.execute("SELECT task_id, status, error FROM runs ORDER BY task_id, id"))
    db.close()
    return out


def tick_proc(home: Path, now: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    return subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                             "--now", now], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_ten_concurrent_ticks_never_exceed_capacity_and_lose_nothing(home, write_task):
    (home / "scheduler.yaml").write_text("resources: {gpu: 2}\ntimezone: UTC\n")
    log = home / "spans.log"
    for i in range(20):
        write_task(f"job{i:02d}", schedule="0 9 * * *", uses=["gpu"],
                   command=f'echo "$(date +%s.%N) start job{i:02d}" >> {log}; sleep 0.3;'
                           f' echo "$(date +%s.%N) end job{i:02d}" >> {log}')
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0  # first seen
    procs = [tick_proc(home, NOW) for _ in range(10)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out + err
    events = []
    for line in log.read_text().splitlines():
        stamp, what, job = line.split()
        events.append((float(stamp), 0 if what == "end" else 1, job))
    events.sort()  # an end at the same instant as a start counts first
    running, peak = 0, 0
    for _, starting, _job in events:
        running += 1 if starting else -1
        peak = max(peak, running)
    assert peak == 2  # capacity reached, never passed
    started = sorted(job for _, s, job in events if s)
    assert started == [f"job{i:02d}" for i in range(20)]  # each ran exactly once
    assert [s for _, s, _ in statuses(home)] == ["success"] * 20
    config, _ = load_config(home)
    assert holders(config) == []  # every unit given back


def _recorded(config, pidfile: Path) -> bool:
    """The task wrote its pid and the tick has recorded that process group in the unit it holds
    (the task's lock is written just before). The task may write its pid before the tick gets
    that far: a tick killed in between leaves a run no record names, which the next tick
    cannot end."""
    text = pidfile.read_text().strip() if pidfile.exists() else ""
    held = holders(config)
    return bool(text) and bool(held) and held[0].info is not None and held[0].info.pgid == int(text)


def start_holding(home: Path, pidfile: Path):
    """A tick at NOW whose task writes its pid to `pidfile`, once the unit's record names it."""
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    tick = tick_proc(home, NOW)
    config, _ = load_config(home)
    deadline = time.monotonic() + 60
    while not _recorded(config, pidfile):
        assert time.monotonic() < deadline, "the task never started (or was never recorded)"
        time.sleep(0.05)
    return tick, config


def test_holder_death_frees_the_unit(home, write_task):
    (home / "scheduler.yaml").write_text("resources: {gpu: 1}\ntimezone: UTC\n")
    pidfile = home / "task.pid"
    write_task("hog", schedule="0 9 * * *", uses=["gpu"], timeout="10m",
               command=f"echo $$ > {pidfile}; exec sleep 120")
    tick, config = start_holding(home, pidfile)
    [held] = holders(config)
    assert (held.resource, held.info.task_id) == ("gpu", "hog")
    why = run_cli(home, "why", "hog", "--at", NOW).stdout
    assert "resource gpu: 1 of 1 unit(s) held by hog (run" in why
    listed = json.loads(run_cli(home, "list", "--json").stdout)
    assert [r["holds"] for r in listed] == [["gpu"]]
    os.kill(tick.pid, signal.SIGKILL)
    tick.communicate()
    # the tick is gone; its task still runs and still holds the unit
    assert [h.resource for h in holders(config)] == ["gpu"]
    task_pid = int(pidfile.read_text())
    os.killpg(task_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while holders(config):
        assert time.monotonic() < deadline, "the unit stayed held after its holder died"
        time.sleep(0.05)
    # and the next user gets it
    lock = TaskLock(unit_path(config, "gpu", 0))
    assert lock.try_acquire()
    lock.release()


@pytest.mark.parametrize("on_busy", ["run", "skip", "wait"])
def test_on_busy(home, write_task, on_busy):
    (home / "scheduler.yaml").write_text("resources: {ollama: 1}\ntimezone: UTC\n")
    seen = home / "seen"
    write_task("summarise", schedule="0 9 * * *", uses=["ollama"], on_busy=on_busy,
               busy_wait="1s", command=f'echo "busy=$MDCRON_BUSY_RESOURCES" > {seen}')
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    config, _ = load_config(home)
    other = TaskLock(unit_path(config, "ollama", 0))  # someone else holds the one unit
    assert other.try_acquire()
    try:
        done = run_cli(home, "tick", "--now", NOW)
    finally:
        other.release()
    assert done.returncode == 0, done.stdout + done.stderr
    rows = statuses(home)
    if on_busy == "run":
        assert seen.read_text() == "busy=ollama\n" and rows[-1][1] == "success"
    elif on_busy == "skip":
        assert not seen.exists() and rows == [("summarise", "skipped", "resource ollama busy")]
    else:  # waited 1 s, left the slot for the next tick, which runs it
        assert not seen.exists() and rows == []
        assert "the slot waits for the next tick" in done.stdout
        again = run_cli(home, "tick", "--now", "2026-11-23T09:00:30+00:00")
        assert again.returncode == 0 and seen.read_text() == "busy=\n"
        assert statuses(home) == [("summarise", "success", None)]


def test_wait_gives_up_as_skipped_once_catchup_runs_out(home, write_task):
    (home / "scheduler.yaml").write_text("resources: {ollama: 1}\ntimezone: UTC\n")
    write_task("summarise", schedule="0 9 * * *", uses=["ollama"], busy_wait="0s",
               catchup="5m", command="true")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    config, _ = load_config(home)
    other = TaskLock(unit_path(config, "ollama", 0))
    assert other.try_acquire()
    try:
        assert run_cli(home, "tick", "--now", NOW).returncode == 0
        assert statuses(home) == []  # pending
        assert run_cli(home, "tick", "--now", "2026-11-23T09:03:00+00:00").returncode == 0
        assert statuses(home) == []  # still pending: 09:04 may still run it
        assert run_cli(home, "tick", "--now", "2026-11-23T09:04:00+00:00").returncode == 0
    finally:
        other.release()
    assert statuses(home) == [("summarise", "skipped", "resource ollama busy")]


def test_uses_an_unknown_resource_is_an_error_with_a_suggestion(home, write_task):
    (home / "scheduler.yaml").write_text("resources: {ollama: 1}\n")
    write_task("t", uses=["olama"], command="true")
    done = run_cli(home, "validate")
    assert done.returncode != 0
    assert "uses: unknown resource 'olama'; did you mean 'ollama'?" in done.stderr


def test_a_stale_holder_killed_by_the_next_tick_frees_the_unit(home, write_task):
    (home / "scheduler.yaml").write_text("resources: {gpu: 1}\ntimezone: UTC\n")
    pidfile = home / "task.pid"
    write_task("hog", schedule="0 9 * * *", uses=["gpu"], timeout="1m",
               command=f"echo $$ > {pidfile}; exec sleep 120")
    write_task("next", schedule="5 9 * * *", uses=["gpu"], on_busy="skip", command="true")
    tick, config = start_holding(home, pidfile)
    os.kill(tick.pid, signal.SIGKILL)  # the task lives on
    tick.communicate()
    # only now: a live tick may still rewrite the record (it did, once in ~14 full runs)
    overdue_lock(home, "hog")  # past its deadline + 60 s on the monotonic clock it records
    done = run_cli(home, "tick", "--now", "2026-11-23T09:05:00+00:00")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert holders(config) == []
    rows = statuses(home)
    assert ("hog", "timeout") in [(t, s) for t, s, _ in rows]
    assert ("next", "success", None) in rows  # the freed unit went to the next task at once
