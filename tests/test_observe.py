"""One first-seen / enabled-again rule: the pure observe() that dry-run, `why` and the plan use
agrees with what the tick records (store.observe, the same rule in SQL), sighting after
sighting."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mdcron.core.clock import minute_floor
from mdcron.schedule.observe import observe
from mdcron.state.store import Store

T0 = 1_795_000_000.0


@dataclass(frozen=True)
class Sighting:
    id: str
    enabled: bool
    path: str


sightings = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.booleans(), st.sampled_from(["a.md", "b.md"]),
              st.floats(min_value=0, max_value=86400 * 3)),
    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(sightings)
def test_pure_rule_matches_what_the_tick_records(steps):
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "mdcron.db") as store:
        expected: dict = {}
        now = T0
        for task_id, enabled, name, later in steps:
            now += later
            seen = Sighting(task_id, enabled, f"/home/tasks/{name}")
            expected[task_id] = observe(expected.get(task_id), seen, now)
            recorded = store.observe([(seen.id, seen.enabled, seen.path)], now)
            assert recorded == expected


def test_first_seen_and_enabled_again_wait_for_the_next_fire():
    now = T0 + 90.5
    new = observe(None, Sighting("a", True, "/t/a.md"), now)
    assert (new.first_seen, new.not_before, new.last_slot) == (now, minute_floor(now), None)
    off = observe(new, Sighting("a", False, "/t/a.md"), now + 600)
    assert not off.enabled and off.not_before == new.not_before
    again = observe(off, Sighting("a", True, "/t/a.md"), now + 3600)
    assert again.enabled and again.not_before == minute_floor(now + 3600)
    assert observe(again, Sighting("a", True, "/t/a.md"), now + 7200) is again
