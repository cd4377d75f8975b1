"""The due fast path (issue 14): a plain due slot is decided from the cache alone (cache.plain_due,
the fire after next_due kept in the row), so the task starts before croniter or portalocker are
imported. It must decide exactly what decide() over every task decides: a property test runs the
cached tick and the uncached plan on random task sets and random instants and compares the
chosen (task, action, slot, reason, missed), skips and their reasons included."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import REPO, render_task
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cache import age, checked_tick, db_of

from mdcron.schedule.cache import PLAIN_LATE, plain_due

SCHEDULES = ["* * * * *", "*/2 * * * *", "*/5 * * * *", "0 * * * *", "30 1 * * *",
             "0 2 * * *", "15 3 * * 0", "@every 7m", "@every 1h", "@hourly",
             "@at 2026-03-29T03:30", "0 6 * * 1-5"]
ZONES = [None, "UTC", "Europe/Riga", "America/New_York"]
CATCHUP = [None, "0", "90s", "5m", "always"]
STEPS = [0, 1, 30, 59, 60, 61, 90, 120, 300, 3600, -60, -3600, 86400]
# around the spring-forward in Riga (2026-03-29 01:00 UTC) and the fall-back in New York
STARTS = [datetime(2026, 3, 29, 0, 57, tzinfo=UTC), datetime(2026, 11, 1, 5, 58, tzinfo=UTC),
          datetime(2026, 11, 23, 9, 0, tzinfo=UTC)]

task_st = st.fixed_dictionaries({
    "schedule": st.sampled_from(SCHEDULES), "timezone": st.sampled_from(ZONES),
    "catchup": st.sampled_from(CATCHUP), "enabled": st.sampled_from([True, True, True, False])})


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(tasks=st.lists(task_st, min_size=1, max_size=4),
       start=st.sampled_from(STARTS), offset=st.integers(0, 180),
       steps=st.lists(st.sampled_from(STEPS), min_size=2, max_size=7))
def test_fast_and_full_path_choose_the_same(tasks, start, offset, steps):
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "tasks").mkdir(parents=True)
        for i, fields in enumerate(tasks):
            fields = {k: v for k, v in fields.items() if v is not None}
            (home / "tasks" / f"t{i}.md").write_text(render_task(f"t{i}", command="true",
                                                                 **fields))
        at = start + timedelta(minutes=offset)
        for step in [0, *steps]:
            at += timedelta(seconds=step)
            checked_tick(home, at)  # asserts: the cached tick plans what decide() plans
            age(home)


def test_plain_due_is_the_narrow_case():
    assert plain_due(60.0, 120.0, 60.0)  # at the fire
    assert plain_due(60.0, 120.0, 60.0 + PLAIN_LATE - 0.5)
    assert not plain_due(60.0, 120.0, 60.0 + PLAIN_LATE)  # late: catchup decides
    assert not plain_due(60.0, 120.0, 120.0)  # two fires passed: coalescing decides
    assert not plain_due(60.0, None, 61.0)  # the fire after unknown
    assert not plain_due(60.0, 120.0, 59.0)  # not yet due
    assert not plain_due(None, None, 61.0)


SPAWN_PROBE = """
import sys
seen = []
def hook(event, args):
    if event == "subprocess.Popen" and not seen:
        seen.append([m for m in ("croniter", "dateutil", "portalocker", "mdcron.core.cron",
                                 "mdcron.alerts.after_run") if m in sys.modules])
sys.addaudithook(hook)
from mdcron.cli.main import main
code = main(sys.argv[1:])
print("SPAWN", code, __import__("json").dumps(seen[0] if seen else None))
"""


def spawn_probe(home: Path, at: datetime) -> tuple[int, list[str] | None]:
    out = subprocess.run([sys.executable, "-c", SPAWN_PROBE, "--home", str(home), "tick",
                          "--now", at.isoformat()], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("SPAWN "), out.stdout + out.stderr
    _, code, seen = last.split(" ", 2)
    return int(code), json.loads(seen)


def test_a_plain_due_task_starts_before_croniter_and_portalocker(home, write_task):
    write_task("every", schedule="* * * * *", command="true", timezone="UTC")
    write_task("daily", schedule="0 6 * * *", command="true", timezone="UTC")
    t0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    assert spawn_probe(home, t0)[0] == 0  # first tick: reads the files, computes with croniter
    age(home)
    code, seen = spawn_probe(home, t0 + timedelta(minutes=1))
    assert (code, seen) == (0, [])  # the task started; nothing heavy was loaded before it
    age(home)
    code, seen = spawn_probe(home, t0 + timedelta(minutes=2))
    assert (code, seen) == (0, [])  # and the tick after it (complete() kept due_after)
    db = db_of(home)
    rows = db.execute("SELECT scheduled_for FROM runs WHERE task_id = 'every' ORDER BY id")
    assert [r[0] for r in rows] == [(t0 + timedelta(minutes=m)).timestamp() for m in range(3)]
    due = db.execute("SELECT next_due, due_after FROM task_cache WHERE task_id = 'every'")
    assert due.fetchone() == ((t0 + timedelta(minutes=3)).timestamp(),
                              (t0 + timedelta(minutes=4)).timestamp())
    assert db.execute("SELECT value FROM meta WHERE key = 'cache_sealed'").fetchone() == ("1",)
    db.close()


def test_loading_croniter_starts_no_process():
    """croniter's import-time 32-bit probe runs `file` through platform.architecture; the
    schedule module answers it from the pointer size instead, and leaves platform as it was."""
    code = """
import sys, platform
spawned = []
sys.addaudithook(lambda e, a: spawned.append(a[1]) if e == "subprocess.Popen" else None)
from datetime import UTC, datetime
from mdcron.core.cron import parse_schedule
fire = parse_schedule("*/5 * 1 * *", UTC).next_after(datetime(2026, 1, 1, tzinfo=UTC))
c = sys.modules["croniter.croniter"]
print(fire.isoformat(), spawned, c.OVERFLOW32B_MODE, platform.architecture.__module__)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["2026-01-01T00:05:00+00:00", "[]", "False", "platform"], \
        out.stdout + out.stderr
