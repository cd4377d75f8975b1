"""Issue 27: what the daemon's held tick works out before its minute (cli/warm.py), so the
first run does not at the go: the claims' owner (this process) and the environment without
its secrets. Neither may go stale: a fork is another owner, a changed environment is
filtered again."""

from __future__ import annotations

import os
from pathlib import Path

from mdcron.core.lock_info import boot_id, process_start_time
from mdcron.run.attempt import current_owner
from mdcron.run.environment import filter_ahead, task_environment
from mdcron.settings.config import load_config
from mdcron.tasks.task import find_duplicate_ids
from mdcron.tasks.taskfile import load_task_file


def test_the_owner_is_read_once_per_process_and_a_fork_reads_its_own(tmp_path):
    owner = current_owner()
    assert current_owner() is owner  # read once
    assert (owner.pid, owner.start, owner.boot) == (os.getpid(), process_start_time(os.getpid()),
                                                    boot_id())
    out = tmp_path / "child"
    pid = os.fork()
    if pid == 0:  # the child: its own pid and start time, not its parent's
        try:
            child = current_owner()
            out.write_text(f"{child.pid} {child.start}")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    child_pid, child_start = out.read_text().split()
    assert int(child_pid) == pid != owner.pid
    assert child_start != "None"


def test_an_environment_filtered_ahead_that_changed_by_the_go_is_filtered_again(home,
                                                                                write_task):
    config, _ = load_config(home)
    task, _ = load_task_file(write_task("a", command="true"), config)
    names = ("*_TOKEN",)
    before = {"PATH": "/usr/bin:/bin", "HOME": "/root"}
    filter_ahead(before, names)
    after = {**before, "DEPLOY_TOKEN": "s3cret", "LANG": "C"}  # set after the warm-up
    env = task_environment(after, task, secret_names=names, run_id=1, attempt=1,
                           claude_config_dir=Path("/x"))
    assert "DEPLOY_TOKEN" not in env and env["LANG"] == "C"
    env = task_environment(before, task, secret_names=names, run_id=1, attempt=1,
                           claude_config_dir=Path("/x"))
    assert env["PATH"] == "/usr/bin:/bin" and "LANG" not in env


class Named:
    def __init__(self, task_id: str, path: str) -> None:
        self.id, self.path = task_id, path


def test_duplicate_ids_are_found_from_any_iterable_and_none_is_empty():
    items = [Named("a", "/t/a.md"), Named("b", "/t/b.md"), Named("a", "/t/a2.md")]
    assert find_duplicate_ids(iter(items)) == {"a": [Path("/t/a.md"), Path("/t/a2.md")]}
    assert find_duplicate_ids(items[:2]) == {}
    assert find_duplicate_ids([]) == {}
