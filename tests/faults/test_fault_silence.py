"""Issue 22 item 9: silence is an error. A missing tasks/ folder, a task file that turns
invalid and a chain whose upstream file is gone each give one alert (not repeated while the
situation stays the same), a line in `doctor`, and a heartbeat that reports failure."""

from __future__ import annotations

from pathlib import Path

from faultlib import BEFORE, NOW, doctor, run_cli

LATER = "2026-11-23T10:01:00+00:00"
NEXT_DAY = "2026-11-24T10:00:00+00:00"
NEXT_DAY_LATER = "2026-11-24T10:01:00+00:00"


def configure(home: Path, sink) -> None:
    (home / "scheduler.yaml").write_text(
        "notify:\n"
        f"  destinations:\n    ops: \"{sink.json_url('/hook')}\"\n"
        "  collapse_window: 0\n"  # every alert the tick queues reaches the sink
        f"heartbeat_url: \"{sink.url('/ping')}\"\n")


def alerts(sink) -> list[dict]:
    return [r.json for r in sink.requests if r.path == "/hook"]


def pings(sink) -> list[str]:
    return [r.path for r in sink.requests if r.path.startswith("/ping")]


def ticks(home: Path, *instants: str) -> list[int]:
    codes = []
    for when in instants:
        out = run_cli(home, "tick", "--now", when)
        assert "Traceback" not in out.stderr, out.stderr
        codes.append(out.returncode)
    return codes


def test_a_missing_tasks_folder_is_exit_2_one_alert_and_a_failing_heartbeat(home, http_sink):
    configure(home, http_sink)
    (home / "tasks").rmdir()
    assert ticks(home, NOW, LATER) == [2, 2]
    sent = alerts(http_sink)
    assert len(sent) == 1, sent
    assert "tasks folder" in sent[0]["title"] and str(home / "tasks") in sent[0]["message"]
    assert pings(http_sink) == ["/ping/fail", "/ping/fail"]
    report = doctor(home)
    assert any(line.startswith("fail tasks folder") for line in report.stdout.splitlines())
    (home / "tasks").mkdir()  # restored: fine again, and a later loss alerts again
    assert ticks(home, "2026-11-23T10:02:00+00:00") == [0]
    assert pings(http_sink)[-1] == "/ping"
    (home / "tasks").rmdir()
    assert ticks(home, "2026-11-23T10:03:00+00:00") == [2]
    assert len(alerts(http_sink)) == 2


def test_a_task_file_that_turns_invalid_is_one_alert_until_it_changes(home, write_task,
                                                                    http_sink):
    configure(home, http_sink)
    write_task("good", schedule="0 10 * * *", command="true")
    path = write_task("nightly", schedule="0 3 * * *", command="true")
    assert ticks(home, BEFORE) == [0]
    path.write_text(path.read_text().replace('"0 3 * * *"', '"0 61 * * *"'))
    assert ticks(home, NOW, LATER) == [1, 1]
    sent = alerts(http_sink)
    assert len(sent) == 1, sent
    assert "tasks/nightly.md" in sent[0]["title"]
    assert "hour must be 0-23" in sent[0]["message"]
    assert pings(http_sink)[-2:] == ["/ping/fail", "/ping/fail"]
    report = doctor(home)
    [line] = [s for s in report.stdout.splitlines() if "task files" in s]
    assert line.startswith("warn") and "nightly.md" in line, line
    path.write_text(path.read_text().replace('"0 61 * * *"', '"0 3 * * 9"'))  # another error
    assert ticks(home, "2026-11-23T10:02:00+00:00") == [1]
    assert len(alerts(http_sink)) == 2
    assert "0 3 * * 9" in alerts(http_sink)[-1]["message"]


def test_a_chain_whose_upstream_file_is_gone_alerts_once(home, write_task, http_sink):
    configure(home, http_sink)
    up = write_task("extract", schedule="0 10 * * *", command="true")
    write_task("load", schedule="after", after=["extract"], command="true")
    assert ticks(home, BEFORE, NOW) == [0, 0]
    up.rename(up.with_suffix(".md.off"))  # renamed away: no task file has the id any more
    assert ticks(home, NEXT_DAY, NEXT_DAY_LATER) == [1, 1]
    sent = alerts(http_sink)
    assert len(sent) == 1, sent
    assert "tasks/load.md" in sent[0]["title"] and "chain" in sent[0]["title"]
    assert "'extract'" in sent[0]["message"]
    assert pings(http_sink)[-2:] == ["/ping/fail", "/ping/fail"]
    report = doctor(home)
    [line] = [s for s in report.stdout.splitlines() if "task files" in s]
    assert line.startswith("warn") and "unknown upstream task 'extract'" in line, line
