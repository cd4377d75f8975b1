"""Issue 16: what a tick does after each ladder and what it prints, through real ticks (real
subprocesses, locks, an HTTP sink on 127.0.0.1)."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "faults"))

from faultlib import (  # noqa: E402
    BEFORE,
    NOW,
    run_cli,
    start_tick,
    wait_until,
)

NEXT = "2026-11-23T10:01:00+00:00"
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d \[t\d+\] ")


def test_forced_alert_of_a_timeout_does_not_wait_for_the_slowest_task(home, write_task,
                                                                       http_sink):
    (home / "scheduler.yaml").write_text(
        f"kill_grace: 0.5\nmax_parallel: 2\nnotify:\n  destinations:\n"
        f"    ops: \"{http_sink.json_url()}\"\n")
    slow_end, alerted = home / "slow_end", home / "alerted"
    write_task("hang", schedule="0 10 * * *", timeout=1, command="sleep 30")
    # slow runs until the sink has the hang's alert (60 s at most), not a fixed 8 s in which
    # a loaded machine had to time hang out and start the courier: an alert held for the
    # slowest task would still come after slow's end
    write_task("slow", schedule="0 10 * * *", timeout=90,
               command=f"i=0; while [ ! -e {alerted} ] && [ $i -lt 1200 ];"
                       f" do sleep 0.05; i=$((i+1)); done; date +%s.%N > {slow_end}")
    run_cli(home, "tick", "--now", BEFORE)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.02):
            if any(b"hang" in r.body for r in list(http_sink.requests)):
                alerted.touch()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = run_cli(home, "tick", "--now", NOW)
    finally:
        stop.set()
        watcher.join(5)
    assert "hang: timeout" in out.stdout, out.stdout + out.stderr
    ended = float(slow_end.read_text())
    alerts = [r for r in http_sink.requests if "hang" in r.body.decode(errors="replace")]
    assert alerts, out.stdout + out.stderr
    assert alerts[0].received_at < ended, (alerts[0].received_at, ended)


def test_still_running_is_said_once_and_list_shows_running(home, write_task, cli):
    release = home / "release"
    started = home / "started"
    write_task("long", schedule="0-5 10 * * *", timeout=120,
               command=f"touch {started}; while [ ! -e {release} ]; do sleep 0.05; done")
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home, NOW)
    try:
        wait_until(started.exists, "the long task started")
        wait_until(lambda: '"pgid"' in (home / "state" / "locks" / "long.lock").read_text()
                   if (home / "state" / "locks" / "long.lock").exists() else False, "lock record")
        out = run_cli(home, "tick", "--now", NEXT)
        said = [line for line in out.stdout.splitlines() if "still running" in line]
        assert len(said) == 1, out.stdout
        [row] = json.loads(cli("list", "--json", "--now", NEXT).stdout)
        assert row["running_since"] is not None and row["last_status"] == "skipped"
        human = cli("list", "--now", NEXT).stdout
        [line] = [x for x in human.splitlines() if x.startswith("long ")]
        assert "  running  " in line and "skipped" not in human, human
    finally:
        release.touch()
        tick.communicate(timeout=60)


def test_exit_zero_keeps_failures_out_of_the_exit_status(home, write_task, cli):
    write_task("bad", schedule="0-5 10 * * *", command="exit 3")
    assert cli("tick", "--now", BEFORE).returncode == 0
    assert cli("tick", "--now", NOW).returncode == 1
    out = cli("tick", "--now", NEXT, "--exit-zero")
    assert out.returncode == 0 and "bad: failed" in out.stdout


def test_every_tick_line_has_time_and_tick_id(home, write_task, cli):
    write_task("ok", schedule="0-5 10 * * *", command="echo hi")
    write_task("bad", schedule="0-5 10 * * *", command="exit 3")
    cli("tick", "--now", BEFORE)
    out = cli("tick", "--now", NOW)
    lines = (out.stdout + out.stderr).splitlines()
    assert len(lines) >= 2 and all(LINE.match(line) for line in lines), lines
    assert len({line.split(" ")[1] for line in lines}) == 1  # one tick, one id


def test_json_log_lines():
    from mdcron.run.ticklog import format_line

    line = json.loads(format_line("ok: success in 1s", tick="t7", ts=0.0, fmt="json"))
    assert line["task"] == "ok" and line["tick"] == "t7" and line["level"] == "info"
    assert set(line) == {"ts", "tick", "level", "event", "task", "message"}
    assert json.loads(format_line("mdcron: x: y", tick="t7", ts=0.0, fmt="json"))["task"] is None


def test_tick_killed_mid_run_alerts_opens_incident_and_logs_in_order(home, write_task,
                                                                     http_sink):
    import signal

    from faultlib import lock_pgid, pid_alive, query

    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n")
    release, pid_file = home / "release", home / "pid"
    write_task("long", schedule="0-5 10 * * *", timeout=120,
               command=f"echo $$ > {pid_file}; while [ ! -e {release} ]; do sleep 0.05; done")
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home, NOW)
    try:
        # the task writes its pid as it starts, maybe before its tick records the process
        # group in the lock: a tick killed in between leaves a run that "never started"
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip()
                   and lock_pgid(home, "long") == int(pid_file.read_text()),
                   "task started and recorded")
        tick.send_signal(signal.SIGKILL)
        tick.communicate()
    finally:
        release.touch()
    orphan = int(pid_file.read_text())
    wait_until(lambda: not pid_alive(orphan), "the orphaned task ended")
    out = run_cli(home, "tick", "--now", NEXT)
    lines = out.stdout.splitlines()
    crash = next(i for i, line in enumerate(lines) if "marked crashed" in line)
    ran = next(i for i, line in enumerate(lines) if "long: success" in line)
    assert crash < ran, lines  # in event order: the crash was found before the next run
    assert "ended unobserved" in lines[crash]
    [(error, duration)] = query(home, "SELECT error, duration_ms FROM runs WHERE status ="
                                      " 'crashed'")
    assert "ended unobserved" in error and duration is None
    # opened by the crash, resolved by the next run's success
    assert query(home, "SELECT kind, task_id, status FROM incidents") == [
        ("crashed", "long", "resolved")]
    titles = [b.get("title", "") for b in http_sink.bodies() if isinstance(b, dict)]
    assert any("long" in t and "crashed" in t for t in titles), titles


def test_a_timed_out_run_log_ends_with_why_it_was_killed(home, write_task, cli):
    (home / "scheduler.yaml").write_text("kill_grace: 0.5\n")
    write_task("deaf", schedule="0-5 10 * * *", timeout=1,
               command="trap '' TERM; echo started; sleep 30")
    cli("tick", "--now", BEFORE)
    cli("tick", "--now", NOW)
    [log] = list((home / "logs" / "runs" / "deaf").iterdir())[:1]
    last = log.read_text().splitlines()[-1]
    assert last == "[mdcron] killed: timeout after 1.0s (TERM, then KILL after 0.5s grace)", last


def test_tick_log_format_json(home, write_task, cli):
    write_task("ok", schedule="0-5 10 * * *", command="echo hi")
    cli("tick", "--now", BEFORE)
    out = cli("tick", "--now", NOW, "--log-format", "json")
    [line] = [json.loads(x) for x in out.stdout.splitlines()]
    assert line["task"] == "ok" and line["message"].startswith("ok: success"), line
