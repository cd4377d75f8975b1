"""Issue 28: the lease around a run on a shared PostgreSQL state (hosts/lease.task_lease) and the
lease statements on PostgreSQL's own clock (state/leases.py), as two hosts see them. Apart from
tests/test_mut_lease.py (SQLite, quick) because each needs the real PostgreSQL of pg_server."""

from __future__ import annotations

import calendar
import time
from types import SimpleNamespace

import pytest
from test_mut_lease import SHORT, STOP, wait_until

from mdcron.core.clock import minute_floor
from mdcron.core.outcome import Outcome
from mdcron.hosts.lease import (
    FencedOff,
    Renewer,
    acquire,
    holder_id,
    lost_reason,
    renew,
    renewer,
    task_lease,
)
from mdcron.settings.config import Config
from mdcron.state.leases import Busy, LeaseRow, lease_span
from mdcron.state.store import Owner, Store

NOW = minute_floor(1_795_000_000.0)  # the tick's (injected) clock


@pytest.fixture
def hosts(pg_url, tmp_path):
    path = tmp_path / "state" / "mdcron.db"
    with Store(path, url=pg_url, host="a") as a, Store(path, url=pg_url, host="b") as b:
        yield a, b


def tick(home, pid: int, seconds: float = 60.0) -> SimpleNamespace:
    """What task_lease reads of a tick's context: its config, owner and clock."""
    return SimpleNamespace(config=Config(home=home, lease_seconds=seconds),
                           owner=Owner(pid=pid, start=1, boot="b00t"),
                           clock=SimpleNamespace(now=lambda: NOW + 5))


def claimed(store: Store, slot: float = NOW) -> int:
    store.observe([("job", True, "/t/job.md")], slot)
    owner = Owner(pid=4242, start=1, boot="boot")
    return store.claim_slots([("job", slot, None, "/t/job.md")], slot, owner)[("job", slot)]


TASK = SimpleNamespace(id="job", overlap="skip")


def test_a_run_holds_the_lease_fenced_and_renewed_then_frees_it(hosts, tmp_path):
    a, b = hosts
    run_id = claimed(a)
    holder = holder_id("a", 7, "b00t")
    ctx = tick(tmp_path, 7)
    with task_lease(ctx, a, TASK, run_id, stop=STOP) as refused:
        assert refused is None
        assert a.fence == ("job", 1)
        assert a.lease("job") == LeaseRow(holder, "a", run_id, 1)
        kept = renewer(ctx.config, a, STOP).held["job"]
        assert kept.lease.holder == holder and kept.store is a and kept.replace is False
        with task_lease(tick(tmp_path, 8), b, TASK, run_id + 1, stop=STOP) as other:
            assert other.startswith("previous run still running on host a since"
                                    " 2026-11-18 11:06:00 UTC (its lease runs until")
            assert b.fence is None
    assert (a.fence, a.fenced_off) == (None, None)
    assert a.lease("job") == LeaseRow(None, "a", run_id, 1)  # released: free for any host
    assert "job" not in renewer(ctx.config, a, STOP).held
    assert b.lease_busy("job") is None


def test_overlap_replace_is_passed_to_the_renewal_thread(hosts, tmp_path):
    a, _ = hosts
    ctx = tick(tmp_path, 7)
    with task_lease(ctx, a, SimpleNamespace(id="job", overlap="replace"), 1, stop=STOP):
        assert renewer(ctx.config, a, STOP).held["job"].replace is True


def test_a_new_host_closes_the_lapsed_holders_run_as_lost(hosts, tmp_path):
    a, b = hosts
    run_id = claimed(a)
    taken_at = time.time()
    acquire(a, "job", run_id, holder_id("a", 7, "b00t"), SHORT)  # a's tick then died
    wait_until(lambda: b.lease_busy("job") is None, "a's lease to lapse")
    lost: list[tuple[int, str]] = []
    with task_lease(tick(tmp_path, 8, SHORT), b, TASK, run_id + 1, lost, stop=STOP) as refused:
        assert refused is None and b.fence == ("job", 2)
    assert [r for r, _ in lost] == [run_id]
    why = lost[0][1]
    assert why.startswith("lost: host a unreachable since ")
    assert "so host b took the task over (fence 2)" in why
    row = a.run(run_id)
    assert (row["status"], row["error"], row["finished_at"]) == (Outcome.LOST.value, why, NOW + 5)
    renewed = calendar.timegm(time.strptime(why.split("since ", 1)[1][:19], "%Y-%m-%d %H:%M:%S"))
    assert abs(renewed - taken_at) < 5  # a's last renewal, by the database's clock
    assert why == lost_reason("a", renewed, "b", 2)


def test_without_a_list_the_lost_row_is_still_closed(hosts, tmp_path):
    a, b = hosts
    run_id = claimed(a)
    acquire(a, "job", run_id, "a:7:x", SHORT)
    wait_until(lambda: b.lease_busy("job") is None, "a's lease to lapse")
    with task_lease(tick(tmp_path, 8), b, TASK, run_id + 1, stop=STOP) as refused:
        assert refused is None
    assert a.run(run_id)["status"] == Outcome.LOST.value


def test_a_fenced_off_run_does_not_release_the_lease(hosts, tmp_path):
    a, b = hosts
    with pytest.raises(FencedOff), task_lease(tick(tmp_path, 7), a, TASK, 1, stop=STOP):
        raise FencedOff("taken over")
    assert a.lease("job").holder is not None  # not released: it is not this holder's to free
    assert a.fence is None
    with task_lease(tick(tmp_path, 7), a, TASK, 2, stop=STOP):
        a.fenced_off = "the watchdog stopped the run"  # what Renewer sets when overdue
    assert a.lease("job").holder is not None and (a.fence, a.fenced_off) == (None, None)
    assert b.lease_busy("job").host == "a"


def test_a_failed_release_is_said_and_the_run_goes_on(hosts, tmp_path, capsys):
    a, _ = hosts
    with task_lease(tick(tmp_path, 7), a, TASK, 1, stop=STOP):
        a.fence = None
        a.connect().execute("DROP TABLE leases")  # the release will find no table
    assert "mdcron: could not release the lease of job: " in capsys.readouterr().err


def test_the_statements_use_postgresqls_clock(hosts):
    a, b = hosts
    before = time.time()
    got = a.take_lease("job", None, "a:1:x", 60)
    assert got.fence == 1
    busy = b.lease_busy("job")
    assert isinstance(busy, Busy) and before - 2 <= busy.since <= time.time() + 2
    assert busy.until - busy.since == pytest.approx(lease_span(60))
    first = busy.until
    lease, _, _ = acquire(a, "job", None, "a:1:x", 60)
    assert renew(a, lease, 120) and b.lease_busy("job").until > first + 50
    assert a.extend_lease("job", 300) and b.lease_busy("job").until > first + 200
    short, _, _ = acquire(a, "job", None, "a:2:x", SHORT)
    wait_until(lambda: b.lease_busy("job") is None, "the lease to lapse")
    assert not renew(a, short, 60) and not a.extend_lease("job", 60)


def test_the_renewal_thread_keeps_a_postgresql_lease_on_its_own_connection(hosts, tmp_path):
    a, b = hosts
    # 3 s: a renewal may come 1.4 s late before a fences itself (0.9 s with 2 s: a loaded
    # machine's pause, of this process or of PostgreSQL)
    config = Config(home=tmp_path, lease_seconds=3.0)
    lease, _, _ = acquire(a, "job", 1, "a:1:x", config.lease_seconds)
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a)
    end = time.monotonic() + 2 * lease_span(config.lease_seconds)
    while time.monotonic() < end:  # two spans: held only because it is renewed, on PostgreSQL
        assert b.lease_busy("job") is not None, "the lease lapsed while held"
        time.sleep(0.05)
    assert a.fenced_off is None
    keeper.drop(lease)
    wait_until(lambda: keeper.thread is None, "the renewal thread to end")
    wait_until(lambda: b.lease_busy("job") is None, "the lease to lapse once dropped")
