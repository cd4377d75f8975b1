"""The tick end to end, in process (run_tick with an injected clock) against real files, real
SQLite and real subprocesses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mdcron.core.clock import Clock
from mdcron.run.tick import run_tick
from mdcron.settings.config import load_config
from mdcron.state.store import state_store

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday


# every tick test on both state back ends (issue 11), through MDCRON_STATE_URL
pytestmark = pytest.mark.usefixtures("state_url_env")


def tick(home: Path, at: datetime, **kw):
    config, _ = load_config(home)
    return run_tick(config, Clock(at), say=lambda _line: None, environ={"PATH": "/usr/bin:/bin"},
                    **kw)


def runs(home: Path, task_id: str | None = None) -> list[dict]:
    sql = "SELECT * FROM runs" + (" WHERE task_id = ?" if task_id else "") + " ORDER BY id"
    with state_store(load_config(home)[0]) as store:
        return store._rows(sql, (task_id,) if task_id else ())


def slot_of(row: dict) -> datetime:
    return datetime.fromtimestamp(row["scheduled_for"], UTC)


@pytest.fixture
def config_yaml(home: Path):
    def write(text: str) -> None:
        (home / "scheduler.yaml").write_text(text)
    return write


def test_due_task_runs_once_and_records_output(home, write_task):
    write_task("daily", schedule="0 10 * * *", command="echo hello; echo oops >&2",
               timezone="UTC")
    tick(home, T0)  # first seen at 09:00
    report = tick(home, T0.replace(hour=10))
    assert [(t.id, r.outcome.value) for t, _, r in report.results] == [("daily", "success")]
    [row] = runs(home, "daily")
    assert row["status"] == "success" and row["exit_code"] == 0
    assert slot_of(row) == T0.replace(hour=10)
    assert row["trigger"] == "schedule" and row["attempt"] == 1 and row["kind"] == "run"
    assert "hello" in row["output_tail"] and "oops" in row["output_tail"]
    log = Path(row["log_path"])
    assert log.is_relative_to(home / "logs" / "runs" / "daily")
    assert "hello" in log.read_text()
    # the same instant again: the slot is taken, nothing runs twice
    assert tick(home, T0.replace(hour=10, second=30)).results == []
    assert len(runs(home, "daily")) == 1


def test_first_seen_after_fire_time_does_not_run_it(home, write_task):
    write_task("morning", schedule="0 6 * * *", command="true", timezone="UTC")
    at_15 = T0.replace(hour=15)
    assert tick(home, at_15).planned == []  # added at 15:00: the 06:00 fire is not run
    assert tick(home, at_15 + timedelta(hours=2)).planned == []
    nxt = tick(home, (T0 + timedelta(days=1)).replace(hour=6))
    assert [t.id for t, _, _ in nxt.results] == ["morning"]


def test_task_added_seconds_before_its_minute_runs_at_that_minute(home, write_task):
    write_task("soon", schedule="0 10 * * *", command="true", timezone="UTC")
    # cron starts the tick a little after the minute; the file appeared during 09:59
    # first seen by the 10:00:00.3 tick: seen "during 10:00", so the 10:00 fire still runs
    report = tick(home, T0.replace(hour=10, second=0, microsecond=300000))
    assert [t.id for t, _, _ in report.results] == ["soon"]


def test_missed_fires_coalesce_into_one_run_for_the_latest_slot(home, write_task):
    write_task("every5", schedule="*/5 * * * *", command="true", timezone="UTC")
    tick(home, T0)
    tick(home, T0 + timedelta(minutes=5))
    report = tick(home, T0 + timedelta(minutes=27))  # 10, 15, 20, 25 were missed
    [planned] = report.planned
    assert planned.action == "run" and planned.missed == 3
    rows = runs(home, "every5")
    # first seen at 09:00 exactly: that fire runs; 09:05 runs; 09:10-09:25 become one run
    assert [slot_of(r) for r in rows] == [T0 + timedelta(minutes=m) for m in (0, 5, 25)]


@pytest.mark.parametrize(
    ("catchup", "late_by", "expected"),
    [
        (None, timedelta(minutes=59), "success"),  # default allowance: 60m
        (None, timedelta(hours=2), "skipped"),
        ("always", timedelta(days=3), "success"),
        ("never", timedelta(seconds=59), "success"),
        ("never", timedelta(seconds=61), "skipped"),
        ("3h", timedelta(hours=2), "success"),
    ],
)
def test_catchup_allowance(home, write_task, catchup, late_by, expected):
    fields = {"catchup": catchup} if catchup else {}
    write_task("daily", schedule="0 6 * * *", command="true", timezone="UTC", **fields)
    tick(home, T0 - timedelta(days=1))  # seen the day before
    fire = T0.replace(hour=6)
    tick(home, fire + late_by)
    [row] = runs(home, "daily")
    assert row["status"] == expected
    assert slot_of(row) == fire + timedelta(days=late_by.days)  # the latest fire, coalesced
    if expected == "skipped":
        assert "catchup" in row["error"]
        assert tick(home, fire + late_by + timedelta(minutes=1)).planned == []  # recorded once


def test_disabled_task_never_runs_and_reenabled_is_not_due_for_earlier_fires(home, write_task):
    write_task("job", schedule="0 * * * *", command="true", timezone="UTC", enabled=False)
    tick(home, T0 - timedelta(hours=5))
    assert tick(home, T0).planned == []
    write_task("job", schedule="0 * * * *", command="true", timezone="UTC", enabled=True)
    assert tick(home, T0 + timedelta(minutes=30)).planned == []  # 09:00 was before re-enabling
    report = tick(home, T0 + timedelta(hours=1))
    assert [t.id for t, _, _ in report.results] == ["job"]


def test_duplicate_ids_stop_everything(home, write_task):
    write_task("good", schedule="* * * * *", command="true")
    a = write_task("twin", filename="a.md", command="true")
    b = write_task("twin", filename="b.md", command="true")
    report = tick(home, T0)
    assert report.exit_code == 2
    assert sorted(report.duplicates["twin"]) == sorted([a, b])
    assert report.results == [] and not (home / "state" / "mdcron.db").exists()


def test_a_broken_file_does_not_stop_the_others(home, write_task):
    write_task("good", schedule="* * * * *", command="true")
    (home / "tasks" / "broken.md").write_text("---\nid: broken\nschedule: [unclosed\n---\n")
    write_task("badcron", schedule="61 * * * *", command="true")
    tick(home, T0)
    report = tick(home, T0 + timedelta(minutes=1))
    assert [t.id for t, _, _ in report.results] == ["good"]
    assert report.exit_code == 1
    bad_files = {p.path.name for p in report.problems if p.severity == "error"}
    assert bad_files == {"broken.md", "badcron.md"}


def test_json_error_envelope_fails_the_run(home, write_task):
    write_task("api", command="""echo working; echo '{"status": "error", "error": "quota"}'""")
    tick(home, T0)
    report = tick(home, T0 + timedelta(minutes=1))
    [(_, _, result)] = report.results
    assert result.outcome.value == "failed" and result.fail_reason == "quota"
    assert report.exit_code == 1
    assert runs(home, "api")[0]["error"] == "quota"


def test_timeout_is_recorded(home, write_task):
    write_task("slow", command="sleep 30", timeout=1)
    (home / "scheduler.yaml").write_text("kill_grace: 0.2\n")
    tick(home, T0)
    report = tick(home, T0 + timedelta(minutes=1))
    [(_, _, result)] = report.results
    assert result.outcome.value == "timeout"
    row = runs(home, "slow")[0]
    assert row["status"] == "timeout" and "timeout after" in row["error"]


def test_task_environment_hides_secrets(home, write_task):
    out = home / "env.txt"
    write_task("envdump", command=f"env > {out}", secrets=["ASKED_TOKEN"])
    (home / "scheduler.yaml").write_text("secret_env: ['*_TOKEN']\n")
    config, _ = load_config(home)
    environ = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-secret", "GH_TOKEN": "t1",
               "ASKED_TOKEN": "t2", "HARMLESS": "yes"}
    run_tick(config, Clock(T0), say=lambda _l: None, environ=environ)
    run_tick(config, Clock(T0 + timedelta(minutes=1)), say=lambda _l: None, environ=environ)
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert "ANTHROPIC_API_KEY" not in seen and "GH_TOKEN" not in seen
    assert seen["ASKED_TOKEN"] == "t2" and seen["HARMLESS"] == "yes"
    assert seen["MDCRON_TASK_ID"] == "envdump" and seen["MDCRON_ATTEMPT"] == "1"
    assert seen["CLAUDE_CONFIG_DIR"] == str(home.resolve() / "state" / "claude")


def test_parallel_runs_respect_max_parallel(home, write_task, config_yaml):
    config_yaml("max_parallel: 2\n")
    marks = home / "marks"
    marks.mkdir()
    # each task records how many were running when it started
    for i in range(5):
        write_task(f"p{i}", command=(
            f"touch {marks}/run.$MDCRON_TASK_ID;"
            f" ls {marks} | grep -c run > {marks}/seen.$MDCRON_TASK_ID;"
            f" sleep 0.3; rm {marks}/run.$MDCRON_TASK_ID"))
    tick(home, T0)
    report = tick(home, T0 + timedelta(minutes=1))
    assert len(report.results) == 5 and all(r.ok for _, _, r in report.results)
    peaks = [int(p.read_text()) for p in marks.glob("seen.*")]
    assert max(peaks) <= 2


def test_retention_prunes_old_runs_and_their_logs(home, write_task):
    """Runs older than retention_days go with their logs, oldest first, but at most a tenth of
    the runs per pass, never a task's ten newest, and only once two ticks agree on the time
    (run/retention.py)."""
    write_task("r", command="echo x")
    start = T0 - timedelta(days=100)
    for minute in range(12):
        tick(home, start + timedelta(minutes=minute))
    old = runs(home, "r")
    assert len(old) == 12 and all(Path(r["log_path"]).exists() for r in old)
    tick(home, T0)  # 100 days after the last tick: retention waits for a tick that agrees
    assert [r["id"] for r in runs(home, "r")][:12] == [r["id"] for r in old]
    tick(home, T0 + timedelta(minutes=1))  # 14 runs: ceil(1.4) = 2 of the 4 old enough go
    ids = [r["id"] for r in runs(home, "r")]
    assert ids[:10] == [r["id"] for r in old[2:]] and len(ids) == 12
    assert not any(Path(r["log_path"]).exists() for r in old[:2])
    assert all(Path(r["log_path"]).exists() for r in old[2:])


def test_renamed_file_keeps_history(home, write_task):
    path = write_task("keep", schedule="*/5 * * * *", command="true")
    tick(home, T0)
    tick(home, T0 + timedelta(minutes=5))
    path.rename(home / "tasks" / "renamed.md")
    tick(home, T0 + timedelta(minutes=10))
    rows = runs(home, "keep")
    assert len(rows) == 3 and rows[-1]["task_file"].endswith("renamed.md")


def test_removed_file_stops_running(home, write_task):
    path = write_task("gone", command="true")
    tick(home, T0)
    tick(home, T0 + timedelta(minutes=1))
    path.unlink()
    assert tick(home, T0 + timedelta(minutes=2)).planned == []


def test_dry_run_changes_nothing(home, write_task):
    write_task("d", command="touch should-not-exist", schedule="* * * * *")
    report = tick(home, T0, dry_run=True)
    assert [p.task.id for p in report.planned] == ["d"]
    assert not (home / "state").exists() and not (home / "should-not-exist").exists()


def test_one_shot_runs_once(home, write_task):
    write_task("once", schedule="@at 2026-11-23T09:30", timezone="UTC", command="true")
    tick(home, T0)
    tick(home, T0 + timedelta(minutes=30))
    tick(home, T0 + timedelta(minutes=31))
    tick(home, T0 + timedelta(days=2))
    assert [r["status"] for r in runs(home, "once")] == ["success"]


def _tick_every(home: Path, start: datetime, minutes: int, step: int = 5) -> None:
    for m in range(0, minutes + 1, step):
        tick(home, start + timedelta(minutes=m))


def local_slots(home: Path, task_id: str, zone: str) -> list[str]:
    from zoneinfo import ZoneInfo

    return [slot_of(r).astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M%z")
            for r in runs(home, task_id)]


def test_fixed_time_job_on_fall_back_day_runs_once_riga(home, write_task):
    # Europe/Riga 2026-10-25: 04:00 EEST -> 03:00 EET at 01:00 UTC; 03:30 happens twice
    write_task("fixed", schedule="30 3 * * *", timezone="Europe/Riga", command="true")
    _tick_every(home, datetime(2026, 10, 24, 23, 0, tzinfo=UTC), 240)
    assert local_slots(home, "fixed", "Europe/Riga") == ["10-25 03:30+0300"]


def test_fixed_time_job_on_spring_forward_day_runs_after_the_jump_new_york(home, write_task):
    # America/New_York 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00 UTC; 02:30 never happens
    write_task("fixed", schedule="30 2 * * *", timezone="America/New_York", command="true")
    _tick_every(home, datetime(2026, 3, 8, 5, 0, tzinfo=UTC), 240)
    assert local_slots(home, "fixed", "America/New_York") == ["03-08 03:00-0400"]


def test_wildcard_hour_job_runs_in_both_passes_riga(home, write_task):
    write_task("hourly", schedule="15 * * * *", timezone="Europe/Riga", command="true")
    _tick_every(home, datetime(2026, 10, 24, 23, 0, tzinfo=UTC), 240)
    assert local_slots(home, "hourly", "Europe/Riga") == [
        "10-25 02:15+0300", "10-25 03:15+0300", "10-25 03:15+0200", "10-25 04:15+0200"]


def test_no_dst_zone_is_plain_johannesburg(home, write_task):
    write_task("jnb", schedule="30 2 * * *", timezone="Africa/Johannesburg", command="true")
    _tick_every(home, datetime(2026, 3, 28, 22, 0, tzinfo=UTC), 48 * 60, step=30)
    assert local_slots(home, "jnb", "Africa/Johannesburg") == [
        "03-29 02:30+0200", "03-30 02:30+0200"]
