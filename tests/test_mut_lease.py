"""Issue 28: the several-hosts lease (hosts/lease.py, state/leases.py) as the hosts see it, on
real SQLite files shared by two stores of two host names: who holds a task and until when by
the database's clock, a renewal refused once the lease lapsed, a takeover after expiry and the
rows it closes, fences that refuse an old holder's writes; and the renewal thread of a tick,
which keeps a lease, stops the run of a lease taken over, and stops its own run (the watchdog)
when it could not renew in time. Real processes are stopped; time is waited for only as the
database's clock lapsing a short lease, on an event with a deadline."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mdcron.core.clock import minute_floor
from mdcron.core.outcome import Outcome
from mdcron.core.records import replace
from mdcron.hosts.lease import (
    Lease,
    Renewer,
    Stopper,
    acquire,
    busy_reason,
    holder_id,
    lost_reason,
    release,
    renew,
    renewer,
    task_lease,
)
from mdcron.hosts.replace_marks import REPLACE_REQUEST, REPLACED
from mdcron.run.locks import (
    LockInfo,
    boot_id,
    kill_holder,
    lock_path,
    process_start_time,
    stop_run_tree,
)
from mdcron.settings.config import Config
from mdcron.state.leases import Busy, FencedOff, Granted, LeaseRow, lease_span, margin
from mdcron.state.store import Owner, Store

# a thread of the renewer that dies with an exception fails the test (pytest would only warn)
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

NOW = minute_floor(1_795_000_000.0)  # the tick's (injected) clock: not the database's
OWNER = Owner(pid=4242, start=1, boot="boot")
SHORT = 0.3  # seconds: a lease left to lapse by the database's clock

# the run layer's way to end a run whose lease is lost (run/ladder.py passes the same)
STOP = Stopper(kill_holder, stop_run_tree)


def wait_until(check, what: str, seconds: float = 30.0) -> None:
    """Every awaited event here comes within a second or two: 30 s is a loaded machine."""
    give_up = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < give_up, f"waited {seconds} s for {what}"
        time.sleep(0.02)


@pytest.fixture
def hosts(tmp_path):
    path = tmp_path / "state" / "mdcron.db"
    with Store(path, host="a") as a, Store(path, host="b") as b:
        yield a, b


def claimed(store: Store, task_id: str = "job") -> int:
    store.observe([(task_id, True, f"/t/{task_id}.md")], NOW)
    return store.claim_slots([(task_id, NOW, None, f"/t/{task_id}.md")], NOW, OWNER)[(task_id, NOW)]


def lapse(other: Store, task_id: str = "job") -> None:
    """Wait until the task's lease lapsed by the database's clock, as `other` sees it."""
    wait_until(lambda: other.lease_busy(task_id) is None, "the lease to lapse")


# ------------------------------------------------------------------------ pure pieces


def test_holder_id_names_host_pid_and_boot():
    assert holder_id("a", 42, "b00t") == "a:42:b00t"
    assert holder_id("a", 42, None) == "a:42:-"
    assert holder_id("a", 42, "") == "a:42:-"


def test_the_margin_is_a_tenth_and_the_span_adds_it():
    assert margin(90.0) == pytest.approx(9.0)
    assert lease_span(90.0) == pytest.approx(99.0)
    assert lease_span(1.0) == pytest.approx(1.1)


def test_busy_reason_says_who_since_when_and_until_when():
    assert busy_reason(Busy("b", 1_795_000_000.0, 1_795_000_099.0)) == (
        "previous run still running on host b since 2026-11-18 11:06:40 UTC (its lease runs"
        " until 11:08:19 UTC, database clock); this slot is skipped, not queued")


def test_lost_reason_says_what_the_new_holder_knows():
    assert lost_reason("a", 1_795_000_000.0, "b", 7) == (
        "lost: host a unreachable since 2026-11-18 11:06:40 UTC (its last lease renewal,"
        " database clock); it stopped renewing its lease (dead or cut off), so host b took the"
        " task over (fence 7). What the task did there is unknown here: a late result from"
        " that host is kept beside this row")
    assert lost_reason(None, None, "b", 2) == (
        "lost: host ? unreachable; it stopped renewing its lease (dead or cut off), so host b"
        " took the task over (fence 2). What the task did there is unknown here: a late result"
        " from that host is kept beside this row")


# ------------------------------------------------------------------------ taking a lease


def test_the_first_acquisition_has_fence_one_and_expires_a_span_later(hosts):
    a, b = hosts
    before = time.time()
    got = a.take_lease("job", None, "a:1:x", 60)
    assert got == Granted(1, [], None, None)
    assert a.lease("job") == LeaseRow("a:1:x", "a", None, 1)
    assert a.lease("other") is None
    busy = b.lease_busy("job")
    assert busy.host == "a"
    assert before - 2 <= busy.since <= time.time() + 2  # the database's clock, in Unix seconds
    assert busy.until - busy.since == pytest.approx(lease_span(60))
    assert a.lease_busy("job") is None  # its own host's holder does not block it


def test_another_host_is_refused_while_the_lease_runs_and_told_why(hosts):
    a, b = hosts
    run_id = claimed(a)
    lease, refused, taken = acquire(a, "job", run_id, "a:1:x", 60)
    assert lease == Lease("job", "a:1:x", 1) and refused is None and taken == []
    busy = b.take_lease("job", run_id + 1, "b:1:x", 60)
    assert isinstance(busy, Busy) and busy.host == "a"
    assert busy.since == NOW  # since the run started (its row), not since the lease was taken
    assert busy.until > time.time() + 50
    lease, refused, taken = acquire(b, "job", run_id + 1, "b:1:x", 60)
    assert lease is None and taken == []
    assert refused == busy_reason(busy)
    assert a.lease("job") == LeaseRow("a:1:x", "a", run_id, 1)  # nothing was written


def test_the_same_host_takes_its_own_lease_again_at_once_with_a_new_fence(hosts):
    a, _ = hosts
    run_id = claimed(a)
    assert acquire(a, "job", run_id, "a:1:x", 60)[0].fence == 1
    lease, refused, taken = acquire(a, "job", run_id + 1, "a:2:x", 60)
    assert lease == Lease("job", "a:2:x", 2) and refused is None
    assert taken == []  # its own earlier run is not closed as lost: the flock decided
    assert a.lease("job") == LeaseRow("a:2:x", "a", run_id + 1, 2)


def test_a_released_lease_is_free_to_another_host_and_keeps_its_fence(hosts):
    a, b = hosts
    lease_a, _, _ = acquire(a, "job", 1, "a:1:x", 60)
    release(a, lease_a)
    assert a.lease("job") == LeaseRow(None, "a", 1, 1)
    assert b.lease_busy("job") is None
    got = b.take_lease("job", 2, "b:1:x", 60)
    assert got == Granted(2, [], None, None)  # a released cleanly: nothing lost, nobody gone


def test_an_old_holders_release_leaves_the_new_lease_alone(hosts):
    a, b = hosts
    old, _, _ = acquire(a, "job", 1, "a:1:x", 60)
    new, _, _ = acquire(a, "job", 2, "a:2:x", 60)
    release(a, old)
    assert a.lease("job") == LeaseRow("a:2:x", "a", 2, 2)
    assert b.lease_busy("job").host == "a"
    release(a, new)
    assert a.lease("job").holder is None


def test_after_expiry_another_host_takes_over_and_learns_the_rows_to_close(hosts):
    a, b = hosts
    run_id = claimed(a)
    before = time.time()
    lease_a, _, _ = acquire(a, "job", run_id, "a:1:x", SHORT)
    after = time.time()
    lapse(b)
    got = b.take_lease("job", run_id + 1, "b:1:x", SHORT)  # hosts share lease_seconds
    assert isinstance(got, Granted) and got.fence == 2 and got.taken == [run_id]
    assert got.old_host == "a"
    assert before - 0.1 <= got.last_renewed <= after + 0.1  # a's take, by the db's clock
    assert b.lease("job") == LeaseRow("b:1:x", "b", run_id + 1, 2)
    assert not renew(a, lease_a, 60)  # a cannot win it back
    assert b.lease("job").holder == "b:1:x"


def test_a_lapsed_lease_is_not_revived_by_its_holders_late_renewal(hosts):
    """The holder was frozen past its lease; nobody has taken the task yet when it wakes up."""
    a, b = hosts
    lease_a, _, _ = acquire(a, "job", 1, "a:1:x", SHORT)
    lapse(b)
    assert not renew(a, lease_a, 60)
    assert b.lease_busy("job") is None  # still lapsed: the late renewal changed nothing
    assert acquire(b, "job", 2, "b:1:x", 60)[0].fence == 2


def test_a_renewal_extends_only_the_holders_own_lease(hosts):
    a, b = hosts
    lease_a, _, _ = acquire(a, "job", 1, "a:1:x", 2)
    first = b.lease_busy("job").until
    assert renew(a, lease_a, 60)
    assert b.lease_busy("job").until >= first + 55
    assert not renew(a, replace(lease_a, fence=2), 60)
    assert not renew(a, replace(lease_a, holder="a:9:x"), 60)
    assert not renew(a, replace(lease_a, task_id="other"), 60)


def test_extend_lease_keeps_this_hosts_unexpired_holder_only(hosts):
    a, b = hosts
    acquire(a, "job", 1, "a:1:x", 2)
    first = b.lease_busy("job").until
    assert a.extend_lease("job", 60)
    assert b.lease_busy("job").until >= first + 55
    assert not b.extend_lease("job", 60)  # not b's
    assert not a.extend_lease("other", 60)
    lease, _, _ = acquire(a, "job", 2, "a:2:x", SHORT)
    lapse(b)
    assert not a.extend_lease("job", 60)  # lapsed: not revived
    assert b.lease_busy("job") is None
    release(a, lease)
    assert not a.extend_lease("job", 60)


def test_a_fenced_holders_writes_are_refused_and_say_by_whom(hosts):
    a, b = hosts
    run_id = claimed(a)
    lease_a, _, _ = acquire(a, "job", run_id, "a:1:x", SHORT)
    a.fence = ("job", lease_a.fence)
    a.add_note(run_id, "mine")
    lapse(b)
    acquire(b, "job", run_id + 1, "b:1:x", 60)
    with pytest.raises(FencedOff) as refused:
        a.add_note(run_id, "late")
    assert str(refused.value) == (
        "the lease of job was taken over by host b (fence 2) after it expired; this holder's"
        " write (fence 1) was refused: nothing changed")
    a.fence = ("ghost", 1)
    with pytest.raises(FencedOff) as refused:
        a.add_note(run_id, "late")
    assert str(refused.value) == (
        "the lease of ghost was taken over by nobody after it expired; this holder's write"
        " (fence 1) was refused: nothing changed")
    a.fence = None
    assert "late" not in str(a.run(run_id)["extra"]) and "mine" in str(a.run(run_id)["extra"])


def test_the_database_clock_is_unix_seconds_on_sqlite(hosts):
    a, _ = hosts
    before = time.time()
    a.take_lease("job", None, "a:1:x", 0)
    with sqlite3.connect(a.path) as db:
        acquired, expires = db.execute("SELECT acquired_at, expires_at FROM leases").fetchone()
    assert before - 1 <= acquired <= time.time() + 1
    assert expires == pytest.approx(acquired)


def test_task_lease_on_sqlite_leaves_it_to_the_flock(hosts):
    a, _ = hosts
    with task_lease(None, a, None, 1, stop=STOP) as refused:
        assert refused is None
    assert a.lease("job") is None and a.fence is None


# ------------------------------------------------------------------------ the renewal thread


def config_for(home: Path, seconds: float = 1.2) -> Config:
    return Config(home=home, lease_seconds=seconds, kill_grace=1.0)


def running_task(config: Config, task_id: str = "job", run_id: int = 1,
                 tick: int | None = None) -> subprocess.Popen:
    """A task process of this tick (or of the tick `tick`), named in the task's lock file as a
    run would be."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            start_new_session=True)
    wait_until(lambda: process_start_time(proc.pid) is not None, "the task to start")
    tick = os.getpid() if tick is None else tick
    info = LockInfo(task_id=task_id, run_id=run_id, tick_pid=tick,
                    tick_start=process_start_time(tick), boot_id=boot_id(),
                    pgid=proc.pid, child_start=process_start_time(proc.pid),
                    started_at=NOW, deadline=NOW + 3600)
    path = lock_path(config.locks_dir, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(info.to_json(), encoding="utf-8")
    return proc


def stopped(proc: subprocess.Popen) -> int:
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("the task was not stopped") from None


def said(capsys, text: str) -> str:
    """Everything the tick printed to stderr once `text` is among it (its threads print)."""
    seen: list[str] = []

    def found() -> bool:
        seen.append(capsys.readouterr().err)
        return text in "".join(seen)

    wait_until(found, f"stderr to say {text!r}")
    return "".join(seen)


@pytest.fixture
def other_tick():
    """A process standing for another tick (never this test's parent: a wrong kill must hit
    only it)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    wait_until(lambda: process_start_time(proc.pid) is not None, "the other tick to start")
    yield proc.pid
    proc.kill()
    proc.wait()


def idle(keeper: Renewer) -> None:
    wait_until(lambda: keeper.thread is None, "the renewal thread to end")


def test_the_thread_keeps_a_lease_past_its_span_until_dropped(hosts, tmp_path):
    a, b = hosts
    # 3 s: a renewal may come 1.4 s late before a fences itself (0.9 s with 2 s: a loaded
    # machine's pause)
    config = config_for(tmp_path, 3.0)
    lease, _, _ = acquire(a, "job", 1, "a:1:x", config.lease_seconds)
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a)
    end = time.monotonic() + 2 * lease_span(config.lease_seconds)
    while time.monotonic() < end:  # two spans: held only because it is renewed
        assert b.lease_busy("job") is not None, "the lease lapsed while held"
        time.sleep(0.05)
    assert a.fenced_off is None
    keeper.drop(lease)
    idle(keeper)
    lapse(b)  # no longer renewed
    assert acquire(b, "job", 2, "b:1:x", 60)[0].fence == 2


def test_a_lease_taken_over_stops_its_run_and_says_so(hosts, tmp_path, capsys):
    a, b = hosts
    config = config_for(tmp_path)
    lease_a, _, _ = acquire(a, "job", 1, "a:1:x", SHORT)
    lapse(b)
    acquire(b, "job", 2, "b:1:x", 60)
    proc = running_task(config)
    keeper = Renewer(config, a, STOP)
    keeper.add(lease_a, a)
    assert stopped(proc) == -signal.SIGTERM
    idle(keeper)
    said(capsys, f"mdcron: job: its lease was taken over by another host (this tick could"
                 f" not renew it in time); killed task process group {proc.pid}; its result"
                 " will not be recorded as the run's")
    assert a.fenced_off is None  # the fence in the database refuses its writes already


def test_a_lease_taken_over_never_stops_another_ticks_run(hosts, tmp_path, capsys, other_tick):
    """The task's lock names a run of another tick (this one's run already ended there)."""
    a, b = hosts
    config = config_for(tmp_path)
    lease_a, _, _ = acquire(a, "job", 1, "a:1:x", SHORT)
    lapse(b)
    acquire(b, "job", 2, "b:1:x", 60)
    proc = running_task(config, tick=other_tick)
    keeper = Renewer(config, a, STOP)
    keeper.add(lease_a, a)
    said(capsys, "mdcron: job: its lease was taken over by another host (this tick could not"
                 " renew it in time); no process to stop; its result will not be recorded as"
                 " the run's")
    idle(keeper)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_holder_that_could_not_renew_in_time_stops_its_own_run(hosts, tmp_path, capsys):
    a, b = hosts
    config = config_for(tmp_path)
    run_id = claimed(a)
    lease, _, _ = acquire(a, "job", run_id, "a:1:x", 60)
    a.fence = ("job", lease.fence)
    proc = running_task(config, run_id=run_id)
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a, sent=time.monotonic() - 5)  # its last renewal: 5 s ago, of a 1.2 s lease
    assert stopped(proc) == -signal.SIGTERM
    idle(keeper)
    with pytest.raises(FencedOff, match="this host could not renew the lease of job for 5"):
        a.add_note(run_id, "late")
    err = said(capsys, "its result will not be recorded")
    assert ("(cut off from the database, or it answered too late): it stopped the run itself,"
            " before another host may take the lease (1.2 s + a 0.12 s margin after its last"
            f" renewal); killed task process group {proc.pid}; its result will not be recorded"
            " as the run's") in err
    assert "mdcron: job: this host could not renew the lease of job for 5." in err
    assert b.lease_busy("job").host == "a"  # the database still says a: a stopped first


def test_a_lease_renewed_in_time_is_not_fenced_and_a_dropped_one_is_not_stopped(hosts, tmp_path,
                                                                                capsys):
    a, _ = hosts
    config = config_for(tmp_path, 5.0)  # a round may be 2 s late (a loaded machine)
    lease, _, _ = acquire(a, "job", 1, "a:1:x", 60)
    proc = running_task(config)
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a, sent=time.monotonic() - 0.5)  # within lease - 2 margins (4 s)
    wait_until(lambda: keeper.conn is not None, "a renewal round")
    wait_until(lambda: not any(t.name == "lease-renewal-round" for t in threading.enumerate()),
               "the round to end")
    keeper.drop(Lease("job", "a:1:x", 9))  # not the lease it holds: kept
    assert "job" in keeper.held
    keeper.drop(lease)
    idle(keeper)
    assert proc.poll() is None and a.fenced_off is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert capsys.readouterr().err == ""  # nothing to say, and no thread's traceback


def test_a_renewer_used_again_renews_at_once_without_a_stale_connection(hosts, tmp_path,
                                                                       capsys):
    """The daemon's one renewer: a later run's lease after an earlier run's ended."""
    a, b = hosts
    # 3 s: a round slower than a third of the lease is said on stderr (0.4 s with 1.2 s: a
    # loaded machine's pause), and this test wants stderr empty
    config = config_for(tmp_path, 3.0)
    keeper = Renewer(config, a, STOP)
    for run_id in (1, 2):
        lease, _, _ = acquire(a, "job", run_id, f"a:{run_id}:x", config.lease_seconds)
        keeper.add(lease, a)
        until = b.lease_busy("job").until
        wait_until(lambda: b.lease_busy("job").until > until, "a renewal")  # noqa: B023
        keeper.drop(lease)
        idle(keeper)
        assert keeper.conn is None  # closed with the thread
    assert capsys.readouterr().err == ""


def test_the_watchdog_stops_the_run_before_another_host_may_take_the_lease(hosts, tmp_path):
    """Issue 23: cut off from the database, the holder stops its run at lease - margin after
    its last renewal; the database lets another host take the lease only at lease + margin."""
    a, b = hosts
    config = config_for(tmp_path, 3.0)
    proc = running_task(config)
    blocker = sqlite3.connect(a.path, isolation_level=None)
    try:
        sent = time.monotonic()
        lease, _, _ = acquire(a, "job", 1, "a:1:x", config.lease_seconds)
        blocker.execute("BEGIN IMMEDIATE")  # from now on no renewal gets through
        keeper = Renewer(config, a, STOP)
        keeper.add(lease, a, sent=sent)
        lapse(b)  # by the database's clock, 3.3 s after the take: b may take it now
        assert proc.poll() == -signal.SIGTERM, "the run was still going when the lease lapsed"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    idle(keeper)


def test_the_watchdog_looks_at_every_lease_the_tick_holds(hosts, tmp_path):
    a, _ = hosts
    config = config_for(tmp_path, 3.0)
    fresh, _, _ = acquire(a, "job", 1, "a:1:x", 60)
    late, _, _ = acquire(a, "late", 2, "a:1:x", 60)
    proc = running_task(config, "late", 2)
    keeper = Renewer(config, a, STOP)
    keeper.add(fresh, a)  # held first, renewed in time
    keeper.add(late, sent=time.monotonic() - 10)  # a resource unit's lease, long overdue
    assert stopped(proc) == -signal.SIGTERM
    assert list(keeper.held) == ["job"]
    keeper.drop(fresh)
    idle(keeper)


def test_a_locked_database_fails_the_round_and_the_watchdog_stops_the_run(hosts, tmp_path,
                                                                          capsys):
    a, _ = hosts
    config = config_for(tmp_path)
    lease, _, _ = acquire(a, "job", 1, "a:1:x", 60)
    proc = running_task(config)
    blocker = sqlite3.connect(a.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database: renewals wait
    try:
        keeper = Renewer(config, a, STOP)
        keeper.add(lease, a)
        assert stopped(proc) == -signal.SIGTERM
        idle(keeper)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    err = said(capsys, "its result will not be recorded")
    assert ("mdcron: the lease renewal got no answer within 0.4 s; trying again on a new"
            " connection") in err
    assert "could not renew the leases" not in err  # waiting is not failing: no error to say
    assert "mdcron: job: this host could not renew the lease of job for" in err


def test_a_renewal_the_database_refuses_is_said_and_the_watchdog_stops_the_run(hosts, tmp_path,
                                                                               capsys):
    a, _ = hosts
    config = config_for(tmp_path)
    lease, _, _ = acquire(a, "job", 1, "a:1:x", 60)
    proc = running_task(config)
    a.connect().execute("DROP TABLE leases")  # every renewal now fails with an error
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a)
    assert stopped(proc) == -signal.SIGTERM
    idle(keeper)
    err = said(capsys, "its result will not be recorded")
    assert "mdcron: could not renew the leases of this tick: no such table: leases\n" in err
    assert "mdcron: job: this host could not renew the lease of job for" in err


def test_a_replace_request_from_another_host_stops_the_run(hosts, tmp_path):
    a, b = hosts
    config = config_for(tmp_path, 3.0)
    run_id = claimed(a)
    lease, _, _ = acquire(a, "job", run_id, "a:1:x", 60)
    proc = running_task(config, run_id=run_id)
    b.set_meta(REPLACE_REQUEST + "job", "replaced by slot 12:01 on host b")
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a, replace=True)
    assert stopped(proc) == -signal.SIGTERM
    row = a.run(run_id)
    assert row["status"] == Outcome.SKIPPED.value
    assert time.time() - 30 < row["finished_at"] <= time.time()  # the real time: no tick clock
    assert row["error"] == "replaced by slot 12:01 on host b: stopped (TERM, grace, KILL)"
    assert a.get_meta(REPLACED + "job") == f"{run_id}\treplaced by slot 12:01 on host b"
    assert a.get_meta(REPLACE_REQUEST + "job") is None  # taken: one host acts on it
    keeper.drop(lease)
    idle(keeper)


def test_without_a_replace_request_or_the_option_the_run_goes_on(hosts, tmp_path):
    a, b = hosts
    config = config_for(tmp_path, 5.0)  # two rounds with room for a loaded machine's pauses
    run_id = claimed(a)
    lease, _, _ = acquire(a, "job", run_id, "a:1:x", config.lease_seconds)
    proc = running_task(config, run_id=run_id)
    b.set_meta(REPLACE_REQUEST + "job", "replaced by slot 12:01 on host b")
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a)  # the task has no `overlap: replace`
    for _ in range(2):  # two renewal rounds: nothing else must happen
        until = b.lease_busy("job").until
        wait_until(lambda: b.lease_busy("job").until > until, "a renewal")  # noqa: B023
    assert proc.poll() is None
    assert a.get_meta(REPLACE_REQUEST + "job") is not None
    keeper.drop(lease)
    idle(keeper)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert a.run(run_id)["status"] == "running"


def test_a_replace_request_for_a_run_of_another_tick_is_taken_but_stops_nothing(hosts,
                                                                                tmp_path,
                                                                                other_tick):
    a, b = hosts
    config = config_for(tmp_path, 3.0)
    run_id = claimed(a)
    lease, _, _ = acquire(a, "job", run_id, "a:1:x", config.lease_seconds)
    proc = running_task(config, run_id=run_id, tick=other_tick)  # not this process's run
    b.set_meta(REPLACE_REQUEST + "job", "replaced by slot 12:01 on host b")
    keeper = Renewer(config, a, STOP)
    keeper.add(lease, a, replace=True)
    wait_until(lambda: a.get_meta(REPLACE_REQUEST + "job") is None, "the request to be taken")
    until = b.lease_busy("job").until
    wait_until(lambda: b.lease_busy("job").until > until, "the next renewal")
    assert proc.poll() is None and a.run(run_id)["status"] == "running"
    assert a.get_meta(REPLACED + "job") is None
    keeper.drop(lease)
    idle(keeper)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_the_process_has_one_renewer_with_the_latest_settings(hosts, tmp_path, monkeypatch):
    from mdcron.hosts import lease as lease_module

    monkeypatch.setattr(lease_module, "_renewer", None)  # a new process: none made yet
    a, b = hosts
    first = renewer(config_for(tmp_path), a, STOP)
    newer = config_for(tmp_path, 30)
    again = renewer(newer, b, STOP)
    assert again is first and again.config is newer
    assert again.where == (Store, b.path, None, "b")


def test_a_tick_that_ends_while_holding_a_lease_is_not_kept_alive_by_its_renewals(tmp_path):
    """The renewal thread is a daemon: a tick whose main thread ends (an error path that never
    dropped its lease) exits; its lease then lapses for another host to take."""
    import mdcron

    code = ("import sys\n"
            "from pathlib import Path\n"
            "from mdcron.hosts.lease import Renewer, Stopper, acquire\n"
            "from mdcron.run.locks import kill_holder, stop_run_tree\n"
            "from mdcron.settings.config import Config\n"
            "from mdcron.state.store import Store\n"
            "home = Path(sys.argv[1])\n"
            "store = Store(home / 'state' / 'mdcron.db', host='a')\n"
            "lease, _, _ = acquire(store, 'job', 1, 'a:1:x', 1.2)\n"
            "stop = Stopper(kill_holder, stop_run_tree)\n"
            "Renewer(Config(home=home, lease_seconds=1.2), store, stop).add(lease, store)\n"
            "print('held', flush=True)\n")
    (tmp_path / "state").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, cwd=Path(mdcron.__file__).parent.parent)
    try:
        assert proc.stdout.readline() == "held\n"
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
