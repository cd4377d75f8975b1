"""Issue 11, per-task leases (lease.py): fences, expiry by the database's clock, renewal, on
PostgreSQL and SQLite alike; the schema step that adds them to an existing database."""

from __future__ import annotations

import time

import pytest

from mdcron.core.clock import minute_floor
from mdcron.core.outcome import Outcome, RunResult
from mdcron.hosts.lease import FencedOff, acquire, release, renew
from mdcron.state.store import SCHEMA_VERSION, Owner, Store

NOW = minute_floor(1_795_000_000.0)
OWNER = Owner(pid=4242, start=1, boot="boot")
SHORT = 0.3  # seconds: these leases expire by the database's clock, so the test waits for it


@pytest.fixture
def two_hosts(state_url, tmp_path):
    path = tmp_path / "state" / "mdcron.db"
    with Store(path, url=state_url, host="a") as a, Store(path, url=state_url, host="b") as b:
        yield a, b


def test_a_holder_whose_lease_was_taken_over_writes_nothing(two_hosts):
    a, b = two_hosts
    a.observe([("job", True, "/t/job.md")], NOW)
    run_id = a.claim_slots([("job", NOW, None, "/t/job.md")], NOW, OWNER)[("job", NOW)]
    # a long lease first: b's refusal below must not depend on how fast a loaded machine runs
    lease_a, refused, _ = acquire(a, "job", run_id, "a:4242:boot", 60)
    assert lease_a is not None and lease_a.fence == 1 and refused is None
    a.fence = ("job", lease_a.fence)
    a.add_note(run_id, "mine")  # while the lease is a's, its writes go through
    lease, refused, _ = acquire(b, "job", run_id + 1, "b:1:boot", SHORT)
    assert lease is None and refused.startswith("previous run still running on host a")
    assert renew(a, lease_a, SHORT)  # a's last renewal; nobody renews it after
    give_up = time.monotonic() + 30  # the event: the lease lapsed by the database's clock
    while b.lease_busy("job") is not None:
        assert time.monotonic() < give_up, "a's lease never lapsed"
        time.sleep(0.02)
    lease_b, refused, taken = acquire(b, "job", run_id + 1, "b:1:boot", 60)
    assert lease_b is not None and lease_b.fence == 2 and taken == [run_id]
    assert b.end_running(run_id, Outcome.TIMEOUT, "taken over", NOW + 200)
    before = a.run(run_id)
    late = RunResult(Outcome.SUCCESS, exit_code=0, duration=300.0)
    for write in (lambda: a.finish_run(run_id, late, NOW + 300),
                  lambda: a.end_running(run_id, Outcome.CRASHED, "late", NOW + 300),
                  lambda: a.add_note(run_id, "late"),
                  lambda: a.count_failure("job", failed=True),
                  lambda: a.set_enabled("job", False, NOW + 300, suspended=True)):
        with pytest.raises(FencedOff, match="taken over by host b .fence 2."):
            write()
    assert a.run(run_id) == before  # status timeout, b's reason, a's first note only
    a.fence = None
    state = a.task_states()["job"]
    assert state.enabled and state.consecutive_failures == 0
    assert not renew(a, lease_a, 60)  # a cannot win it back
    release(a, lease_a)  # an old holder's release leaves the new lease alone
    lease, refused, _ = acquire(a, "job", run_id + 2, "a:4242:boot", 60)
    assert lease is None and "host b" in refused
    assert renew(b, lease_b, 60)


def test_a_renewed_lease_does_not_expire_and_a_released_one_is_free(two_hosts):
    a, b = two_hosts
    interval = 2.5  # a pause of the test of up to this long (a loaded machine's 1-2 s) is no lapse
    lease_a, _, _ = acquire(a, "job", 1, "a:1:x", interval)
    past_first = time.monotonic() + interval + 0.2
    while time.monotonic() < past_first:  # renewed well within each interval: held past it
        time.sleep(interval / 10)
        assert renew(a, lease_a, interval)
    assert acquire(b, "job", 2, "b:1:x", SHORT)[0] is None
    release(a, lease_a)
    lease_b, refused, taken = acquire(b, "job", 2, "b:1:x", SHORT)
    assert lease_b is not None and lease_b.fence == 2 and taken == []  # a released it cleanly


def test_an_existing_postgresql_database_at_version_5_gains_the_lease_table(pg_url, tmp_path):
    """A database a PostgreSQL mdcron of schema 5 created is upgraded in place."""
    import psycopg

    from mdcron.state.schema import PG_SCHEMA, PG_SCHEMA_VERSION

    assert PG_SCHEMA_VERSION == 5 < SCHEMA_VERSION
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(PG_SCHEMA)
        conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '5')")
        conn.execute("INSERT INTO runs(task_id, scheduled_for, trigger, status, started_at)"
                     " VALUES ('old', 1, 'schedule', 'success', 1)")
    with Store(tmp_path / "state" / "mdcron.db", url=pg_url, host="a") as store:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.run(1)["task_id"] == "old"
        assert acquire(store, "job", 1, "a:1:x", 60)[0].fence == 1


def test_lease_seconds_must_be_a_positive_duration(home, cli):
    (home / "scheduler.yaml").write_text("lease_seconds: 0\n", encoding="utf-8")
    out = cli("doctor")
    assert "lease_seconds must be more than 0" in out.stdout + out.stderr
