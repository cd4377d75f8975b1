"""Latency rows (issue 27): how soon a task starts after the moment it should, each beside a
floor measured on the same machine in the same run.

- dispatch floor: a fresh `python` that starts the same shell command the due task runs
  (`date +%s.%N > FILE`): the least "tick start -> task start" can cost under cron.
- chain follow-up: `up` (writes its end stamp as its last act), a sibling `slow` (`sleep 3`) and
  `down` (`schedule: after up`, writes its start stamp), all in one tick; latency = down's start
  - up's end. Floor: one process starting two shells one after the other (b's start - a's end).
- daemon boundary -> task: the real `scheduler.py daemon` over 1,000 idle tasks and 100 due
  every minute (`max_parallel: 8`); per wall-clock boundary the first and the last task's own
  start stamp - the boundary (the first boundary after start is a warm-up). Floor: a process
  that sleeps until second :30 of the same minutes and starts the same shell command.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import measure as core
from measure import (
    PY,
    SCHEDULER,
    Homes,
    Row,
    Sample,
    judge_goal,
    log,
    measure,
    minute,
    ratio,
    settle,
    tick_argv,
    write_config,
    write_task,
)

CHAIN_GOAL_MS = 1000.0
DAEMON_FIRST_GOAL_MS = 15.0
DAEMON_LAST_GOAL_MS = 250.0
STAMP = "date +%s.%N > {}"

# a fresh interpreter that starts the due task's command: the floor of tick start -> task start
DISPATCH_FLOOR = "import subprocess, sys; subprocess.run(['/bin/sh', '-c', sys.argv[1]])"
# one process: shell a ends, shell b starts (the floor of upstream end -> downstream start)
CHAIN_FLOOR = ("import subprocess, sys; subprocess.run(['/bin/sh', '-c', sys.argv[1]]);"
               " subprocess.run(['/bin/sh', '-c', sys.argv[2]])")
# sleeps to second :30 of each of N minutes and starts the command, as a daemon would
BOUNDARY_FLOOR = r"""
import subprocess, sys, time
folder, rounds = sys.argv[1], int(sys.argv[2])
for k in range(rounds):
    now = time.time()
    mark = (now // 60) * 60 + 30
    if mark <= now:
        mark += 60
    while (left := mark - time.time()) > 0:
        time.sleep(min(left, 1.0))
    subprocess.Popen(['/bin/sh', '-c', f'date +%s.%N > {folder}/{int(mark)}']).wait()
"""


def stamp_of(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def dispatch_floor(root: Path, runs: int) -> Row:
    stamp = root / "floor-dispatch-stamp"

    def latency(i: int, s: Sample) -> str | None:
        got = stamp_of(stamp)
        if got is None:
            return "no stamp"
        s.metric_ms = (got - s.epoch) * 1000.0
        return None

    log("floor: python starts the task's shell")
    return measure(Row("floor: python starts the task's shell (dispatch)", None), runs,
                   lambda i: [PY, "-c", DISPATCH_FLOOR, STAMP.format(stamp)], root,
                   before=lambda i: stamp.unlink(missing_ok=True), after=latency)


def _write_after(home: Path, task_id: str, upstream: str, command: str) -> None:
    (home / "tasks" / f"{task_id}.md").write_text(
        f"---\nid: {task_id}\nschedule: after {upstream}\ncommand: '{command}'\n---\n\n"
        f"# {task_id}\n", encoding="utf-8")


def chain_rows(homes: Homes, runs: int) -> list[Row]:
    """Chain follow-up latency with a 3 s sibling in the same tick, and its floor."""
    home = homes.make("chain", 0)
    write_config(home)
    up_end, down_start = home / "up-end", home / "down-start"
    write_task(home, "up", STAMP.format(up_end))
    write_task(home, "slow", "sleep 3")
    _write_after(home, "down", "up", STAMP.format(down_start))
    settle(home)

    def clear(i: int) -> None:
        up_end.unlink(missing_ok=True)
        down_start.unlink(missing_ok=True)

    def follow(i: int, s: Sample) -> str | None:
        a, b = stamp_of(up_end), stamp_of(down_start)
        if a is None or b is None:
            return "up or down did not write its stamp"
        s.metric_ms = (b - a) * 1000.0
        return None

    log("floor: one shell after another")
    a, b = home / "floor-a", home / "floor-b"

    def floor_gap(i: int, s: Sample) -> str | None:
        x, y = stamp_of(a), stamp_of(b)
        if x is None or y is None:
            return "no stamps"
        s.metric_ms = (y - x) * 1000.0
        return None

    floor = measure(Row("floor: one shell after another (chain)", None), runs,
                    lambda i: [PY, "-c", CHAIN_FLOOR, STAMP.format(a), STAMP.format(b)], home,
                    after=floor_gap)
    log("chain follow-up latency (sibling sleeps 3 s)")
    row = measure(Row("chain: upstream end → downstream start (3 s sibling)", 3,
                      goal=f"≤ {CHAIN_GOAL_MS:g} ms"), runs,
                  lambda i: tick_argv(home, minute(i)), home, warmups=2, before=clear,
                  after=follow)
    row.samples = [s for s in row.samples if s.metric_ms is not None]
    row.xfloor = ratio(row.median, floor.median)
    judge_goal(row, CHAIN_GOAL_MS)
    return [floor, row]


def daemon_rows(homes: Homes, boundaries: int, n: int) -> list[Row]:
    """The real daemon over n idle tasks + 100 due every minute; `boundaries` timed minutes."""
    home = homes.make(f"daemon-{n}", n)
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 8\n", encoding="utf-8")
    stamps = home / "stamps"
    stamps.mkdir()
    due = [f"due-{k:03d}" for k in range(100)]
    for task_id in due:
        write_task(home, task_id, STAMP.format(stamps / task_id))
    floor_dir = home / "floor"
    floor_dir.mkdir()
    first = Row("daemon: minute → first task (100 due)", n,
                goal=f"≤ {DAEMON_FIRST_GOAL_MS:g} ms", no_rss=True)
    last = Row("daemon: minute → last of 100 tasks", n, goal=f"≤ {DAEMON_LAST_GOAL_MS:g} ms",
               no_rss=True)
    floor = Row("floor: sleep to the second, start the shell", None, no_rss=True)
    settle(home)
    log(f"daemon N={n}: {boundaries} boundaries after one warm-up minute (~{boundaries + 2} min)")
    out = open(home / "daemon.log", "wb")  # noqa: SIM115 (closed below)
    daemon = subprocess.Popen([PY, str(SCHEDULER), "--home", str(home), "daemon"], cwd=home,
                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              env=core.CHILD_ENV)
    sleeper = subprocess.Popen([PY, "-c", BOUNDARY_FLOOR, str(floor_dir), str(boundaries + 1)],
                               env=core.CHILD_ENV)
    try:
        boundary = (time.time() // 60 + 1) * 60  # the first: warm-up (tasks first seen at start)
        for k in range(boundaries + 1):
            boundary += 0 if k == 0 else 60
            _sleep_until(boundary + 20)
            got = sorted(v for p in stamps.iterdir() if (v := stamp_of(p)) is not None)
            for p in stamps.iterdir():
                p.unlink()
            if k == 0:
                continue
            label = f"boundary {k}/{boundaries}"
            if len(got) != len(due) or not got:
                first.failures.append(f"{label}: {len(got)} of {len(due)} tasks started")
                log(f"  !!! daemon {label}: {len(got)} of {len(due)} tasks started")
                if not got:
                    continue
            for row, value in ((first, got[0]), (last, got[-1])):
                row.samples.append(Sample(wall_ms=(value - boundary) * 1000.0, rss_kib=0, rc=0,
                                          stdout="", stderr="", epoch=boundary))
            log(f"  daemon {label}: first {first.samples[-1].wall_ms:.1f} ms, "
                f"last {last.samples[-1].wall_ms:.1f} ms")
    finally:
        daemon.terminate()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        out.close()
        sleeper.kill()
        sleeper.wait()
    for p in sorted(floor_dir.iterdir())[1:]:  # the first :30 may come before the warm-up
        value = stamp_of(p)
        if value is not None:
            floor.samples.append(Sample(wall_ms=(value - int(p.name)) * 1000.0, rss_kib=0, rc=0,
                                        stdout="", stderr="", epoch=float(p.name)))
    for row, goal in ((first, DAEMON_FIRST_GOAL_MS), (last, DAEMON_LAST_GOAL_MS)):
        row.xfloor = ratio(row.median, floor.median)
        judge_goal(row, goal)
    return [floor, first, last]


def _sleep_until(wall: float) -> None:
    while (left := wall - time.time()) > 0:
        time.sleep(min(left, 1.0))



__all__ = ["chain_rows", "daemon_rows", "dispatch_floor"]
