"""run/start_order.py: the first round of a pool's workers start their processes in turns,
never waiting more than WAIT on a worker that does not start one (real threads, real locks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mdcron.run.start_order import StartOrder, started


def until(condition: Callable[[], bool], timeout: float) -> None:
    """Wait for `condition`, `timeout` seconds at most (the assertions after say if it never
    held)."""
    give_up = time.monotonic() + timeout
    while not condition() and time.monotonic() < give_up:
        time.sleep(0.001)


def _worker(order: StartOrder, log: list[tuple[str, float]], name: str,
            before_start: threading.Event | None = None,
            after_start: Callable[[], object] | None = None) -> threading.Thread:
    def body() -> None:
        with order.turn():
            log.append((f"{name} in", time.monotonic()))
            if before_start is not None:
                before_start.wait(60)
            log.append((f"{name} started", time.monotonic()))
            started()
            # the run goes on after its start: the next worker does not wait
            (after_start or (lambda: time.sleep(0.05)))()
        log.append((f"{name} done", time.monotonic()))

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_the_second_worker_starts_only_once_the_first_process_runs():
    order, log, go = StartOrder(2, wait=60), [], threading.Event()
    # a's run lasts until b is in (30 s at most, within b's 60 s wait): b's way in is a's
    # start, not a's end; a fixed 0.05 s run was shorter than b's wake-up on a loaded machine
    b_in = lambda: "b in" in [e for e, _ in log]  # noqa: E731
    a = _worker(order, log, "a", go, after_start=lambda: until(b_in, 30))
    while not log:
        time.sleep(0.001)
    b = _worker(order, log, "b")
    time.sleep(0.1)
    assert [e for e, _ in log] == ["a in"]  # b waits for a's start
    go.set()
    a.join(60)
    b.join(60)
    names = [e for e, _ in log]
    assert names.index("a started") < names.index("b in") < names.index("a done")


def test_a_worker_that_never_starts_holds_the_next_one_up_at_most_wait():
    order, log, never = StartOrder(2, wait=0.05), [], threading.Event()
    a = _worker(order, log, "a", never)
    while not log:
        time.sleep(0.001)
    began = time.monotonic()
    b = _worker(order, log, "b")
    b.join(60)
    # a never starts: b's wait is WAIT (0.05 s), not until a's start (never); 10 s of slack
    # for a loaded machine
    assert not b.is_alive() and time.monotonic() - began < 10
    assert ("b started" in [e for e, _ in log]) and "a started" not in [e for e, _ in log]
    never.set()
    a.join(60)


def test_after_the_first_round_nobody_waits():
    order, log, never = StartOrder(1, wait=60), [], threading.Event()
    a = _worker(order, log, "a", never)
    while not log:
        time.sleep(0.001)
    b = _worker(order, log, "b")
    b.join(30)  # half its wait: had it waited for a, it would still be waiting
    assert not b.is_alive() and "a started" not in [e for e, _ in log]
    never.set()
    a.join(60)


def test_a_turn_inside_a_turn_releases_both():
    outer, inner = StartOrder(1, wait=10), StartOrder(1, wait=10)
    with outer.turn(), inner.turn():
        started()
    # both free again: a new pool's first turn takes each at once
    assert outer._lock.acquire(timeout=0.5) and inner._lock.acquire(timeout=0.5)


def test_the_round_is_over_once_each_first_turn_started_or_ended():
    """`round` (dispatch.py: the tick's other work waits for it) is set only once every
    first-round worker's process runs, or its body ended without one, even one that stopped
    waiting for the worker before it."""
    order, log, go = StartOrder(3, wait=0.05), [], threading.Event()
    a = _worker(order, log, "a", go)  # holds its turn until go
    while not log:
        time.sleep(0.001)
    b = _worker(order, log, "b")  # gives up waiting for a after 0.05 s, then starts
    b.join(60)
    assert not order.round.is_set()  # a has not started, c not even begun
    with order.turn():  # c: ends without starting a process
        pass
    assert not order.round.is_set()
    go.set()
    assert order.round.wait(60)
    a.join(60)


def test_an_empty_first_round_is_over_at_once():
    assert StartOrder(0).round.is_set()
