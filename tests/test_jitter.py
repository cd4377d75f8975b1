"""Issue 26 item 2: `jitter:` starts a task a fixed offset after its slot (a stable hash of host,
home and id), claimed exactly once; `next`, `why`, `list` and Upcoming show the real start.
Ticks at injected instants; the one wait (under 2 s) is the ladder's own, for the offset."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_ladder import query, tick

from mdcron.settings.config import load_config
from mdcron.tasks.run_keys import decision_time, jitter_offset, start_offset
from mdcron.tasks.taskfile import load_task_file

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
SLOT = T0.replace(hour=10)

pytestmark = pytest.mark.usefixtures("state_url_env")


def test_the_offset_is_stable_within_the_window_and_differs_between_hosts():
    first = jitter_offset("web1", "/srv/mdcron", "backup", 120)
    assert first == jitter_offset("web1", "/srv/mdcron", "backup", 120)
    assert 0 <= first < 120
    offsets = {jitter_offset(f"web{n}", "/srv/mdcron", "backup", 120) for n in range(200)}
    assert len(offsets) > 150  # 200 hosts spread over the two minutes, not all at :00
    assert max(offsets) - min(offsets) > 100


def jittered(home: Path, write_task, low: float, high: float) -> tuple[str, float]:
    """A task `jitter: 2m` whose offset on this host lies in [low, high) (ids are tried in turn;
    the offset depends on the home, a fresh folder per test)."""
    config, _ = load_config(home)
    for n in range(500):
        task_id = f"sync{n}"
        offset = jitter_offset(config.host_name, str(config.home), task_id, 120)
        if low <= offset < high:
            write_task(task_id, schedule="0 10 * * *", jitter="2m", command="true")
            task, problems = load_task_file(home / "tasks" / f"{task_id}.md", config)
            assert task is not None and start_offset(task, config) == offset, problems
            return task_id, offset
    raise AssertionError("no id with such an offset")


def test_a_jittered_slot_starts_at_its_offset_and_is_claimed_once(home, write_task):
    task_id, offset = jittered(home, write_task, 70, 110)
    start = SLOT + timedelta(seconds=offset)
    tick(home, T0)
    assert tick(home, SLOT).ladders == []  # 10:00: the start is more than a minute away
    report = tick(home, start - timedelta(seconds=1.5))  # the tick before the start: waits
    [outcome] = report.ladders
    assert outcome.final.ok
    [(slot, started)] = query(home, "SELECT scheduled_for, started_at FROM runs WHERE"
                                    " task_id = ?", (task_id,))
    assert slot == SLOT.timestamp()  # the slot is unchanged; only the start moved
    assert start.timestamp() <= started < start.timestamp() + 10
    assert tick(home, start + timedelta(seconds=30)).ladders == []  # never twice
    assert tick(home, SLOT + timedelta(minutes=5)).ladders == []


def test_a_small_offset_is_claimed_by_the_slots_own_tick(home, write_task):
    task_id, offset = jittered(home, write_task, 0.5, 2.0)
    tick(home, T0)
    [outcome] = tick(home, SLOT).ladders
    [started] = query(home, "SELECT started_at FROM runs WHERE task_id = ?", (task_id,))
    assert started[0] >= SLOT.timestamp() + offset


def test_decision_time_never_looks_past_now(home, write_task):
    task_id, offset = jittered(home, write_task, 10, 50)
    config, _ = load_config(home)
    task, _ = load_task_file(home / "tasks" / f"{task_id}.md", config)
    assert decision_time(task, config, 1000.0) == 1000.0  # start within the minute: now
    task_id, offset = jittered(home, write_task, 90, 110)
    task, _ = load_task_file(home / "tasks" / f"{task_id}.md", config)
    assert decision_time(task, config, 1000.0) == 1000.0 + 60 - offset


def test_next_why_list_and_upcoming_show_the_real_start(home, write_task, cli):
    task_id, offset = jittered(home, write_task, 70, 110)
    start = SLOT + timedelta(seconds=offset)
    out = cli("next", task_id, "-n", "1", "--after", "2026-11-23T09:30:00Z")
    assert out.returncode == 0, out.stderr
    assert f"starts {start:%H:%M:%S} (jitter)" in out.stdout
    out = cli("next", task_id, "-n", "1", "--after", "2026-11-23T09:30:00Z", "--json")
    assert json.loads(out.stdout) == [start.isoformat()]
    out = cli("why", task_id, "--at", "2026-11-23T09:30:00Z")
    assert f"starts {_dur(offset)} after each slot" in out.stdout
    assert f"next start {start:%Y-%m-%d %H:%M}" in out.stdout
    out = cli("show", task_id)
    assert "after each slot (jitter" in out.stdout
    config, _ = load_config(home)
    from mdcron.cli.queries import list_rows, load_all
    from mdcron.web.upcoming import upcoming_view

    now = (SLOT - timedelta(minutes=30)).timestamp()
    [row] = list_rows(config, load_all(config), now, None)
    assert row["next_run"] == start.isoformat() and row["next_fire"] == SLOT.isoformat()
    hours = upcoming_view(config, now, 1)["hours"]
    [item] = [i for items in hours.values() for i in items if i["id"] == task_id][:1]
    assert item["iso"] == start.isoformat()


def _dur(seconds: float) -> str:
    from mdcron.core.units import format_duration

    return format_duration(seconds)
