"""Issue 28: a downstream whose previous run still runs on ANOTHER host (schedule/chains.py:
previous_run, hold_back), as that host's lease on a shared PostgreSQL state says, by the
database's clock. Apart from tests/test_mut_chains.py (quick, SQLite) because each needs the
real PostgreSQL of tests/pg_server.py. Two stores of two host names share one database; the
lease is taken through the store's own statements, no function of the project is patched."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdcron.core.clock import minute_floor
from mdcron.schedule.chains import Pending, hold_back, previous_run
from mdcron.settings.config import Config
from mdcron.state.store import Owner, Store
from mdcron.tasks.task import Task

NOW = minute_floor(1_795_000_000.0)  # 2026-11-18 11:06:00 UTC: the run's (injected) start
OWNER = Owner(pid=4242, start=1, boot="boot")
SINCE = "still running on host a since 2026-11-18 11:06:00 UTC"


@pytest.fixture
def hosts(pg_url, tmp_path):
    path = tmp_path / "state" / "mdcron.db"
    with Store(path, url=pg_url, host="a") as a, Store(path, url=pg_url, host="b") as b:
        yield a, b


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(home=tmp_path, timezone="UTC")


def running_on(store: Store, task_id: str = "load") -> int:
    """The task's run claimed at NOW on the store's host, holding its lease (as a tick there
    holds it while the run goes on)."""
    store.observe([(task_id, True, f"/t/{task_id}.md")], NOW)
    run_id = store.claim_slots([(task_id, NOW, None, f"/t/{task_id}.md")], NOW, OWNER)[
        (task_id, NOW)]
    store.take_lease(task_id, run_id, f"a:{OWNER.pid}:boot", 600)
    return run_id


def downstream(task_id: str = "load", window: float = 3600.0) -> Task:
    return Task(id=task_id, path=Path(f"/t/{task_id}.md"), schedule="after extract",
                after=("extract",), chain_window=window, title=task_id)


def test_the_previous_run_on_another_host_is_named_with_its_start(hosts, config):
    a, b = hosts
    assert previous_run(b, config, "load") is None  # no run anywhere: it may start
    running_on(a)
    assert previous_run(b, config, "load") == SINCE
    assert previous_run(a, config, "load") is None  # its own host's lease: the flock tells
    assert previous_run(b, config, "other") is None


def test_the_previous_run_ended_on_another_host_frees_the_downstream(hosts, config):
    a, b = hosts
    running_on(a)
    a.release_lease("load", 1)
    assert previous_run(b, config, "load") is None


def test_a_downstream_held_by_another_hosts_run_waits_then_is_skipped_past_its_window(
        hosts, config):
    a, b = hosts
    running_on(a)
    slot = NOW + 60
    owed = Pending(downstream(), "run", slot, "upstream extract succeeded at 11:07")
    failed = Pending(downstream(), "skip", slot + 60, "upstream extract failed at 11:08")
    said: list[str] = []
    seen: set[tuple[str, float]] = set()
    assert hold_back(b, config, [owed, failed], slot + 5, seen, said.append) == [failed]
    assert said == [f"load: waits for the previous run ({SINCE}) before its run for"
                    " 2026-11-18 11:07 UTC (upstream extract succeeded at 11:07); not claimed"
                    " yet"]
    assert hold_back(b, config, [owed], slot + 3600, seen, said.append) == []
    assert len(said) == 1  # said once per slot
    assert hold_back(b, config, [owed], slot + 3601, seen, said.append) == [
        Pending(owed.task, "skip", slot, f"upstream extract succeeded at 11:07, but the previous"
                f" run was {SINCE} for longer than the chain window (3600 s)")]
    assert hold_back(a, config, [owed], slot + 5, set(), said.append) == [owed]
