"""A lost database never runs a slot twice (issue 22 item 6), with real ticks in real processes:
the state database deleted, emptied to zero bytes, or its whole folder gone after the tick of
minute M; a second tick in minute M runs nothing again, says so in one alert, and the next minute
runs as usual."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from faultlib import BEFORE, NOW, lines, run_cli

AGAIN = "2026-11-23T10:00:30+00:00"  # the same minute as NOW
NEXT = "2026-11-23T10:01:00+00:00"


def lose(home: Path, how: str) -> None:
    state = home / "state"
    if how == "state folder":  # the marker goes too: the newest run log stands in
        shutil.rmtree(state)
        return
    for path in state.glob("mdcron.db-*"):  # -wal, -shm
        path.unlink()
    if how == "deleted":
        (state / "mdcron.db").unlink()
    else:  # a zero-byte file is a lost database, not a new one
        (state / "mdcron.db").write_bytes(b"")


def recreated(sink) -> list[dict]:
    return [b for b in sink.bodies() if "recreated" in str(b.get("title", ""))]


@pytest.mark.parametrize("how", ["deleted", "zero-byte", "state folder"])
def test_a_lost_database_does_not_run_the_minute_again(home, write_task, http_sink, how):
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n  default: ops\n")
    marks = home / "marks"
    write_task("job", schedule="* * * * *", command=f"echo x >> {marks}")
    write_task("hourly", schedule="0 * * * *", command=f"echo h >> {marks}")
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", NOW)
    ran = sorted(lines(marks))
    assert ran == ["h", "x", "x"]  # 09:59 (first seen) and 10:00
    lose(home, how)
    again = run_cli(home, "tick", "--now", AGAIN)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(lines(marks)) == ran, again.stdout  # minute 10:00 ran once
    assert "No slot up to 2026-11-23 10:00 UTC" in again.stdout, again.stdout
    [alert] = recreated(http_sink)
    assert "missing or empty" in alert["message"]
    nxt = run_cli(home, "tick", "--now", NEXT)
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    assert sorted(lines(marks)) == sorted(ran + ["x"])  # the next minute runs as usual
    assert len(recreated(http_sink)) == 1
