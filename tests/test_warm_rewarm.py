"""cli/warm.py's wait for the go (issue 27): just before its minute, a held tick that has not
been told to go yet reads once more what the go will check (Ahead.rewarm), so the system's
caches are fresh; nothing it reads then is kept. Real pipes and threads."""

from __future__ import annotations

import os
import threading
import time

from mdcron.cli.warm import Ahead, _wait


def go_later(fd: int, seconds: float, after=lambda: True) -> threading.Thread:
    def write() -> None:
        time.sleep(seconds)
        give_up = time.monotonic() + 30
        while not after() and time.monotonic() < give_up:
            time.sleep(0.001)
        os.write(fd, b"g")
        os.close(fd)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_it_rewarms_once_at_the_instant_when_the_go_has_not_come():
    read_end, write_end = os.pipe()
    calls: list[float] = []
    # the go 0.4 s in, and only once the rewarm was made (30 s at most): a loaded machine's
    # late start of the wait must not let the go come first
    writer = go_later(write_end, 0.4, lambda: bool(calls))
    began = time.time()
    assert _wait(read_end, began + 0.1, lambda: calls.append(time.time()))
    writer.join(60)
    assert len(calls) == 1
    assert calls[0] - began >= 0.09  # at its instant, not before


def test_a_go_before_the_instant_is_not_held_up_and_nothing_is_rewarmed():
    read_end, write_end = os.pipe()
    calls: list[float] = []
    writer = go_later(write_end, 0.05)
    began = time.monotonic()
    assert _wait(read_end, time.time() + 30, lambda: calls.append(time.time()))
    writer.join(5)
    assert calls == [] and time.monotonic() - began < 10


def test_a_closed_pipe_still_means_drop_after_a_rewarm():
    read_end, write_end = os.pipe()
    os.close(write_end)
    calls: list[float] = []
    assert not _wait(read_end, time.time() - 1, lambda: calls.append(time.time()))


def test_rewarm_reads_without_keeping_anything(tmp_path):
    home = tmp_path / "home"
    (home / "tasks").mkdir(parents=True)
    (home / "tasks" / "a.md").write_text("---\nid: a\nschedule: '* * * * *'\ncommand: 'true'"
                                         "\n---\n", encoding="utf-8")
    read_end, write_end = os.pipe()
    try:
        ahead = Ahead(str(home), read_end, at=time.time() + 60)
        ahead.rewarm()
        (home / "tasks").rename(home / "gone")  # a folder gone meanwhile: no error here
        ahead.rewarm()
        assert ahead.view is None and ahead.store is None
    finally:
        os.close(read_end), os.close(write_end)
