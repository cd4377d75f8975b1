"""What one run costs the tick (issue 27: 100 due tasks started within 250 ms of the minute on 2
cores, where each run's system calls and Python are on the path of the last start). Real task
files, a real SQLite state, real processes, locks and cgroups (skipped where the machine gives
the tick none). The spies below count calls of the functions named and pass them on: the
outcomes are the real ones."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mdcron.core import safe_fs
from mdcron.core.clock import Clock, to_dt
from mdcron.run import attempt as attempt_module
from mdcron.run import stop as stop_module
from mdcron.run.attempt import RunContext, current_owner
from mdcron.run.dispatch import run_all
from mdcron.settings.config import load_config
from mdcron.state.store import state_store
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
