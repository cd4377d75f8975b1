"""What one run costs the tick (issue 27: 100 due tasks started within 250 ms of the minute on 2
cores, where each run's system calls and Python are on the path of the last start). Real task
files, a real SQLite state, real processes, locks and cgroups (skipped where the machine gives
the tick none). The spies below count calls of the functions named and pass them on: the
outcomes are the real ones."""

from __future__ import annotations

import json
import os
import select
import selectors
import subprocess
import time
from pathlib import Path

from test_start_gate import a_tree

from mdcron.core import safe_fs
from mdcron.core.clock import Clock, to_dt
from mdcron.core.lock_info import LockInfo
from mdcron.core.outcome import Outcome
from mdcron.run import attempt as attempt_module
from mdcron.run import proctree
from mdcron.run import stop as stop_module
from mdcron.run.attempt import RunContext, current_owner
from mdcron.run.dispatch import run_all
from mdcron.run.locks import TaskLock, read_info
from mdcron.run.process import CommandSpec, run_command
from mdcron.run.proctree import Tree
from mdcron.settings.config import load_config
from mdcron.state.store import Store, state_store
from mdcron.tasks.taskfile import load_task_file

NOW = 1_800_000_000.0


def spy(monkeypatch, owner, name: str, *more) -> list:
    """Each call of owner.name (and of the same function where `more` modules imported it by
    name) noted as its arguments, then made."""
    real = getattr(owner, name)
    calls: list = []

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    for module in more:
        if getattr(module, name, None) is real:
            monkeypatch.setattr(module, name, counted)
    return calls


def one_run(home, write_task, command: str = "echo hi"):
    write_task("t", command=command)
    config, _ = load_config(home)
    task = load_task_file(home / "tasks" / "t.md", config)[0]
    owner = current_owner()
    with state_store(config) as store:
        run_id = store.claim_slots([(task.id, NOW, None, str(task.path))], NOW, owner)[
            (task.id, NOW)]
    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    return config, run_all(ctx, [(task, run_id)], print, None)[0], run_id


def test_a_run_walks_its_log_folder_once(home, write_task, monkeypatch):
    """The folder is walked (and made) before the start; the log is opened in that descriptor
    once the process runs, not walked to again."""
    walks = spy(monkeypatch, safe_fs, "open_dir", attempt_module)
    config, outcome, run_id = one_run(home, write_task)
    assert outcome.final.ok
    log_dir = config.logs_dir / "runs" / "t"
    assert [a for a in walks if os.fspath(a[1]) == os.fspath(log_dir)] == [
        (config.home, log_dir)]
    with state_store(config) as store:
        log_path = store.run(run_id)["log_path"]
    assert os.path.dirname(log_path) == str(log_dir)
    assert Path(log_path).read_text(encoding="utf-8") == "hi\n"
    assert os.stat(log_path).st_mode & 0o777 == 0o600


def test_a_run_nobody_stopped_does_not_walk_to_the_stop_records(home, write_task,
                                                                 monkeypatch):
    """One stat says there is no stop record (most runs): the walk that reads one is not
    made. A record there is still taken (test_web_live.py: the Stop button)."""
    reads = spy(monkeypatch, safe_fs, "read_regular", stop_module)
    config, outcome, _ = one_run(home, write_task)
    assert outcome.final.ok
    stops = config.state_dir / "stops"
    assert [a for a in reads if os.path.dirname(a[0]) == str(stops)] == []


def test_a_stop_record_is_still_read_and_taken(home):
    config, _ = load_config(home)
    path = config.state_dir / "stops" / "42.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"by": "ana"}), encoding="utf-8")
    assert stop_module.take_stop(config, 42) == "ana"
    assert not path.exists()
    assert stop_module.take_stop(config, 42) is None


def test_a_stop_record_behind_a_symlinked_folder_is_not_read(home, tmp_path):
    """The stat follows links, the walk does not: a record only a link leads to is refused
    as before, not read because the stat found it."""
    config, _ = load_config(home)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "42.json").write_text(json.dumps({"by": "mallory"}), encoding="utf-8")
    config.state_dir.mkdir(parents=True, exist_ok=True)
    (config.state_dir / "stops").symlink_to(elsewhere)
    assert stop_module.take_stop(config, 42) is None
    assert (elsewhere / "42.json").exists()


def run(tmp_path, command: str, tree: Tree | None):
    spec = CommandSpec(argv=["/bin/sh", "-c", command], cwd=tmp_path, env=dict(os.environ),
                       timeout=10.0)
    return run_command(spec, log_path=tmp_path / "logs" / "run.log", max_log_bytes=1 << 20,
                       tail_bytes=4096, kill_grace=0.3, tree=tree, log_root=tmp_path)


def test_a_leader_the_tick_moved_into_its_cgroup_is_not_looked_up_again(tmp_path,
                                                                       monkeypatch):
    """The tick wrote the gate's pid into cgroup.procs and the kernel took it: /proc/PID/cgroup
    is not read to check; the command runs in the run's cgroup all the same."""
    looks = spy(monkeypatch, proctree, "_joined")
    tree = a_tree(11)
    result = run(tmp_path, "cat /proc/self/cgroup", tree)
    assert result.outcome is Outcome.SUCCESS
    assert f"0::/{tree.cgroup.name}" in result.output_tail  # type: ignore[union-attr]
    assert looks == []


def test_an_empty_cgroup_goes_without_a_look_at_its_members(tmp_path, monkeypatch):
    """A short task leaves its cgroup empty: it is removed at once (the kernel refuses to
    remove one with a process in it), without end() reading its members."""
    ends = spy(monkeypatch, Tree, "end")
    tree = a_tree(12)
    result = run(tmp_path, "echo done", tree)
    assert result.outcome is Outcome.SUCCESS
    assert ends == []
    assert not tree.cgroup.exists()  # type: ignore[union-attr]


def test_a_short_tasks_end_reads_no_member_list(tmp_path, monkeypatch):
    """The look for leftovers when the leader exits is the cgroup's removal itself: its
    members are not read, at the exit or at the end."""
    looks = spy(monkeypatch, Tree, "members")
    tree = a_tree(15)
    result = run(tmp_path, "echo done", tree)
    assert result.outcome is Outcome.SUCCESS and result.output_tail == "done\n"
    assert looks == []
    assert not tree.cgroup.exists()  # type: ignore[union-attr]


def test_a_cgroup_with_a_process_left_is_ended_as_before(tmp_path):
    """A process that left the task's group but not its cgroup: the removal is refused, the
    tree is ended and the process named in the log, as before."""
    tree = a_tree(13)
    result = run(tmp_path, "setsid sleep 30 </dev/null >/dev/null 2>&1 & sleep 0.2", tree)
    assert result.outcome is Outcome.SUCCESS
    log = (tmp_path / "logs" / "run.log").read_text()
    assert "ended with the run" in log and "sleep 30" in log
    assert not tree.cgroup.exists()  # type: ignore[union-attr]


def test_removed_empty_keeps_a_populated_cgroup(tmp_path):
    tree = a_tree(14)
    child = subprocess.Popen(["sleep", "30"])
    try:
        tree.join(child.pid)
        assert tree.removed_empty() is False
        assert tree.cgroup.exists()  # type: ignore[union-attr]
    finally:
        child.kill()
        child.wait()
    give_up = time.monotonic() + 30  # the kernel's count of the cgroup's members catches up
    while not tree.removed_empty():
        assert time.monotonic() < give_up, "an emptied cgroup was never removed"
        time.sleep(0.02)
    assert not tree.cgroup.exists()  # type: ignore[union-attr]


def info(**changes) -> LockInfo:
    base = dict(task_id="t", run_id=7, tick_pid=os.getpid(), tick_start=1, boot_id="b",
                pgid=None, child_start=None, started_at=NOW, deadline=NOW + 60)
    return LockInfo(**{**base, **changes})


def test_a_lock_record_growing_is_not_cut_first(tmp_path, monkeypatch):
    """A run's three records grow (its mark, its process): the file is cut once, at the first
    (its length unknown), not before each; it always holds the last record whole."""
    cuts = spy(monkeypatch, os, "ftruncate")
    lock = TaskLock(tmp_path / "locks" / "t.lock")
    assert lock.try_acquire()
    path = tmp_path / "locks" / "t.lock"
    path.write_text("{" + "x" * 900 + "}")  # a longer record a killed tick left
    records = [info(), info(mark="7.abc", cgroup="/sys/fs/cgroup/mdcron-7.abc"),
               info(mark="7.abc", cgroup="/sys/fs/cgroup/mdcron-7.abc", pgid=4242,
                    child_start=123456)]
    for record in records:
        lock.write(record)
        assert read_info(path) == record
    assert len(cuts) == 1
    lock.write(info(pgid=1))  # shorter than the last: cut to its length
    assert read_info(path) == info(pgid=1)
    assert len(cuts) == 2
    lock.release()
    assert path.read_text() == ""


def test_a_runs_pipes_are_polled_without_a_selector(tmp_path, monkeypatch):
    """The run loop watches its two pipes with one poll object, not a selector (an epoll
    descriptor made, two adds, two deletes, its close, and its keys kept in Python: ~40 µs of
    the tick per run); both streams still reach the log in order, and the pipes are closed."""
    selectors_made = spy(monkeypatch, selectors, "DefaultSelector")
    epolls = spy(monkeypatch, select, "epoll")
    log = tmp_path / "logs" / "run.log"
    spec = CommandSpec(argv=["/bin/sh", "-c", "echo out; sleep 0.1; echo err >&2; sleep 0.1; "
                             "echo last"], cwd=tmp_path, env=dict(os.environ), timeout=10.0)
    pipes: list[int] = []
    result = run_command(spec, log_path=log, max_log_bytes=1 << 20, tail_bytes=4096,
                         on_start=lambda pid: pipes.extend(
                             int(fd) for fd in os.listdir(f"/proc/{os.getpid()}/fd")))
    assert result.ok
    assert log.read_text() == "out\nerr\nlast\n"
    assert selectors_made == [] and epolls == []
    left = {int(fd) for fd in os.listdir(f"/proc/{os.getpid()}/fd")}
    assert len(left) < len(pipes)  # the run's pipes (and its log) closed with it


def test_the_ladder_reads_its_slot_not_the_whole_run_row(home, write_task, monkeypatch):
    """Before the start the ladder needs its run's slot and trigger (a retry row repeats them,
    jitter counts from the slot): two columns read, not the row made a dict; and the task's
    failures in a row and probation in one read, not two."""
    rows = spy(monkeypatch, Store, "run")
    states = spy(monkeypatch, Store, "task_state")
    probations = spy(monkeypatch, Store, "probation_until")
    write_task("t", command="exit 3", retry=1)
    config, _ = load_config(home)
    task = load_task_file(home / "tasks" / "t.md", config)[0]
    owner = current_owner()
    with state_store(config) as store:
        store.observe([(task.id, True, str(task.path))], NOW - 60)
        run_id = store.claim_slots([(task.id, NOW, None, str(task.path))], NOW, owner)[
            (task.id, NOW)]
    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    outcome = run_all(ctx, [(task, run_id)], print, None)[0]
    assert [kind for _, kind, _ in outcome.steps] == ["run", "retry"]
    assert rows == [] and states == [] and probations == []
    with state_store(config) as store:
        made = store.history(5, task_id="t")
        assert store.ladder_start("t") == (1, None)  # the failure the ladder counted
        store.set_probation("t", NOW + 60)
        assert store.ladder_start("t") == (1, NOW + 60)
        assert store.ladder_start("nobody") == (0, None)
    assert [(r["scheduled_for"], r["trigger"], r["kind"]) for r in reversed(made)] == [
        (NOW, "schedule", "run"), (NOW, "schedule", "retry")]
