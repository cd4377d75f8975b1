"""core/collector.py (issue 27): the cyclic collector waits while a tick gets its first task
started, and runs again from there; every other command runs with it as always."""

import os
import subprocess
import sys

from conftest import RUN_SCHEDULER, SCHEDULER

# The entry point as cron runs it, watched from outside: each collection and each process
# the tick starts, in order, and whether the collector is on when the command opens its
# database and when it ends.
PROBE = """
import gc, runpy, sys
events = []
gc.callbacks.append(lambda phase, info: events.append("gc") if phase == "start" else None)
def hook(event, args):
    if event == "import" and args[0] == "mdcron.cli.main" and "main" not in events:
        events.append("main")  # scheduler.py's imports begin (the hold comes just before)
    elif event == "subprocess.Popen":
        events.append("popen")
    elif event == "socket.connect":
        events.append("socket:" + ("on" if gc.isenabled() else "off"))
    elif event == "sqlite3.connect":
        events.append("connect:" + ("on" if gc.isenabled() else "off"))
sys.addaudithook(hook)
""" + RUN_SCHEDULER + """
print("EVENTS", " ".join(events), "END", "on" if gc.isenabled() else "off")
"""


def probe(*args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, str(SCHEDULER), *args],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, **(env or {})})
    assert "EVENTS" in out.stdout, out.stdout + out.stderr
    return out.stdout.split("EVENTS", 1)[1].strip()


def test_a_due_tick_collects_nothing_before_its_task_starts(home, write_task):
    write_task("due", command="true")
    events = probe("--home", str(home), "tick", "--now", "2026-11-23T10:00:00+00:00")
    before = events.split("main", 1)[1].split("popen", 1)[0].split()
    assert "popen" in events, events
    # without the hold, starting up collected ~36 times before the task's process started
    assert "gc" not in before, events
    assert events.endswith("END on"), events  # collections run again once it started


def test_a_tick_that_starts_no_task_collects_again_at_its_end(home, write_task):
    write_task("later", command="true", schedule="0 3 * * *")
    events = probe("--home", str(home), "tick", "--now", "2026-11-23T10:00:00+00:00")
    assert "popen" not in events and events.endswith("END on"), events


def test_other_commands_run_with_the_collector_on(home, write_task):
    write_task("some", command="true")
    probe("--home", str(home), "tick", "--now", "2026-11-23T10:00:00+00:00")  # a database
    events = probe("--home", str(home), "history")
    assert "connect:on" in events and "connect:off" not in events, events


def test_a_claude_task_runs_with_the_collector_on(home, write_task, fake_claude):
    """A Claude task is no process of run_command's: the collector runs again before its
    client starts (it allocates for as long as the task runs)."""
    fake_claude.text("done")
    write_task("ask", "Say hello.", run_as="claude", timeout=60)
    events = probe("--home", str(home), "tick", "--now", "2026-11-23T10:00:00+00:00",
                   env=fake_claude.environ)
    assert "socket:on" in events and "socket:off" not in events, events
