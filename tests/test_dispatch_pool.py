"""run/dispatch.run_all's pool (issue 27): what the tick does meanwhile waits until the
first round of processes has started, and the GIL is handed over quickly until then.
Real task files, a real SQLite state, real processes and locks."""

from __future__ import annotations

import os
import sys
import threading
import time

from mdcron.core.clock import Clock, to_dt
from mdcron.run.attempt import RunContext, current_owner
from mdcron.run.dispatch import (
    SWITCH_S,
    WorkerStores,
    drain_into,
    lend_pool,
    lend_stores,
    run_all,
    take_pool,
)
from mdcron.run.locks import lock_path, read_info
from mdcron.settings.config import load_config
from mdcron.state.store import StoreError, state_store
from mdcron.tasks.taskfile import load_task_file

NOW = 1_800_000_000.0


def tasks_in(home, write_task, max_parallel: int, commands: dict[str, str]):
    """A home whose scheduler.yaml sets max_parallel and whose tasks run `commands` (id ->
    command): its config and the tasks, loaded in that order."""
    (home / "scheduler.yaml").write_text(f"max_parallel: {max_parallel}\n", encoding="utf-8")
    for task_id, command in commands.items():
        write_task(task_id, command=command)
    config, _ = load_config(home)
    return config, [load_task_file(home / "tasks" / f"{i}.md", config)[0] for i in commands]


def claimed(config, tasks, owner) -> list:
    """The tasks' slots at NOW claimed by `owner`: (task, run id) each, as the tick's claims."""
    with state_store(config) as store:
        won = store.claim_slots([(t.id, NOW, None, str(t.path)) for t in tasks], NOW, owner)
    return [(t, won[(t.id, NOW)]) for t in tasks]


def test_meanwhile_waits_for_the_first_round_to_start_and_the_gil_is_handed_over_quickly(
        home, write_task):
    ids = ["a", "b", "c", "d"]
    config, tasks = tasks_in(home, write_task, 3, dict.fromkeys(ids, "sleep 0.5"))
    owner = current_owner()
    to_run = claimed(config, tasks, owner)
    seen: dict[str, object] = {}

    def meanwhile() -> None:  # what the first round's locks say when it runs
        seen["interval"] = sys.getswitchinterval()
        seen["groups"] = {
            i: (info.pgid if (info := read_info(lock_path(config.locks_dir, i))) else None)
            for i in ids}

    intervals, done = [], threading.Event()

    def watch() -> None:  # the switch intervals seen while the pool runs
        while not done.is_set():
            intervals.append(sys.getswitchinterval())
            time.sleep(0.001)

    before = sys.getswitchinterval()
    watcher = threading.Thread(target=watch)
    watcher.start()
    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    try:
        outcomes = run_all(ctx, to_run, print, None, meanwhile=meanwhile)
    finally:
        done.set()
        watcher.join(5)
    assert [o.final.ok for o in outcomes] == [True] * 4
    started = [i for i, pgid in seen["groups"].items() if pgid]
    assert len(started) >= 3  # the first round (3 workers) named its process groups
    assert min(intervals) == SWITCH_S  # quick hand-overs while the first round started
    assert seen["interval"] == before  # and the usual ones after it
    assert sys.getswitchinterval() == before


def open_database_fds(db) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(db):
                count += 1
        except OSError:
            continue
    return count


def test_each_worker_keeps_one_connection_for_its_runs_and_the_pool_closes_them(home):
    config, _ = load_config(home)
    stores = WorkerStores(config)
    got: dict[str, list] = {"a": [], "b": []}

    def worker(name: str) -> None:
        for _ in range(3):
            got[name].append(stores.get())

    threads = [threading.Thread(target=worker, args=(n,)) for n in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    a, b = got["a"], got["b"]
    assert a[0] is a[1] is a[2] and b[0] is b[1] is b[2] and a[0] is not b[0]
    for s in (a[0], b[0]):
        s.task_state("x")  # connected: the file is open
    assert open_database_fds(config.db_path) == 2
    stores.close()
    assert open_database_fds(config.db_path) == 0


def test_a_shared_state_opens_a_connection_per_run(home):
    (home / "scheduler.yaml").write_text("state_url: postgresql://u@127.0.0.1:1/x\n",
                                         encoding="utf-8")
    config, _ = load_config(home)
    assert WorkerStores(config).get() is None


def test_connections_lent_ahead_are_taken_first_and_the_rest_closed_with_the_pool(home,
                                                                                  tmp_path):
    """Issue 27: the held tick opens the workers' connections before its minute
    (cli/warm.open_spares) and lends them at the go; one for another file is not used."""
    config, _ = load_config(home)
    with state_store(config) as s:
        s.task_state("x")  # the database exists
    lent = [state_store(config), state_store(config)]
    for s in lent:
        s.connect()
    other_home = tmp_path / "other"
    (other_home / "tasks").mkdir(parents=True)
    other_config, _ = load_config(other_home)
    stranger = state_store(other_config)
    stranger.connect()
    lend_stores([stranger, *lent])
    stores = WorkerStores(config)
    got = stores.get()  # the last lent first: one of ours
    assert got is lent[1] and got._db is not None
    taken = {}

    def other_worker() -> None:
        taken["store"] = stores.get()

    t = threading.Thread(target=other_worker)
    t.start()
    t.join(5)
    assert taken["store"] is lent[0]
    third = threading.Thread(target=lambda: taken.update(third=stores.get()))
    third.start()
    third.join(5)
    assert taken["third"] not in (*lent, stranger) and taken["third"].path == config.db_path
    assert stranger._db is None  # another home's: closed, not used
    stores.close()
    assert all(s._db is None for s in (*lent, taken["third"]))


def pool_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("task_")}


def test_a_pool_lent_ahead_runs_the_ladders_on_threads_started_before(home, write_task):
    """Issue 27: the held tick starts its pool's threads before the minute (cli/warm.py);
    at the go the runs go to them, no thread is started then. A pool of another size is
    not used (shut down), and a new one is made."""
    ids = ["a", "b", "c", "d"]
    config, tasks = tasks_in(home, write_task, 3, dict.fromkeys(ids, "true"))
    owner = current_owner()
    to_run = claimed(config, tasks, owner)
    before = pool_threads()
    lend_pool(3)
    lent = pool_threads() - before
    assert len(lent) == 3  # started now, idle until the runs come
    ran_on: set[threading.Thread] = set()
    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    outcomes = run_all(ctx, to_run, print, None,
                       on_end=lambda _: ran_on.add(threading.current_thread()))
    assert [o.final.ok for o in outcomes] == [True] * 4
    assert ran_on and ran_on <= lent
    for thread in lent:
        thread.join(timeout=5.0)  # shut down with its run_all
    lend_pool(2)
    other = pool_threads() - before
    with take_pool(3) as pool:  # not the size lent: a new pool, the lent one shut down
        assert pool.submit(threading.current_thread).result(5) not in other
    for thread in other:
        thread.join(timeout=5.0)
        assert not thread.is_alive()


def test_the_workers_take_the_runs_in_order_and_each_outcome_keeps_its_place():
    """Issue 27 (drain_into): one job per worker, not one Future per run; the outcomes come
    back in the runs' order whoever ran them."""
    from concurrent.futures import ThreadPoolExecutor

    taken: list[int] = []

    def one(item):
        taken.append(item)
        time.sleep(0.01 * (item % 3))
        return item * 10, threading.current_thread().name

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes, jobs = drain_into(pool, 3, one, list(range(12)))
        for job in jobs:
            job.result()
    assert [o[0] for o in outcomes] == [k * 10 for k in range(12)]
    assert len({o[1] for o in outcomes}) <= 3
    assert sorted(taken) == list(range(12)) and taken[:3] == sorted(taken[:3])


def test_a_workers_error_stops_the_others_taking_more_runs_and_is_raised():
    from concurrent.futures import ThreadPoolExecutor

    ran: list[int] = []

    def one(item):
        ran.append(item)
        if item == 2:
            raise RuntimeError("the database refused")
        time.sleep(0.1)
        return item

    with ThreadPoolExecutor(max_workers=2) as pool:
        _, jobs = drain_into(pool, 2, one, list(range(20)))
        errors = []
        for job in jobs:
            try:
                job.result()
            except RuntimeError as exc:
                errors.append(str(exc))
    assert errors == ["the database refused"]
    assert sorted(ran)[:3] == [0, 1, 2] and len(ran) <= 4  # nobody took much more after it


def test_the_runs_past_the_first_round_are_claimed_once_the_first_process_runs(
        home, write_task):
    """Issue 27: the tick claims the first round's runs, and run_all claims the others (its
    `more`) once the first process has started, in its own thread; each run starts only
    once its claim is committed, and the outcomes keep the order: first round, then the
    others."""
    ids = ["a", "b", "c", "d", "e"]
    # the first round's still run (their locks name them) at the claim
    config, tasks = tasks_in(home, write_task, 2,
                             {i: "sleep 0.5" if i in "ab" else "true" for i in ids})
    owner = current_owner()
    first = claimed(config, tasks[:2], owner)
    seen: dict[str, object] = {}

    def claim_rest():
        seen["thread"] = threading.current_thread()
        seen["groups"] = [info.pgid if (info := read_info(lock_path(config.locks_dir, i)))
                          else None for i in ids]
        with state_store(config) as store:
            seen["rows before"] = len(store.history(20, None))
        return claimed(config, tasks[2:], owner)

    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    outcomes = run_all(ctx, first, print, None, more=(tasks[2:], claim_rest))
    assert [o.task.id for o in outcomes] == ids and all(o.final.ok for o in outcomes)
    assert seen["thread"] is threading.current_thread()
    assert any(seen["groups"][:2]) and not any(seen["groups"][2:])  # a first one ran, no other
    assert seen["rows before"] == 2
    with state_store(config) as store:
        rows = store.history(20, None)
    assert sorted(r["task_id"] for r in rows) == ids
    assert {r["status"] for r in rows} == {"success"}


def test_a_claim_of_the_later_runs_that_fails_lets_the_first_round_end_and_is_raised(
        home, write_task):
    ids = ["a", "b", "c"]
    config, tasks = tasks_in(home, write_task, 2, dict.fromkeys(ids, "sleep 0.2"))
    owner = current_owner()
    first = claimed(config, tasks[:2], owner)

    def claim_rest():
        raise StoreError("the database refused")

    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    try:
        run_all(ctx, first, print, None, more=(tasks[2:], claim_rest))
    except StoreError as exc:
        assert str(exc) == "the database refused"
    else:
        raise AssertionError("the claim's error was not raised")
    with state_store(config) as store:
        rows = store.history(20, None)
    assert sorted(r["task_id"] for r in rows) == ["a", "b"]  # ended, recorded; c never ran
    assert {r["status"] for r in rows} == {"success"}
