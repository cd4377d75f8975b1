"""Issue 26 item 3: `overlap:` skip | queue | replace | allow, with the previous run a real tick
in its own process (the CLI, `tick --now`) holding the task's lock, and the next slot's tick
in this process at an injected instant."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import SCHEDULER, render_task, run_cli
from test_ladder import query, tick

T0 = datetime(2026, 11, 23, 9, 58, tzinfo=UTC)  # first seen: no fire in this minute
FIRST = T0.replace(hour=10, minute=0)
SECOND = FIRST + timedelta(minutes=5)
# the first slot's run waits for `go`; any later run (the file `second` exists) ends at once
COMMAND = ("if [ -e second ]; then exit 0; fi; touch started;"
           " while [ ! -e go ]; do sleep 0.1; done")


def start_first(home: Path, write_task, **keys: object) -> subprocess.Popen:
    (home / "work").mkdir(exist_ok=True)
    write_task("job", schedule="*/5 * * * *", cwd=str(home / "work"), command=COMMAND, **keys)
    tick(home, T0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    proc = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                             "--now", FIRST.isoformat()], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: (home / "work" / "started").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()[0]
    (home / "work" / "second").touch()
    return proc


def wait_for(condition, seconds: float = 60.0) -> None:
    give_up = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < give_up, "timed out"
        time.sleep(0.05)


def finish(proc: subprocess.Popen, home: Path) -> str:
    (home / "work" / "go").touch()
    out, _ = proc.communicate(timeout=60)
    return out


def slots(home: Path) -> list[tuple[str, int, str, str]]:
    return [(datetime.fromtimestamp(r[0], UTC).strftime("%H:%M"), r[1], r[2], r[3] or "")
            for r in query(home, "SELECT scheduled_for, attempt, status, error FROM runs"
                                 " WHERE task_id = 'job' ORDER BY id")]


def test_queue_runs_the_slot_once_the_previous_run_ended(home, write_task):
    proc = start_first(home, write_task, overlap="queue")
    [outcome] = tick(home, SECOND).ladders
    assert outcome.released and "runs once that one ends" in outcome.reason
    assert [s[:3] for s in slots(home)] == [("10:00", 1, "running")]  # nothing recorded
    assert tick(home, SECOND + timedelta(minutes=1)).ladders[0].released  # still running
    finish(proc, home)
    # the real CLI: its idle check must see the slot owed again
    out = run_cli(home, "tick", "--now", (SECOND + timedelta(minutes=2)).isoformat())
    assert out.returncode == 0, out
    assert [s[:3] for s in slots(home)] == [("10:00", 1, "success"), ("10:05", 1, "success")]


def test_queue_gives_up_a_slot_past_the_catchup_window(home, write_task):
    proc = start_first(home, write_task, overlap="queue", catchup="2m")
    assert tick(home, SECOND).ladders[0].released
    finish(proc, home)
    report = tick(home, SECOND + timedelta(minutes=3))  # 10:08: 10:05 is 3 min late
    assert report.ladders == []
    [first, second] = slots(home)
    assert second[:3] == ("10:05", 1, "skipped") and "catch" in second[3]


def test_replace_stops_the_previous_run_and_starts(home, write_task):
    proc = start_first(home, write_task, overlap="replace", retry=1)
    [outcome] = tick(home, SECOND).ladders
    assert outcome.final.ok
    out, _ = proc.communicate(timeout=60)  # the old tick ends on its own, its run stopped
    assert "replaced by slot 2026-11-23 10:05 UTC" in out, out
    rows = slots(home)
    assert [r[:3] for r in rows] == [("10:00", 1, "skipped"), ("10:05", 1, "success")], rows
    assert rows[0][3].startswith("replaced by slot 2026-11-23 10:05 UTC: stopped")
    assert not (home / "work" / "go").exists()  # it never ended by itself: it was stopped
    assert query(home, "SELECT count(*) FROM meta WHERE key LIKE 'replaced:%'") == [(0,)]


def test_allow_runs_beside_the_previous_run_under_its_own_lock(home, write_task):
    proc = start_first(home, write_task, overlap="allow")
    [outcome] = tick(home, SECOND).ladders
    assert outcome.final.ok
    assert [s[:3] for s in slots(home)] == [("10:00", 1, "running"), ("10:05", 1, "success")]
    finish(proc, home)
    assert [s[:3] for s in slots(home)] == [("10:00", 1, "success"), ("10:05", 1, "success")]
    locks = sorted(p.name for p in (home / "state" / "locks").glob("job*"))
    assert locks == ["job.lock"]  # the second run's own lock file went with it


def host_home(root: Path, name: str, url: str, work: Path) -> Path:
    home = root / name
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text(f"host: {name}\nstate_url: '{url}'\nlease_seconds: 3\n"
                                         "kill_grace: 1\n", encoding="utf-8")
    command = COMMAND.replace("second", f"{work}/second").replace("started", f"{work}/started")
    (home / "tasks" / "job.md").write_text(render_task(
        "job", schedule="*/5 * * * *", overlap="replace",
        command=command.replace(" go ", f" {work}/go ")), encoding="utf-8")
    return home


def test_replace_across_hosts_asks_the_holder_to_stop(tmp_path, pg_url):
    """Host a runs the 10:00 slot; host b's 10:05 slot finds a's lease: it asks a (through the
    state) and waits; a's lease renewal stops the run and ends its ladder; b runs 10:05."""
    work = tmp_path / "work"
    work.mkdir()
    a, b = (host_home(tmp_path, name, pg_url, work) for name in ("a", "b"))
    for home in (a, b):
        assert run_cli(home, "tick", "--now", T0.isoformat()).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    proc = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(a), "tick", "--now",
                             FIRST.isoformat()], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: (work / "started").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()[0]
    (work / "second").touch()
    out = run_cli(b, "tick", "--now", SECOND.isoformat())
    assert "asked to stop it" in out.stdout + out.stderr, out
    a_out, _ = proc.communicate(timeout=60)  # a's renewal thread stopped its run
    assert "replaced by slot 2026-11-23 10:05 UTC" in a_out, a_out
    out = run_cli(b, "tick", "--now", (SECOND + timedelta(minutes=1)).isoformat())
    assert out.returncode == 0, out
    rows = [(r[0], r[1], r[2]) for r in query(b, "SELECT host, status, error FROM runs"
                                                 " WHERE task_id = 'job' ORDER BY id")]
    assert [r[:2] for r in rows] == [("a", "skipped"), ("b", "success")], rows
    assert rows[0][2].startswith("replaced by slot 2026-11-23 10:05 UTC: stopped")
    assert not (work / "go").exists()


def test_show_and_why_say_the_retries_and_the_overlap_policy(home, write_task, cli):
    write_task("job", schedule="0 10 * * *", command="true", retry=3,
               retry_delay="exponential 10s..5m", overlap="queue")
    out = cli("show", "job")
    assert out.returncode == 0, out.stderr
    assert "3 rerun(s) after 10s, 20s, 40s" in out.stdout
    assert "queue: a slot that finds the previous run still going runs once it ends" in (
        " ".join(out.stdout.split()))
    out = cli("why", "job", "--at", "2026-11-23T09:30:00Z")
    text = " ".join(out.stdout.split())
    assert "on failure: 3 rerun(s) after 10s, 20s, 40s" in text
    assert "overlap: queue:" in text


def test_allow_a_run_whose_tick_died_is_recovered_through_its_own_lock(home, write_task):
    """Two allowed runs at once; the second's tick and task are killed (-9): the next tick finds
    the row through the run's own lock (the task's lock is the first run's), closes it
    `crashed` and removes that lock file."""
    import json
    import signal

    work = home / "work"
    work.mkdir()
    write_task("job", schedule="*/5 * * * *", cwd=str(work), overlap="allow", command=(
        "if [ -e started ]; then touch started2; fi; touch started;"
        " while [ ! -e go ]; do sleep 0.1; done"))
    tick(home, T0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    procs = []
    for at, mark in ((FIRST, "started"), (SECOND, "started2")):
        procs.append(subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home),
                                       "tick", "--now", at.isoformat()], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda mark=mark: (work / mark).exists())
    [own] = (home / "state" / "locks").glob("job@*.lock")
    wait_for(lambda: json.loads(own.read_text() or "{}").get("pgid") is not None)
    info = json.loads(own.read_text())
    procs[1].kill()
    procs[1].wait(timeout=30)
    os.killpg(info["pgid"], signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{info['pgid']}"))
    report = tick(home, SECOND + timedelta(minutes=1))
    assert [(r.run_id, r.status.value) for r in report.recovered] == [(info["run_id"], "crashed")]
    assert not own.exists()
    (work / "go").touch()
    procs[0].wait(timeout=60)
    assert [s[:3] for s in slots(home)] == [("10:00", 1, "success"), ("10:05", 1, "crashed")]
