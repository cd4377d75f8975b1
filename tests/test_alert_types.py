"""Apprise alerts carry a notify type (issue 25 item 13): a failure or a suspension goes out as
`failure`, a timeout as `warning`, a recovery as `success`, so chat apps do not show a
suspension like a recovery. Real ticks, apprise's json:// to a sink on 127.0.0.1 (its body
holds the type)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime

from conftest import SCHEDULER, run_cli

from mdcron.alerts.notify import notify_type


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def test_each_kind_has_the_notify_type_of_its_meaning():
    assert [notify_type(k) for k in ("failure", "suspended", "tick_crashed", "crashed")] == [
        "failure"] * 4
    assert [notify_type(k) for k in ("timeout", "duplicate_id")] == ["warning"] * 2
    assert [notify_type(k) for k in ("recovered", "healed", "success")] == ["success"] * 3
    assert notify_type("digest") == "info"


def test_alerts_go_out_with_failure_warning_and_success_types(home, write_task, http_sink):
    (home / "scheduler.yaml").write_text(
        f"max_consecutive_failures: 2\nkill_grace: 1s\nnotify:\n  destinations:\n"
        f"    ops: \"{http_sink.json_url('/hook')}\"\n  default: ops\n  collapse_window: 0\n")
    marker = home / "works"
    write_task("flaky", command=f"test -e {marker}", self_heal=False)
    write_task("slow", command="sleep 30", timeout=1, self_heal=False, retry=False)
    base = time.time() // 60 * 60 + 3600  # after the real clock `enable` reads
    for minute in range(2):  # flaky fails twice: a failure, then its suspension
        run_cli(home, "tick", "--now", iso(base + 60 * minute))
    run_cli(home, "enable", "flaky")
    marker.write_text("")
    run_cli(home, "tick", "--now", iso(base + 300))  # flaky recovers
    got = {(b["title"], b["type"]) for b in http_sink.bodies()}  # type: ignore[index]
    assert got == {
        ("mdcron: flaky (flaky) failed", "failure"),
        ("mdcron: flaky (flaky) SUSPENDED", "failure"),
        ("mdcron: slow (slow) timed out", "warning"),
        ("mdcron: slow (slow) SUSPENDED", "failure"),
        ("mdcron: flaky (flaky) recovered", "success"),
    }, got


def test_an_ordinary_failure_alert_goes_when_its_ladder_ends_not_with_the_tick(
        home, write_task, http_sink):
    """A failing task's alert arrives while a slower task of the same tick still runs (it
    waits for a file the test creates only once the alert came)."""
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n"
        "  default: ops\n  collapse_window: 0\n")
    go = home / "go"
    write_task("fast", command="exit 1", self_heal=False, retry=False)
    write_task("long", command=f"while [ ! -e {go} ]; do sleep 0.05; done", timeout=120)
    go.write_text("")
    run_cli(home, "tick", "--now", "2026-11-23T09:59:00+00:00")  # first seen: both run
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    go.unlink()
    tick = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                             "--now", "2026-11-23T10:00:00+00:00"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        give_up = time.monotonic() + 30
        while len(http_sink.bodies()) < 2:  # 09:59's alert and 10:00's
            assert tick.poll() is None, "the tick ended before the alert came"
            assert time.monotonic() < give_up, "no alert while the slow task still runs"
            time.sleep(0.05)
        assert tick.poll() is None
    finally:
        go.write_text("")
        tick.wait(60)


def test_a_crash_alert_of_an_unobserved_end_gives_no_duration(home, write_task, http_sink):
    """The tick running it was killed: nobody saw the task end, so the alert says so and
    shows no "0.0s" (issue 25 item 13)."""
    import signal

    from test_concurrency import _recorded_pgid, start_tick
    from test_concurrency import wait_for as wait_for_file

    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n"
        "  default: ops\n")
    started, release = home / "started", home / "release"
    write_task("victim", schedule="0 10 * * *", timeout=300, command=(
        f"touch {started}; while [ ! -e {release} ]; do sleep 0.02; done"))
    run_cli(home, "tick", "--now", "2026-11-23T09:59:00+00:00")
    proc = start_tick(home, "2026-11-23T10:00:00+00:00")
    wait_for_file(started)
    _recorded_pgid(home / "state" / "locks" / "victim.lock")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    release.touch()
    give_up = time.monotonic() + 30
    while not http_sink.bodies():  # the next tick finds the run crashed (once its task ended)
        run_cli(home, "tick", "--now", "2026-11-23T10:02:00+00:00")
        assert time.monotonic() < give_up, "no crash alert"
        time.sleep(0.05)
    [alert] = http_sink.bodies()
    first = alert["message"].splitlines()[0]  # type: ignore[index]
    assert "no duration is recorded" in first, first
    assert not first.rstrip().endswith("0.0s"), first
    assert alert["type"] == "failure"  # type: ignore[index]
