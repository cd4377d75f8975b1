"""run/proctree.keep_joins_quick and the held tick's go (cli/warm.at_the_go), issue 27: the
first cgroup join after a quiet spell waits out an RCU grace period in the kernel (~5-15 ms
measured here); the daemon's tick keeps the joins quick while its runs start. Real cgroups,
real processes (skipped where the machine gives the tick no writable cgroup v2)."""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mdcron.cli import warm
from mdcron.run.cgroup_keep import keep_joins_quick
from mdcron.run.proctree import Tree, cgroup_base


def needs_cgroup() -> None:
    if cgroup_base() is None:
        pytest.skip("this machine gives the tick no writable cgroup v2")


def keepers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "cgroup-keep"}


@pytest.fixture(autouse=True)
def no_keeper():
    """Each test starts with no keeper (one from the test before ends within its seconds)."""
    for thread in keepers():
        thread.join(timeout=10.0)
    assert not keepers()


def join_times(runs: int, gap: float) -> list[float]:
    """ms each of `runs` joins takes, each of a new process into its own new cgroup, `gap`
    seconds (longer than a grace period) after the one before."""
    out = []
    for k in range(runs):
        tree = Tree.open(9000 + k)
        if tree.cgroup is None:
            pytest.skip("the tick may not create a run's cgroup here")
        child = subprocess.Popen(["sleep", "30"])
        try:
            time.sleep(gap)
            began = time.perf_counter()
            tree.join(child.pid)
            out.append((time.perf_counter() - began) * 1000.0)
            assert f"0::/{tree.cgroup.name}" in Path(f"/proc/{child.pid}/cgroup").read_text()
        finally:
            child.kill()
            child.wait()
            tree.close()
    return out


def test_joins_spread_out_in_time_are_quick_while_kept():
    """Without the keeper each of these joins (30 ms apart) pays the kernel's wait (median
    ~9 ms here); kept, each is ~0.05 ms."""
    needs_cgroup()
    keep_joins_quick(3.0)
    time.sleep(0.05)
    assert statistics.median(join_times(6, 0.03)) < 2.0


def test_the_keeper_moves_nothing_and_ends_by_itself():
    needs_cgroup()
    own, before = Path("/proc/self/cgroup").read_text(), keepers()
    keep_joins_quick(0.2, every=0.01)
    (thread,) = keepers() - before
    assert thread.daemon
    thread.join(timeout=5.0)  # its deadline is 0.2 s: it never outlives it by much
    assert not thread.is_alive()
    assert Path("/proc/self/cgroup").read_text() == own


def test_no_keeper_without_a_cgroup(monkeypatch):
    monkeypatch.setenv("MDCRON_CGROUP", "off")
    before = keepers()
    keep_joins_quick(5.0)
    assert keepers() == before


def test_the_go_keeps_the_joins_quick():
    before = keepers()
    warm.at_the_go()
    assert len(keepers() - before) == (cgroup_base() is not None)


def test_the_base_is_found_once_per_process_and_the_switch_still_turns_it_off(monkeypatch):
    from mdcron.run import proctree

    first = cgroup_base()
    assert cgroup_base() is first  # the same answer, not found again
    assert proctree._own_base.cache_info().hits >= 1
    monkeypatch.setenv("MDCRON_CGROUP", "off")
    assert cgroup_base() is None
    monkeypatch.delenv("MDCRON_CGROUP")
    assert cgroup_base() is first


def test_small_proc_files_are_read_whole_or_not_at_all(tmp_path):
    from mdcron.run.proctree import _read

    big = tmp_path / "big"
    big.write_bytes(b"x" * 200_000)  # more than one read's worth
    assert _read(str(big)) == b"x" * 200_000
    assert _read(str(tmp_path / "missing")) is None
    assert _read(b"/proc/self/stat").startswith(str(os.getpid()).encode() + b" (")


def test_cron_tick_with_a_due_task_keeps_the_joins_quick_from_its_decline(home, write_task):
    """Issue 27: cron's tick with one due task (no pool) starts the keeper once the idle check
    has declined for the due row, so its task's join is quick: while the task runs, the tick
    has the keeper's thread beside its main one (the claim waited out the marker's threads)."""
    from conftest import age_cache, run_cli

    needs_cgroup()
    write_task("job", schedule="* * * * *", command="ls /proc/$PPID/task | wc -l > threads")
    run_cli(home, "tick", "--now", "2026-11-23T09:59:00+00:00")  # first seen: not due yet
    age_cache(home)
    seen = []
    for minute in range(3):  # the keeper lasts KEEP_S (0.5 s): a loaded machine may take
        # longer than that from the decline to the task, so up to 3 minutes are tried; a
        # tick without the keeper shows 1 thread in every one
        tick = run_cli(home, "tick", "--now", f"2026-11-23T10:0{minute}:00+00:00")
        assert tick.returncode == 0, tick.stdout + tick.stderr
        seen.append(int((home / "threads").read_text()))
        if seen[-1] == 2:
            break
    assert seen[-1] == 2, seen


ORDER_PROBE = """
import sys
events = []
def hook(event, args):
    if event == "open" and str(args[0]).endswith("/cgroup.procs") and "keep" not in events:
        events.append("keep")  # the keeper opens the tick's own cgroup.procs
    elif event == "import" and args[0] == "mdcron.run.tick" and "tick" not in events:
        events.append("tick")
sys.addaudithook(hook)
from mdcron.cli.main import main
main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("ORDER", events)
"""


def test_the_keeper_starts_before_the_tick_loads_its_modules(home, write_task):
    """Issue 27: the keeper's first migration waits out the kernel (~6-13 ms); started in
    run_tick it was still under way when the run's cgroup was made (mkdir waited for it).
    Started as the idle check declines for a due task, it is over by then."""
    import sys

    from conftest import REPO, age_cache, run_cli

    needs_cgroup()
    write_task("job", schedule="* * * * *", command="true")
    run_cli(home, "tick", "--now", "2026-11-23T09:59:00+00:00")  # first seen: not due yet
    age_cache(home)
    out = subprocess.run([sys.executable, "-c", ORDER_PROBE, str(home),
                          "2026-11-23T10:00:00+00:00"], cwd=REPO, capture_output=True, text=True)
    assert "ORDER ['keep', 'tick']" in out.stdout, out.stdout + out.stderr


def test_a_warmed_tick_keeps_the_joins_quick_from_its_rewarm(home, write_task):
    """Issue 27: kept from the go only, the keeper's first move (the kernel's wait, ~10 ms,
    the cgroup lock held meanwhile) held up the first run's cgroup mkdir and its spawn; a
    held tick with work ahead starts it at the rewarm, 0.3 s before the minute. One with
    nothing ahead (no view loaded) keeps no thread for it."""
    from mdcron.schedule.cache import load
    from mdcron.settings.config import load_config

    needs_cgroup()
    write_task("job", schedule="* * * * *", command="true")
    read_end, write_end = os.pipe()
    try:
        ahead = warm.Ahead(str(home), read_end, at=time.time() + 60)
        before = keepers()
        ahead.rewarm()
        assert keepers() == before  # idle ahead: nothing to keep
        config, _ = load_config(home)
        ahead.view = load(config)  # what warm_and_wait loads for a minute with work
        ahead.rewarm()
        (thread,) = keepers() - before
        thread.join(timeout=5.0)  # kept past the minute's start, not for long
        assert not thread.is_alive()
    finally:
        os.close(read_end), os.close(write_end)
        if ahead.view is not None:
            ahead.view.close()
