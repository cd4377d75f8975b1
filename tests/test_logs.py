"""`logs` (issue 25 item 9): a run that never started says why; a partial log says the run is
still going; `--follow` follows a running run to its end. Real ticks, real processes; the task
waits on a file the test creates (an event, not the clock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from conftest import SCHEDULER, run_cli

NOW = "2026-11-23T10:00:00+00:00"


def cli_popen(home, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    return subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for(check, what: str, limit: float = 60.0):
    give_up = time.monotonic() + limit
    while not (found := check()):
        assert time.monotonic() < give_up, f"gave up waiting for {what}"
        time.sleep(0.05)
    return found


def test_logs_of_a_script_that_never_started_says_why(home, write_task):
    (home / "scripts").mkdir()
    script = home / "scripts" / "job.sh"
    script.write_text("#!/bin/sh\necho hi\n")  # not executable: it cannot start
    write_task("job", run_as="script", command="scripts/job.sh", self_heal=False)
    run_cli(home, "run", "job")
    logs = run_cli(home, "logs", "job")
    assert logs.returncode == 1
    assert "run 1 of job never started, so it has no log: script 'scripts/job.sh' is not" \
           " executable" in logs.stderr, logs.stderr
    assert "retention" not in logs.stderr


def test_a_partial_log_says_still_running_and_follow_follows_it_to_the_end(home, write_task):
    go = home / "go"
    write_task("slow", command=f"echo one; while [ ! -e {go} ]; do sleep 0.05; done; echo two",
               timeout=300)
    tick = cli_popen(home, "tick", "--now", NOW)
    try:
        def started():
            rows = json.loads(run_cli(home, "history", "--json").stdout or "[]")
            path = rows and rows[0].get("log_path")
            return path and os.path.exists(path) and b"one" in open(path, "rb").read()

        wait_for(started, "the run's first line")
        partial = run_cli(home, "logs", "slow")
        assert partial.returncode == 0 and partial.stdout.strip() == "one", partial
        assert "run 1 is still running" in partial.stderr and "--follow" in partial.stderr
        follow = cli_popen(home, "logs", "slow", "--follow")
        assert follow.stdout is not None
        assert follow.stdout.readline().strip() == "one"  # printed before the run ends
        assert follow.poll() is None
        go.write_text("")
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 0, err
        assert out.strip() == "two", out
        assert "run 1 ended success" in err, err
    finally:
        go.touch()
        tick.wait(60)


def test_logs_of_a_skipped_latest_run_says_why_and_where_the_last_log_is(home, write_task):
    write_task("daily", schedule="* * * * *", timezone="UTC", once_per="day", command="echo hi")
    run_cli(home, "tick", "--now", "2026-11-23T05:59:00+00:00")  # first seen: runs (run 1)
    run_cli(home, "tick", "--now", "2026-11-23T06:00:00+00:00")  # skipped (run 2): no log
    logs = run_cli(home, "logs", "daily")
    assert logs.returncode == 1
    assert "run 2 of daily was skipped, so it has no log: already succeeded today" in logs.stderr
    assert "`logs daily --run 1`" in logs.stderr, logs.stderr
    assert run_cli(home, "logs", "daily", "--run", "1").stdout.strip() == "hi"
