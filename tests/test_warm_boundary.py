"""cli/warm.py, the daemon's held tick at its boundary (issue 27): what the go checks (the
code, the config, the task files' stats) is checked at the boundary by the tick's own clock,
while the daemon's go byte is on its way, not after it arrives; a change made before the
boundary is seen, one after it belongs to the next minute. A go that came much later than the
boundary has them checked again. A tick given --now (no real instant: tests, bench) checks
after the go, as before. Real pipes, threads and task files."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable

from conftest import age_cache, render_task, run_cli

from mdcron.cli.warm import EX_STALE, RECHECK_S, Ahead
from mdcron.settings.config import load_config
from mdcron.state import cache_key as keys


def until(instant: float) -> None:
    """Sleep to the wall-clock `instant` (the held tick's boundary is the real clock's)."""
    time.sleep(max(0.0, instant - time.time()))


def go(fd: int) -> None:
    """The daemon's go: one byte, then its end of the pipe closed."""
    os.write(fd, b"g")
    os.close(fd)


def go_at(fd: int, instant: float, log: list[tuple[str, float]],
          after: str | None = None, then: float = 0.0) -> threading.Thread:
    """The go at `instant`; with `after`, not before `then` seconds past `log`'s first entry
    of that name either (the entry waited for 30 s at most): what a test proves comes first
    is not left to how late a loaded machine wakes the thread that makes it."""
    def write() -> None:
        until(instant)
        give_up = time.monotonic() + 30
        while after is not None:
            seen = [at for what, at in log if what == after]
            if seen:
                until(seen[0] + then)
                break
            if time.monotonic() > give_up:
                break
            time.sleep(0.001)
        log.append(("go", time.time()))
        go(fd)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def held(home, boundary: float, own_clock: bool | None = None) -> tuple[Ahead, int]:
    read_end, write_end = os.pipe()
    return Ahead(str(home), read_end, at=boundary, own_clock=own_clock), write_end


def test_the_checks_are_made_at_the_boundary_before_the_go_comes(home):
    boundary = time.time() + 0.4
    ahead, write_end = held(home, boundary, own_clock=True)
    log: list[tuple[str, float]] = []
    # a held tick that checked only after the go never checks, and the go comes after 30 s
    writer = go_at(write_end, boundary + 0.2, log, after="checks")
    assert ahead.wait(lambda: log.append(("checks", time.time()))) is None
    writer.join(60)
    assert [what for what, _ in log] == ["checks", "go"]
    assert log[0][1] >= boundary  # never before the minute


def test_what_the_checks_refuse_is_refused_once_the_go_came(home):
    boundary = time.time() + 0.3
    ahead, write_end = held(home, boundary, own_clock=True)
    log: list[tuple[str, float]] = []
    writer = go_at(write_end, boundary + 0.1, log)
    assert ahead.wait(lambda: EX_STALE) == EX_STALE
    writer.join(5)
    assert log  # it waited for the go (the daemon's say), then refused


def test_a_go_long_after_the_boundary_has_the_checks_made_again(home):
    boundary = time.time() + 0.2
    ahead, write_end = held(home, boundary, own_clock=True)
    log: list[tuple[str, float]] = []
    # the go more than RECHECK_S after the boundary's checks, however late they were made
    writer = go_at(write_end, boundary, log, after="checks", then=RECHECK_S + 0.3)
    assert ahead.wait(lambda: log.append(("checks", time.time()))) is None
    writer.join(60)
    assert [what for what, _ in log] == ["checks", "go", "checks"]


def test_a_go_before_the_boundary_by_this_clock_is_not_waited_past(home):
    """The clock that jumps: set back an hour while the tick is held, its boundary is an
    hour ahead by this process's clock when the daemon's go comes (the daemon keeps its own
    time). The go is not held to that boundary: the checks are made once, after it, at once."""
    boundary = time.time() + 3600.0
    ahead, write_end = held(home, boundary, own_clock=True)
    log: list[tuple[str, float]] = []
    writer = go_at(write_end, time.time() + 0.1, log)
    assert ahead.wait(lambda: log.append(("checks", time.time()))) is None
    writer.join(5)
    assert [what for what, _ in log] == ["go", "checks"]
    assert log[1][1] - log[0][1] < 30.0  # not the hour (nor a spin toward it)


def test_a_pipe_closed_before_the_boundary_checks_nothing(home):
    ahead, write_end = held(home, time.time() + 0.3, own_clock=True)
    os.close(write_end)
    checked: list[float] = []
    assert ahead.wait(lambda: checked.append(time.time())) == EX_STALE
    assert checked == []


def test_a_tick_given_now_checks_after_the_go(home):
    boundary = time.time() + 0.2
    ahead, write_end = held(home, boundary)  # --now: no real instant
    assert not ahead.own_clock
    log: list[tuple[str, float]] = []
    writer = go_at(write_end, boundary + 0.2, log)
    assert ahead.wait(lambda: log.append(("checks", time.time()))) is None
    writer.join(5)
    assert [what for what, _ in log] == ["go", "checks"]


def commands_at_the_boundary(home, before: Callable[[], object],
                             after: Callable[[], object] = lambda: None) -> dict[str, str]:
    """warm_and_wait end to end, the edit `before` made 0.4 s before the boundary and `after`
    0.4 s after it, the go at +0.6 s (within RECHECK_S): each task's command as the tick at
    the boundary has it. The tasks folder is watched (core/folder_watch.py) where this
    filesystem allows. (0.15 s either side was a window a loaded machine's late wake-up of
    either thread could miss.)"""
    config, _ = load_config(home)
    boundary = time.time() + 1.5
    ahead, write_end = held(home, boundary, own_clock=True)

    def edits() -> None:
        until(boundary - 0.4)
        before()
        until(boundary + 0.4)
        after()
        until(boundary + 0.6)
        go(write_end)

    editor = threading.Thread(target=edits)
    editor.start()
    try:
        assert ahead.warm_and_wait(config, keys.config_text(str(home))) is None
        editor.join(5)
        return {e.id: ahead.view.task(e).command for e in ahead.view.valid}
    finally:
        gc.unfreeze()  # warm_and_wait froze what this process holds
        editor.join(5)
        if ahead.view is not None:
            ahead.view.close()
        if ahead.store is not None:
            ahead.store.close()


def test_the_files_are_as_they_were_at_the_boundary(home, write_task):
    """A task file changed just before the boundary is seen; one changed between the boundary
    and a late go is left to the next minute, as a tick started at the boundary would."""
    write_task("a", command="echo old-a")
    write_task("b", command="echo old-b")
    commands = commands_at_the_boundary(
        home, lambda: write_task("a", command="echo new-a"),
        lambda: write_task("b", command="echo new-b"))
    assert commands == {"a": "echo new-a", "b": "echo old-b"}


def test_a_tasks_folder_gone_by_the_boundary_hands_the_minute_to_a_fresh_tick(home,
                                                                               write_task):
    """The folder's scan fails at the checks: the held tick refuses (EX_STALE: the daemon
    starts a fresh tick, which says what is wrong as a cold one does), never a traceback."""
    write_task("a", command="true")
    config, _ = load_config(home)
    boundary = time.time() + 1.0
    ahead, write_end = held(home, boundary, own_clock=True)

    def remove_then_go() -> None:
        until(boundary - 0.4)  # a loaded machine's late wake-up still removes it before
        (home / "tasks").rename(home / "gone")
        until(boundary + 0.1)
        go(write_end)

    mover = threading.Thread(target=remove_then_go)
    mover.start()
    try:
        assert ahead.warm_and_wait(config, keys.config_text(str(home))) == EX_STALE
        assert ahead.view is None and ahead.store is None  # closed, nothing kept
    finally:
        gc.unfreeze()
        mover.join(5)


def test_a_task_file_edited_through_a_hard_link_elsewhere_is_seen(home, tmp_path, write_task):
    write_task("a", command="echo old")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(home / "tasks" / "a.md", elsewhere / "a.md")
    assert run_cli(home, "validate").returncode == 0
    assert run_cli(home, "tick", "--now", "2026-11-23T09:00:00+00:00").returncode == 0
    age_cache(home)  # its cached row holds unless the tick sees the file change
    edit = lambda: (elsewhere / "a.md").write_text(  # noqa: E731  # the same inode
        render_task("a", command="echo new"), encoding="utf-8")
    assert commands_at_the_boundary(home, edit) == {"a": "echo new"}
