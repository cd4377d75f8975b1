"""Issue 28 (mutation testing): what the state remembers between ticks (task_state.py) and the
claim (runs.py: each slot runs exactly once, across ticks and hosts), read back the way the
next tick, another host, `history` or the dashboard reads them. Real SQLite files; two Store
objects on one file stand for two ticks (or two hosts sharing the state)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from mdcron.core.outcome import Outcome, RunResult
from mdcron.state.runs import Owner, RunFilter, SlotRow, running_on
from mdcron.state.store import Store
from mdcron.state.task_state import StateRow, Suspension, TaskState, state_rows

NOW = 1_800_000_030.0  # 30 s into a minute
MINUTE = 1_800_000_000.0
OWNER = Owner(pid=4242, start=777, boot="boot-a")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "mdcron.db"


@pytest.fixture
def store(db_path: Path):
    db_path.parent.mkdir()
    with Store(db_path, host="alpha") as s:
        yield s


def other(db_path: Path, host: str = "beta") -> Store:
    """A second tick (or host) on the same state."""
    return Store(db_path, host=host)


def row(store: Store, run_id: int) -> dict:
    found = store.run(run_id)
    assert found is not None
    return found


def column(db_path: Path, sql: str, args: tuple = ()) -> list:
    db = sqlite3.connect(db_path)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


# ================================================================ task_state.py


def test_a_task_seen_first_is_remembered_from_the_start_of_its_minute(store):
    states = store.observe([("a", True, "/t/a.md"), ("b", False, "/t/b.md")], NOW)
    assert states["a"] == TaskState("a", NOW, MINUTE, None, True, 0, "/t/a.md")
    assert states["b"] == TaskState("b", NOW, MINUTE, None, False, 0, "/t/b.md")
    assert store.task_states() == states  # what observe returned is what the next read sees
    assert store.task_state("a") == states["a"]
    assert store.task_state("nobody") is None


def test_a_second_sighting_changes_nothing_and_keeps_first_seen(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    later = store.observe([("a", True, "/t/a.md")], NOW + 3600)
    assert later["a"].first_seen == NOW and later["a"].not_before == MINUTE


def test_a_task_enabled_again_counts_from_the_minute_it_came_back(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    off = store.observe([("a", False, "/t/a.md")], NOW + 600)
    assert off["a"].enabled is False and off["a"].not_before == MINUTE  # disabling moves nothing
    back = store.observe([("a", True, "/t/moved.md")], NOW + 7200)
    assert back["a"] == TaskState("a", NOW, MINUTE + 7200, None, True, 0, "/t/moved.md")


def test_a_task_file_moved_is_recorded_at_its_new_path(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    moved = store.observe([("a", True, "/t/sub/a.md")], NOW + 60)
    assert moved["a"].path == "/t/sub/a.md" and moved["a"].not_before == MINUTE
    assert store.task_state("a").path == "/t/sub/a.md"


def test_the_cache_rows_are_named_tuples_that_turn_into_states(store):
    store.observe([("a", True, "/t/a.md"), ("b", False, None)], NOW)
    rows = store.state_rows()
    assert rows == state_rows(store.connect())
    assert rows["b"] == ("b", NOW, MINUTE, None, 0, 0, None)
    assert rows["b"].enabled == 0 and rows["a"].enabled == 1
    assert rows["a"].as_state() == store.task_state("a")
    assert rows["b"].as_state().enabled is False
    assert StateRow.of(store.task_state("b")) == rows["b"]
    claim(store, ("a", MINUTE, None))
    store.count_failure("a", True)
    again = store.state_rows()["a"]
    assert again == ("a", NOW, MINUTE, MINUTE, 1, 1, "/t/a.md")
    assert StateRow.of(store.task_state("a")) == again


def test_enable_counts_as_a_new_start_from_that_very_moment(store):
    store.set_enabled("new", True, NOW)  # a task nobody saw yet, enabled by `enable`
    assert store.task_state("new") == TaskState("new", NOW, NOW, None, True, 0, None)
    store.set_enabled("off", False, NOW)  # disabled before it was seen: its minute
    assert store.task_state("off") == TaskState("off", NOW, MINUTE, None, False, 0, None)
    store.set_enabled("off", True, NOW + 500)
    assert store.task_state("off").not_before == NOW + 500 and store.task_state("off").enabled
    store.set_enabled("since", False, NOW)
    store.set_enabled("since", True, NOW + 900, since=NOW + 100)
    assert store.task_state("since").not_before == NOW + 100


def test_enabling_a_task_already_enabled_does_not_move_its_start(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    store.set_enabled("a", True, NOW + 5000)
    assert store.task_state("a").not_before == MINUTE
    store.set_enabled("a", False, NOW + 6000)
    state = store.task_state("a")
    assert not state.enabled and state.not_before == MINUTE and state.first_seen == NOW


def test_a_suspension_is_seen_by_every_host_until_enable_clears_it(store, db_path):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    for _ in range(3):
        store.count_failure("a", True)
    store.set_enabled("a", False, NOW + 60, suspended=True, content="hash-1")
    with other(db_path) as beta:
        assert beta.suspensions() == {"a": Suspension(NOW + 60, "alpha", "hash-1")}
        assert isinstance(beta.suspensions()["a"].at, float)
        assert not beta.task_state("a").enabled
    store.set_enabled("b", False, NOW + 60)  # disabled by hand: not a suspension
    assert set(store.suspensions()) == {"a"}
    store.set_enabled("a", True, NOW + 120)
    assert store.suspensions() == {}
    assert store.task_state("a").consecutive_failures == 0  # issue 25: not re-suspended at once
    assert store.count_failure("a", True) == 1


def test_enable_resets_failures_even_when_the_task_was_still_enabled(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    store.count_failure("a", True)
    store.count_failure("a", True)
    store.set_enabled("a", True, NOW + 60)
    assert store.task_state("a").consecutive_failures == 0


def test_a_suspension_without_a_hash_and_its_lifting(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    store.set_enabled("a", False, NOW + 60, suspended=True)
    assert store.suspensions()["a"] == Suspension(NOW + 60, "alpha", None)
    store.clear_suspension("a", NOW + 59)  # an older suspension's time: a newer one stays
    assert "a" in store.suspensions()
    store.clear_suspension("a", NOW + 60)
    assert store.suspensions() == {}


def test_failures_in_a_row_count_up_and_reset_on_success(store):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    assert [store.count_failure("a", True) for _ in range(3)] == [1, 2, 3]
    assert store.task_state("b").consecutive_failures == 0  # only that task's row
    assert store.count_failure("a", False) == 0
    assert store.task_state("a").consecutive_failures == 0
    assert store.count_failure("ghost", True) == 0  # no row: nothing counted


def test_probation_is_per_task_and_can_be_lifted(store):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    assert store.probation_until("a") is None
    store.set_probation("a", NOW + 86400)
    assert store.probation_until("a") == NOW + 86400
    assert store.probation_until("b") is None
    assert store.probation_until("ghost") is None
    store.set_probation("a", None)
    assert store.probation_until("a") is None


def test_the_alerted_flag_returns_what_it_was(store):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    assert store.set_alerted("a", True) is False
    assert store.set_alerted("a", True) is True
    assert store.set_alerted("b", False) is False  # only a's flag was set
    assert store.set_alerted("a", False) is True
    assert store.set_alerted("a", False) is False
    assert store.set_alerted("ghost", True) is False


# ================================================================ runs.py: the claim


def claim(store: Store, *claims, now: float = NOW, owner: Owner = OWNER) -> dict:
    return store.claim_slots([(t, s, skip, f"/t/{t}.md") for t, s, skip in claims], now, owner)


def test_a_claimed_slot_is_a_running_row_naming_its_owner_and_host(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    won = claim(store, ("a", MINUTE, None))
    assert list(won) == [("a", MINUTE)]
    got = row(store, won[("a", MINUTE)])
    assert {k: got[k] for k in ("task_id", "scheduled_for", "trigger", "attempt", "kind",
                                "status", "started_at", "finished_at", "duration_ms", "error",
                                "owner_pid", "owner_start", "owner_boot", "task_file", "host")} \
        == {"task_id": "a", "scheduled_for": MINUTE, "trigger": "schedule", "attempt": 1,
            "kind": "run", "status": "running", "started_at": NOW, "finished_at": None,
            "duration_ms": None, "error": None, "owner_pid": 4242, "owner_start": 777,
            "owner_boot": "boot-a", "task_file": "/t/a.md", "host": "alpha"}
    assert store.task_state("a").last_slot == MINUTE
    assert store.slot_claimed("a", MINUTE)
    assert not store.slot_claimed("a", MINUTE + 60)


def test_a_skipped_claim_is_closed_at_once_with_its_reason(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    won = claim(store, ("a", MINUTE, "skipped: the previous run still holds the task"))
    got = row(store, won[("a", MINUTE)])
    assert (got["status"], got["finished_at"], got["duration_ms"], got["error"]) == (
        "skipped", NOW, 0, "skipped: the previous run still holds the task")
    assert store.running_rows() == []
    assert store.task_state("a").last_slot == MINUTE


def test_each_slot_is_won_by_exactly_one_tick(store, db_path):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    first = claim(store, ("a", MINUTE, None))
    with other(db_path) as beta:
        second = claim(beta, ("a", MINUTE, None), ("b", MINUTE, None))
        assert second.keys() == {("b", MINUTE)}  # a's slot was taken: simply absent
        assert claim(beta, ("a", MINUTE, "late")) == {}  # not even as a skip
    assert first[("a", MINUTE)] != second[("b", MINUTE)]
    assert [r["id"] for r in store.slot_rows("a", MINUTE)] == [first[("a", MINUTE)]]
    assert store.claim_slots([], NOW, OWNER) == {}


def test_several_claims_in_one_call_get_their_own_rows(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    won = claim(store, ("a", MINUTE, None), ("a", MINUTE + 60, None), ("a", MINUTE - 60, "x"))
    assert len(set(won.values())) == 3
    for (task, slot), run_id in won.items():
        assert row(store, run_id)["scheduled_for"] == slot and row(store, run_id)["task_id"] == task
    assert store.task_state("a").last_slot == MINUTE + 60  # an older slot never lowers it


def test_last_slot_starts_from_nothing(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    claim(store, ("a", 120.0, None))  # a slot near the epoch: max(coalesce(NULL, 0), 120)
    assert store.task_state("a").last_slot == 120.0


def test_a_released_claim_is_owed_again_to_whichever_tick_finds_the_task_free(store, db_path):
    store.observe([("a", True, "/t/a.md")], NOW)
    claim(store, ("a", MINUTE - 3600, None))
    won = claim(store, ("a", MINUTE, None))
    assert store.release_claim(won[("a", MINUTE)], "a", MINUTE) is True
    assert store.run(won[("a", MINUTE)]) is None
    assert store.task_state("a").last_slot == MINUTE - 3600  # the claim before it
    with other(db_path) as beta:
        assert ("a", MINUTE) in claim(beta, ("a", MINUTE, None))


def test_releasing_the_only_claim_leaves_no_last_slot(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    won = claim(store, ("a", MINUTE, None))
    store.start_run("a", scheduled_for=MINUTE - 60, trigger="manual", attempt=1, kind="run",
                    now=NOW, owner=OWNER, task_file=None)  # not a scheduled claim
    assert store.release_claim(won[("a", MINUTE)], "a", MINUTE)
    assert store.task_state("a").last_slot is None


def test_a_release_keeps_a_later_claim_and_never_drops_a_finished_row(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    won = claim(store, ("a", MINUTE, None), ("a", MINUTE + 60, None))
    assert store.release_claim(won[("a", MINUTE)], "a", MINUTE)
    assert store.task_state("a").last_slot == MINUTE + 60  # claimed meanwhile: kept
    done = won[("a", MINUTE + 60)]
    store.finish_run(done, RunResult(Outcome.SUCCESS, 0), NOW + 5)
    assert store.release_claim(done, "a", MINUTE + 60) is False
    assert row(store, done)["status"] == "success"
    assert store.task_state("a").last_slot == MINUTE + 60
    assert store.release_claim(999_999, "a", MINUTE) is False


def test_a_pass_moves_last_slot_once_for_two_ticks(store, db_path):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    assert store.pass_slots([]) == set()
    assert store.pass_slots([("a", MINUTE), ("b", MINUTE)]) == {("a", MINUTE), ("b", MINUTE)}
    with other(db_path) as beta:
        assert beta.pass_slots([("a", MINUTE)]) == set()  # the same slot again: already passed
        assert beta.pass_slots([("a", MINUTE - 60)]) == set()  # an older one: never back
        assert beta.pass_slots([("a", MINUTE + 60)]) == {("a", MINUTE + 60)}
    assert store.task_state("a").last_slot == MINUTE + 60
    assert store.history() == []  # no run row


def test_running_on_names_one_hosts_running_rows_of_one_task(store, db_path):
    store.observe([("a", True, "/t/a.md")], NOW)
    mine = claim(store, ("a", MINUTE, None), ("a", MINUTE + 60, "skip"))
    with other(db_path) as beta:
        theirs = claim(beta, ("a", MINUTE + 120, None))
        claim(beta, ("b", MINUTE, None))
    db = store.connect()
    assert running_on(db, "a", "alpha") == [mine[("a", MINUTE)]]
    assert running_on(db, "a", "beta") == [theirs[("a", MINUTE + 120)]]
    assert running_on(db, "a", "gamma") == []


# ---------------------------------------------------------------- runs.py: other rows, ends


def manual(store: Store, task: str = "a", at: float = NOW, trigger: str = "manual",
           kind: str = "run", attempt: int = 1) -> int:
    return store.start_run(task, scheduled_for=at, trigger=trigger, attempt=attempt, kind=kind,
                           now=at, owner=OWNER, task_file=f"/t/{task}.md")


def test_a_manual_run_needs_no_claim_and_may_repeat(store):
    first = manual(store, attempt=2, kind="retry", trigger="schedule")
    second = manual(store, attempt=2, kind="retry", trigger="schedule")
    assert first != second and first > 0
    got = row(store, first)
    assert {k: got[k] for k in ("task_id", "scheduled_for", "trigger", "attempt", "kind",
                                "status", "started_at", "owner_pid", "owner_start",
                                "owner_boot", "task_file", "host")} == {
        "task_id": "a", "scheduled_for": NOW, "trigger": "schedule", "attempt": 2,
        "kind": "retry", "status": "running", "started_at": NOW, "owner_pid": 4242,
        "owner_start": 777, "owner_boot": "boot-a", "task_file": "/t/a.md", "host": "alpha"}


def test_a_finished_run_reads_as_history_shows_it(store, tmp_path):
    run_id = manual(store)
    store.set_started(run_id, NOW + 2, "/logs/a/1.log")
    assert (row(store, run_id)["started_at"], row(store, run_id)["log_path"]) == (
        NOW + 2, "/logs/a/1.log")
    result = RunResult(Outcome.FAILED, exit_code=3, fail_reason="exit 3", duration=1.2346,
                       output_tail="boom", extra={"tokens": 12})
    assert store.finish_run(run_id, result, NOW + 4) is True
    got = row(store, run_id)
    assert (got["status"], got["finished_at"], got["duration_ms"], got["exit_code"],
            got["error"], got["output_tail"], got["log_path"], json.loads(got["extra"])) == (
        "failed", NOW + 4, 1235, 3, "exit 3", "boom", "/logs/a/1.log", {"tokens": 12})
    # a second end (another tick declaring it crashed) loses: the outcome stays
    assert store.finish_run(run_id, RunResult(Outcome.SUCCESS, 0), NOW + 9) is False
    assert store.end_running(run_id, Outcome.CRASHED, "crashed", NOW + 9) is False
    assert row(store, run_id)["status"] == "failed"


def test_a_finish_names_its_own_log_and_no_extra(store, tmp_path):
    run_id = manual(store)
    log = tmp_path / "run.log"
    store.finish_run(run_id, RunResult(Outcome.SUCCESS, 0, duration=0.0004, log_path=log), NOW)
    got = row(store, run_id)
    assert (got["log_path"], got["extra"], got["duration_ms"]) == (str(log), None, 0)


def test_a_row_ended_by_another_tick_keeps_how_long_it_ran(store):
    run_id = manual(store, at=NOW)
    assert store.end_running(run_id, Outcome.TIMEOUT, "timeout after 5 s", NOW + 90,
                             ended_at=NOW + 7.5) is True
    got = row(store, run_id)
    assert (got["status"], got["error"], got["finished_at"], got["duration_ms"]) == (
        "timeout", "timeout after 5 s", NOW + 7.5, 7500)
    unseen = manual(store, at=NOW)
    assert store.end_running(unseen, Outcome.CRASHED, "crashed", NOW + 90, unobserved=True)
    got = row(store, unseen)
    assert (got["finished_at"], got["duration_ms"]) == (NOW + 90, None)
    early = manual(store, at=NOW)  # a clock set back: never a negative duration
    store.end_running(early, Outcome.CRASHED, "crashed", NOW - 50)
    assert row(store, early)["duration_ms"] == 0


def test_a_late_result_closes_the_row_lost_and_keeps_a_note(store):
    run_id = manual(store)
    assert store.keep_late(run_id, "lease lost", "late result from host alpha: success",
                           NOW + 30) is True
    got = row(store, run_id)
    assert (got["status"], got["error"], got["finished_at"], got["duration_ms"]) == (
        "lost", "lease lost", NOW + 30, 30_000)  # how long it ran, as its host reported
    assert json.loads(got["extra"]) == {"note": "late result from host alpha: success"}
    # closed already (another host did): only the note is added
    assert store.keep_late(run_id, "other", "second", NOW + 40) is False
    got = row(store, run_id)
    assert (got["error"], json.loads(got["extra"])["note"]) == (
        "lease lost", "late result from host alpha: success; second")


def test_notes_join_and_survive_an_odd_extra(store):
    run_id = manual(store)
    store.finish_run(run_id, RunResult(Outcome.FAILED, 1, extra={"tokens": 5}), NOW)
    store.add_note(run_id, "self-heal not attempted")
    assert json.loads(row(store, run_id)["extra"]) == {"tokens": 5,
                                                      "note": "self-heal not attempted"}
    for odd in ("not json", "[1, 2]", '{"note": null}'):
        store.connect().execute("UPDATE runs SET extra = ? WHERE id = ?", (odd, run_id))
        store.add_note(run_id, "n")
        assert json.loads(row(store, run_id)["extra"]) == {"note": "n"}, odd
    store.add_note(999_999, "nobody")  # no row: nothing happens
    assert store.run(999_999) is None


# ---------------------------------------------------------------- runs.py: pruning


def finished(store: Store, task: str, at: float, log: str | None = None) -> int:
    run_id = manual(store, task, at)
    store.finish_run(run_id, RunResult(Outcome.SUCCESS, 0,
                                       log_path=Path(log) if log else None), at + 1)
    return run_id


def test_prune_drops_old_finished_runs_and_names_their_logs(store):
    old = [finished(store, "a", NOW + i, f"/logs/a{i}.log") for i in range(3)]
    nolog = finished(store, "a", NOW + 3)
    running = manual(store, "a", NOW + 4)
    store.set_started(running, NOW + 4, "/logs/running.log")  # old, but still running: kept
    new = finished(store, "a", NOW + 100, "/logs/new.log")
    assert store.prune_runs(NOW + 50) == ["/logs/a0.log", "/logs/a1.log", "/logs/a2.log"]
    left = [r["id"] for r in store.history(50)]
    assert left == [new, running]
    assert all(store.run(i) is None for i in [*old, nolog])
    assert store.prune_runs(NOW + 50) == []
    assert store.prune_runs(NOW + 10_000) == ["/logs/new.log"]
    assert store.prune_runs(NOW + 10_000) == []


def test_prune_keeps_each_tasks_newest_runs(store):
    a = [finished(store, "a", NOW + i, f"/logs/a{i}") for i in range(4)]
    b = [finished(store, "b", NOW + 10 + i, f"/logs/b{i}") for i in range(2)]
    c = finished(store, "c", NOW + 20, "/logs/c0")
    assert store.prune_runs(NOW + 1000, keep=2) == ["/logs/a0", "/logs/a1"]
    assert [r["id"] for r in store.history(50, "a")] == [a[3], a[2]]
    assert [r["id"] for r in store.history(50, "b")] == [b[1], b[0]]
    assert [r["id"] for r in store.history(50, "c")] == [c]
    assert store.prune_runs(NOW + 1000, keep=1) == ["/logs/a2", "/logs/b0"]


def test_prune_takes_at_most_its_share_oldest_first(store):
    ids = [finished(store, "a", NOW + i, f"/logs/{i}") for i in range(10)]
    assert store.prune_runs(NOW + 1000, share=0.25) == ["/logs/0", "/logs/1", "/logs/2"]  # ceil
    assert len(store.history(50)) == 7
    assert store.prune_runs(NOW + 1000, share=0.0) == []
    assert store.prune_runs(NOW + 1000, keep=3, share=0.5) == ["/logs/3", "/logs/4",
                                                                "/logs/5", "/logs/6"]
    assert [r["id"] for r in store.history(50)] == ids[:6:-1]


def test_prune_stops_at_its_share_even_past_kept_runs(store):
    [finished(store, "a", NOW + i, f"/logs/{i}") for i in range(10)]
    assert store.prune_runs(NOW + 1000, keep=1, share=0.3) == ["/logs/0", "/logs/1", "/logs/2"]
    assert len(store.history(50)) == 7


def test_prune_with_sqlite_names_every_deleted_log_whoever_wrote_the_row(store, db_path):
    with other(db_path) as beta:  # a state file is one host's: its logs are all here
        theirs = finished(beta, "a", NOW, "/logs/beta.log")
    finished(store, "a", NOW + 1, "/logs/alpha.log")
    assert row(store, theirs)["host"] == "beta"
    assert store.prune_runs(NOW + 1000) == ["/logs/beta.log", "/logs/alpha.log"]


def test_prune_with_a_shared_state_names_only_this_hosts_logs(pg_url):
    """PostgreSQL shared by hosts: another host's logs are on that host, not here."""
    with Store(Path("/nonexistent"), pg_url, "alpha") as alpha, \
            Store(Path("/nonexistent"), pg_url, "beta") as beta:
        finished(beta, "a", NOW, "/logs/beta.log")
        finished(alpha, "a", NOW + 1, "/logs/alpha.log")
        finished(alpha, "a", NOW + 2)
        anonymous = finished(alpha, "b", NOW + 3, "/logs/old.log")
        alpha.connect().execute("UPDATE runs SET host = NULL WHERE id = ?", (anonymous,))
        assert alpha.prune_runs(NOW + 1000) == ["/logs/alpha.log", "/logs/old.log"]
        assert beta.history(50) == []  # every row went, whoever ran it


def test_each_host_keeps_its_own_path_for_a_shared_task(pg_url):
    """Issue 11: on a shared state each host's copy of a task file has its own path; a host
    seeing the task at another path does not rewrite the path the state recorded."""
    with Store(Path("/nonexistent"), pg_url, "alpha") as alpha, \
            Store(Path("/nonexistent"), pg_url, "beta") as beta:
        assert alpha.observe([("a", True, "/alpha/a.md")], NOW)["a"].path == "/alpha/a.md"
        seen = beta.observe([("a", True, "/beta/a.md"), ("b", True, "/beta/b.md")], NOW + 60)
        assert (seen["a"].path, seen["b"].path) == ("/alpha/a.md", "/beta/b.md")
        assert alpha.task_state("a").path == "/alpha/a.md"
        off = beta.observe([("a", False, "/beta/a.md")], NOW + 120)["a"]
        assert (off.enabled, off.path) == (False, "/alpha/a.md")


def test_prune_with_many_tasks_keeps_going_past_the_kept_ones(store):
    # the oldest rows are each task's kept newest: the ones to drop come after them
    kept = [finished(store, f"t{i}", NOW + i, f"/logs/t{i}") for i in range(5)]
    doomed = [finished(store, "z", NOW + 10 + i, f"/logs/z{i}") for i in range(3)]
    finished(store, "z", NOW + 20, "/logs/zlast")
    assert store.prune_runs(NOW + 1000, keep=1) == ["/logs/z0", "/logs/z1", "/logs/z2"]
    assert all(store.run(i) for i in kept) and not any(store.run(i) for i in doomed)


def test_prune_on_an_empty_table(store):
    assert store.prune_runs(NOW) == []
    assert store.prune_runs(NOW, keep=2) == []


# ---------------------------------------------------------------- runs.py: reads


def test_history_is_newest_first_limited_and_per_task(store):
    ids = [manual(store, "ab"[i % 2], NOW + i) for i in range(25)]
    assert [r["id"] for r in store.history()] == ids[::-1][:20]
    assert [r["id"] for r in store.history(3)] == ids[::-1][:3]
    assert [r["id"] for r in store.history(3, "b")] == [ids[23], ids[21], ids[19]]
    assert store.history(3, "nobody") == []
    assert [r["id"] for r in store.running_rows()] == ids


def test_the_history_page_filters_and_pages_by_id(store):
    a1 = finished(store, "a", NOW)
    b1 = manual(store, "b", NOW + 10, trigger="schedule")
    a2 = manual(store, "a", NOW + 20)
    a3 = finished(store, "a", NOW + 30)

    def page(limit: int = 10, **where) -> list[int]:
        return [r["id"] for r in store.history_page(RunFilter(**where), limit)]

    assert page() == [a3, a2, b1, a1]
    assert page(2) == [a3, a2]
    assert page(task_id="a") == [a3, a2, a1]
    assert page(status="running") == [a2, b1]
    assert page(trigger="schedule") == [b1]
    assert page(task_id="a", status="success") == [a3, a1]
    assert page(started_from=NOW + 10, started_until=NOW + 30) == [a2, b1]  # until: excluded
    assert page(started_from=NOW + 10) == [a3, a2, b1, a1]  # half a range: no filter
    assert page(started_until=NOW + 5) == [a3, a2, b1, a1]
    assert page(before=a3) == [a2, b1, a1]
    assert page(2, before=a2, task_id="a") == [a1]
    assert page(task_id="") == [a3, a2, b1, a1]  # empty means any
    assert page(task_id="a", started_from=NOW + 10, started_until=NOW + 40) == [a3, a2]


def test_runs_version_changes_when_a_run_starts_or_ends(store):
    assert store.runs_version() == (0, ())
    first = manual(store)
    assert store.runs_version() == (first, (first,))
    second = manual(store)
    assert store.runs_version() == (second, (first, second))
    store.finish_run(first, RunResult(Outcome.SUCCESS, 0), NOW)
    assert store.runs_version() == (second, (second,))


def test_recent_runs_are_each_tasks_newest_few(store):
    a1 = finished(store, "a", NOW)
    a2 = manual(store, "a", NOW + 1)
    b1 = finished(store, "b", NOW + 2)
    a3 = finished(store, "a", NOW + 3)
    got = store.recent_runs(["a", "b", "nobody"], 2)
    assert set(got) == {"a", "b"}
    assert [(i, s) for i, s, _ in got["a"]] == [(a3, "success"), (a2, "running")]
    assert got["a"][1][2] is None and got["a"][0][2] == 0
    assert [i for i, _, _ in got["b"]] == [b1]
    assert a1 not in [i for i, _, _ in got["a"]]
    assert store.recent_runs([], 5) == {}


def test_neighbours_are_the_same_tasks_previous_and_next_runs(store):
    a1 = manual(store, "a")
    manual(store, "b")
    a2 = manual(store, "a")
    manual(store, "b")
    a3 = manual(store, "a")
    assert store.neighbour_runs("a", a2) == (a1, a3)
    assert store.neighbour_runs("a", a1) == (None, a2)
    assert store.neighbour_runs("a", a3) == (a2, None)


def test_slot_rows_are_every_attempt_at_one_slot_oldest_first(store):
    store.observe([("a", True, "/t/a.md")], NOW)
    won = claim(store, ("a", MINUTE, None), ("a", MINUTE + 60, None))
    retry = manual(store, "a", MINUTE, trigger="schedule", kind="retry", attempt=2)
    heal = manual(store, "a", MINUTE, trigger="schedule", kind="heal", attempt=3)
    assert [r["id"] for r in store.slot_rows("a", MINUTE)] == [won[("a", MINUTE)], retry, heal]
    assert store.slot_rows("b", MINUTE) == []


def test_last_runs_are_each_tasks_newest_row(store):
    assert store.last_runs() == {}
    finished(store, "a", NOW)
    a2 = manual(store, "a", NOW + 1, trigger="manual", kind="heal", attempt=4)
    b1 = finished(store, "b", NOW + 2)
    c1 = manual(store, "c", NOW + 3)
    last = store.last_runs()
    assert {t: r["id"] for t, r in last.items()} == {"a": a2, "b": b1, "c": c1}
    assert last["b"]["status"] == "success"


def test_a_slot_claimed_means_its_scheduled_first_attempt(store):
    manual(store, "a", MINUTE, trigger="manual")
    manual(store, "a", MINUTE + 60, trigger="schedule", attempt=2, kind="retry")
    assert not store.slot_claimed("a", MINUTE)
    assert not store.slot_claimed("a", MINUTE + 60)
    manual(store, "a", MINUTE + 120, trigger="schedule")
    assert store.slot_claimed("a", MINUTE + 120)
    assert not store.slot_claimed("b", MINUTE + 120)


def test_slots_after_are_what_the_chains_follow(store):
    store.observe([("up", True, "/t/up.md")], NOW)
    won = claim(store, ("up", MINUTE - 60, None), ("up", MINUTE, None),
                ("up", MINUTE + 60, "skipped: quiet"))
    store.finish_run(won[("up", MINUTE)], RunResult(Outcome.FAILED, 1, "exit 1"), NOW)
    manual(store, "up", MINUTE, trigger="schedule", kind="heal", attempt=2)
    manual(store, "up", MINUTE + 120, trigger="manual-no-chain")
    manual(store, "up", MINUTE + 180, trigger="manual")
    manual(store, "other", MINUTE + 60, trigger="schedule")
    manual(store, "third", MINUTE + 60, trigger="schedule")
    assert store.slots_after(["up", "other"], MINUTE - 60) == [
        SlotRow("other", MINUTE + 60, "running", None),
        SlotRow("up", MINUTE, "failed", "exit 1"),
        SlotRow("up", MINUTE + 60, "skipped", "skipped: quiet"),
        SlotRow("up", MINUTE + 180, "running", None),
    ]
    assert store.slots_after([], 0) == []


def test_last_skipped_finds_this_periods_skip_by_its_reason(store):
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    claim(store, ("a", MINUTE, "once per day: already ran"),
          ("a", MINUTE + 60, "once per day: already ran"), ("a", MINUTE + 120, "quiet hours"),
          ("b", MINUTE, "quiet hours"), ("c", MINUTE, None))
    manual(store, "a", MINUTE + 180)  # a run, not a skip
    assert store.last_skipped(["a", "b", "c"], "once per day") == {"a": MINUTE + 60}
    assert store.last_skipped(["a", "b"], "quiet") == {"a": MINUTE + 120, "b": MINUTE}
    assert store.last_skipped(["a"], "%") == {"a": MINUTE + 120}  # a % is no wildcard of ours
    assert store.last_skipped(["b"], "once%") == {}
    assert store.last_skipped(["a"], "quiet%hours") == {}  # not "quiet<anything>hours"
    assert store.last_skipped(["a"], "quiet h%") == {"a": MINUTE + 120}
    assert store.last_skipped([], "quiet") == {}


def test_last_skipped_counts_only_scheduled_skips(store):
    run_id = manual(store, "a", MINUTE)
    store.end_running(run_id, Outcome.SKIPPED, "quiet hours", NOW)
    assert store.last_skipped(["a"], "quiet") == {}


def test_last_successes_are_at_or_before_the_given_slot(store):
    for at, outcome in ((MINUTE, Outcome.SUCCESS), (MINUTE + 60, Outcome.SUCCESS),
                        (MINUTE + 120, Outcome.FAILED)):
        store.finish_run(manual(store, "a", at), RunResult(outcome, 0), at + 1)
    store.finish_run(manual(store, "b", MINUTE + 240), RunResult(Outcome.SUCCESS, 0), NOW)
    assert store.last_successes(["a", "b"], MINUTE + 120) == {"a": MINUTE + 60}
    assert store.last_successes(["a", "b"], MINUTE + 60) == {"a": MINUTE + 60}
    assert store.last_successes(["a"], MINUTE + 59) == {"a": MINUTE}
    assert store.last_successes(["b"], MINUTE + 240) == {"b": MINUTE + 240}
    assert store.last_successes([], NOW) == {}
