"""`scheduler.py daemon`: timing decisions with a scripted clock (fast), and the real daemon as
a subprocess: one per home, SIGTERM with a grace, reaping as PID 1, a few real minutes (slow)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import SCHEDULER, run_cli

from mdcron.cli.daemon import format_line
from mdcron.cli.daemon_clock import (
    JUMP,
    MAX_NAP,
    PAST_BOUNDARY,
    Planner,
    minute_of,
    nap,
)

T0 = 1_800_000_000.0 - (1_800_000_000.0 % 60)  # a minute boundary


# --------------------------------------------------------------------- scripted clock


def drive(readings: list[tuple[float, float]]) -> list[tuple[int, str]]:
    """Feed (wall, monotonic) readings to a Planner; the ticks it starts (minute, reason)."""
    planner = Planner()
    return [(s.minute, s.reason) for s in (planner.observe(w, m) for w, m in readings) if s.tick]


def test_one_tick_per_minute_at_the_boundary():
    readings = [(T0 + 5 + i * 0.5, 100 + i * 0.5) for i in range(400)]  # 200 s, 2 looks/s
    ticks = drive(readings)
    assert ticks == [(minute_of(T0), "start"), (minute_of(T0) + 1, "minute"),
                     (minute_of(T0) + 2, "minute"), (minute_of(T0) + 3, "minute")]


def test_the_wait_ends_just_after_the_boundary_and_never_exceeds_a_second():
    assert nap(T0 + 59.5) == pytest.approx(0.5 + PAST_BOUNDARY)
    assert PAST_BOUNDARY <= 0.001  # issue 27: the held tick's go is written this late
    assert nap(T0 + 10) == MAX_NAP == 1.0
    wall = T0 + 59.9995
    assert minute_of(wall + nap(wall)) == minute_of(T0) + 1


def test_a_forward_step_ticks_at_once_and_once():
    readings = [(T0 + 10, 0.0), (T0 + 11, 1.0),
                (T0 + 3600 + 12, 2.0),  # resumed an hour later (monotonic stood still)
                (T0 + 3600 + 13, 3.0), (T0 + 3600 + 14, 4.0)]
    planner = Planner()
    steps = [planner.observe(w, m) for w, m in readings]
    assert [s.tick for s in steps] == [True, False, True, False, False]
    assert steps[2].reason == "clock step forward" and steps[2].jump == pytest.approx(3600)


def test_a_backward_step_ticks_for_the_new_minute_and_small_drift_is_no_step():
    readings = [(T0 + 50, 0.0), (T0 + 61, 11.0),  # 12:01
                (T0 + 5, 12.0),  # stepped back to 12:00:05
                (T0 + 6, 13.0 + JUMP / 2)]  # drift below JUMP: not a step
    planner = Planner()
    steps = [planner.observe(w, m) for w, m in readings]
    assert [s.tick for s in steps] == [True, True, True, False]
    assert steps[2].reason == "clock step backwards" and steps[2].jump == pytest.approx(-57)
    assert steps[3].jump == 0.0


def test_a_backward_step_never_runs_a_slot_twice(home, write_task):
    """The daemon ticks again after a step back; the claims keep each slot single."""
    write_task("every", command="true")
    for when in ("2026-12-01T12:00:02Z", "2026-12-01T12:01:01Z",
                 "2026-12-01T12:00:30Z",  # the clock stepped back into 12:00
                 "2026-12-01T12:01:40Z"):
        out = run_cli(home, "tick", "--now", when)
        assert out.returncode == 0, out.stderr
    slots = [r[0] for r in _runs(home)]
    assert len(slots) == 2 and len(set(slots)) == 2, slots


def test_log_lines_text_and_json():
    text = format_line("text", T0, "tick started", pid=7, late="0.004s")
    assert text.endswith("daemon: tick started (pid=7 late=0.004s)") and "\n" not in text
    data = json.loads(format_line("json", T0, "tick started", pid=7))
    assert data["event"] == "tick started" and data["pid"] == 7 and data["source"] == "daemon"


# --------------------------------------------------------------------- the real daemon


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}


def start_daemon(home: Path, *extra: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, sys.executable, str(SCHEDULER), "daemon", "--home", str(home),
         "--log-format", "json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())


def _runs(home: Path) -> list[tuple]:
    db = home / "state" / "mdcron.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT scheduled_for, status, exit_code, error, task_id FROM runs"
                           " ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def wait_for(predicate, seconds: float, what: str):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 30) -> str:
    if proc.poll() is None:
        proc.send_signal(sig)
    out, _ = proc.communicate(timeout=timeout)
    return out


def events(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_a_second_daemon_names_the_holder_and_exits_2(home):
    first = start_daemon(home)
    try:
        wait_for(lambda: (home / "state" / "daemon.lock").read_text(encoding="utf-8")
                 if (home / "state" / "daemon.lock").exists() else "", 10, "the lock")
        second = run_cli(home, "daemon")
        assert second.returncode == 2
        assert f"pid {first.pid}" in second.stderr and "daemon.lock" in second.stderr
    finally:
        out = stop(first)
    assert first.returncode == 0, out
    names = [e["event"] for e in events(out)]
    assert names[0] == "started" and "stopping" in names and names[-1] == "stopped", out


def test_sigterm_gives_running_tasks_their_grace_then_kills_and_records(home, write_task):
    # quick has 1 s of its command left at the SIGTERM: a 5 s grace leaves a loaded machine 4 s
    # to finish and record it (with 2 s, 1 s of slack)
    (home / "scheduler.yaml").write_text("stop_grace: 5s\nkill_grace: 1s\n")
    write_task("quick", command=f"touch {home}/quick.in; sleep 1; echo done")
    write_task("stuck", command=f"touch {home}/stuck.in; sleep 60", timeout=300)
    proc = start_daemon(home)
    try:
        wait_for(lambda: len(_runs(home)) == 2, 30, "both runs to start")
        wait_for(lambda: (home / "quick.in").exists() and (home / "stuck.in").exists(), 30,
                 "both tasks inside their commands")
        started = time.monotonic()
        out = stop(proc)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert 5.0 <= took < 30.0, (took, out)  # the grace, then kill_grace: not stuck's 60 s
    by_task = {r[4]: r for r in _runs(home)}
    assert by_task["quick"][1] == "success"  # finished within the grace
    assert by_task["stuck"][1:4:2] == ("crashed", "daemon stopped"), by_task["stuck"]
    names = [e["event"] for e in events(out)]
    assert {"tick killed", "task killed", "run recorded crashed"} <= set(names), out
    gone = subprocess.run(["pgrep", "-f", "sleep 60"], capture_output=True, text=True)
    assert str(home) not in gone.stdout  # nothing left behind (pgrep matches by command only)


def _unshare() -> str:
    tool = shutil.which("unshare")
    if tool is None or os.geteuid() != 0:
        pytest.skip("needs `unshare` and root to run the daemon as PID 1 in a new PID namespace")
    probe = subprocess.run([tool, "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare --pid --fork --mount-proc does not work here: {probe.stderr}")
    return tool


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of the processes whose parent is `pid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append((int(name), fields[0]))
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_as_pid_1_a_failing_job_is_recorded_failed_and_orphans_are_reaped(home, write_task):
    tool = _unshare()
    # exits 3, leaving an orphan that escapes its group and is re-parented to PID 1 (the daemon)
    write_task("fails", command="(setsid sleep 0.5 >/dev/null 2>&1 &); exit 3")
    proc = start_daemon(home, prefix=(tool, "--pid", "--fork", "--mount-proc"))
    failure = None
    try:
        done = wait_for(lambda: [r for r in _runs(home) if r[1] != "running"], 30, "the run")
        assert done[0][1:3] == ("failed", 3), done
        daemon_pid = wait_for(lambda: [p for p, _ in _children(proc.pid)], 5, "the daemon")[0]
        # the orphan's sleep ends (0.5 s), and the daemon must reap it: wait until no child of
        # the daemon is a sleep or a zombie (a daemon that never reaps fails here)
        wait_for(lambda: not [p for p, state in _children(daemon_pid)
                              if state == "Z" or _comm(p) == "sleep"], 30, "the orphan reaped")
    except AssertionError as exc:
        failure = exc
    finally:
        os.kill(wait_for(lambda: [p for p, _ in _children(proc.pid)], 5, "the daemon")[0],
                signal.SIGTERM)
        out = stop(proc, sig=0)
    if failure is not None:  # what the daemon and its ticks said, and the runs, to go by
        raise AssertionError(f"{failure}; runs: {_runs(home)}; daemon said:\n{out}")
    log = events(out)
    assert log[0]["event"] == "started" and log[0]["pid1"] is True, out
    assert "reaped orphan" in [e["event"] for e in log], out


@pytest.mark.slow
def test_a_real_minute_tick_starts_within_a_second(home, write_task):
    """One real minute boundary (at most 75 s, ~30 s on average; CI's time budget pays for
    one, and for a second when the first was late): the tick starts within 1 s of its minute
    and runs the minute's slot. The cadence over many minutes is the pure timing's, tested
    above with injected time."""
    write_task("every", command="true")
    proc = start_daemon(home)
    seen: list[dict] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 135
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("{"):
                event = json.loads(line)
                if event["event"] == "tick started" and event["reason"] == "minute":
                    seen.append(event)
                    # a second boundary only when the first was late: a loaded machine may
                    # stall the daemon once; one late at every boundary fails
                    if float(event["late"].rstrip("s")) < 1.0 or len(seen) == 2:
                        break
    finally:
        stop(proc)
    assert seen and float(seen[-1]["late"].rstrip("s")) < 1.0, seen
    slots = {r[0] for r in _runs(home) if r[1] == "success"}
    for event in seen:  # each boundary's tick ran that minute's slot
        minute = datetime.strptime(event["minute"], "%Y-%m-%dT%H:%MZ").replace(tzinfo=UTC)
        assert minute.timestamp() in slots, (event, _runs(home))


def _doctor(home: Path, tmp_path: Path) -> dict[str, dict]:
    bin_dir = tmp_path / "bin"  # a crontab that lists nothing: the daemon is the only ticker
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "crontab").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "crontab").chmod(0o755)
    out = run_cli(home, "doctor", "--json", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    return {c["check"]: c for c in json.loads(out.stdout)}


def _lock_holder(home: Path) -> dict:
    """The lock's text as the daemon wrote it ({} while absent, empty or mid-write)."""
    try:
        info = json.loads((home / "state" / "daemon.lock").read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def test_doctor_knows_the_daemon(home, tmp_path):
    assert "daemon" not in _doctor(home, tmp_path)  # never ran: only the crontab is judged
    proc = start_daemon(home)
    try:
        wait_for(lambda: _lock_holder(home).get("last_tick"), 30, "a tick")
        found = _doctor(home, tmp_path)
        assert found["daemon"]["status"] == "ok" and f"pid {proc.pid}" in found["daemon"]["detail"]
        assert "last tick" in found["daemon"]["detail"]
        assert found["crontab"]["status"] == "ok" and "daemon" in found["crontab"]["detail"]
        proc.kill()  # -9: the lock's text stays, naming a process that is gone
        proc.communicate(timeout=10)
        found = _doctor(home, tmp_path)
        assert found["daemon"]["status"] == "fail"
        assert "without stopping" in found["daemon"]["detail"]
        assert found["crontab"]["status"] == "fail"
    finally:
        if proc.poll() is None:
            stop(proc)
    proc = start_daemon(home)
    # the killed daemon's text is still there and its numbers may hold the new pid's digits:
    # wait for the new daemon to name itself as the holder
    wait_for(lambda: _lock_holder(home).get("pid") == proc.pid, 30, "the new daemon's lock")
    stop(proc)
    assert "daemon" not in _doctor(home, tmp_path)  # a clean stop leaves nothing to report


def test_sighup_reloads_the_config_and_a_second_sigterm_ends_the_grace(home, write_task):
    config = home / "scheduler.yaml"
    config.write_text("stop_grace: 1s\n")
    write_task("stuck", command="sleep 60", timeout=300)
    proc = start_daemon(home)
    assert proc.stdout is not None

    def next_event(name: str) -> dict:
        for line in proc.stdout:
            if line.startswith("{") and json.loads(line)["event"] == name:
                return json.loads(line)
        raise AssertionError(f"no {name!r} event")

    try:
        next_event("tick started")
        wait_for(lambda: [r for r in _runs(home) if r[1] == "running"], 20, "the run")
        config.write_text("stop_grace: 120s\n")
        proc.send_signal(signal.SIGHUP)
        assert next_event("config reloaded")["stop_grace"] == "120s"
        config.write_text("stop_grace: [\n")
        proc.send_signal(signal.SIGHUP)
        assert "scheduler.yaml" in next_event("config not reloaded")["error"]
        proc.send_signal(signal.SIGTERM)
        assert next_event("stopping")["grace"] == "120s"  # the good config stayed in force
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # impatient: end the grace now
        out = stop(proc, sig=0)
        assert time.monotonic() - started < 15, out
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert [r[1:4:2] for r in _runs(home)] == [("crashed", "daemon stopped")]
