"""Issue 26 item 6: memory_max, nice and io_class with real processes: a Python child that
allocates past its limit is recorded "killed: memory limit …" and climbs the ladder."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_cli

from mdcron.core.clock import Clock
from mdcron.run.limits import Limits
from mdcron.run.proctree import cgroup_base
from mdcron.run.tick import run_tick
from mdcron.settings.config import Config, load_config
from mdcron.state.store import state_store
from mdcron.tasks.taskfile import parse_task_text

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
HOG = (f"{sys.executable} -c \"import os; print('nice', os.nice(0), flush=True); "
       "x = bytearray(400 * 1024 * 1024); print('allocated')\"")


def tick(home: Path, at: datetime = T0):
    config, _ = load_config(home)
    return run_tick(config, Clock(at), say=lambda _l: None, environ={"PATH": "/usr/bin:/bin"})


def runs(home: Path, task_id: str) -> list[tuple]:
    with state_store(load_config(home)[0]) as store:
        return [(r["attempt"], r["kind"], r["status"], r["error"])
                for r in reversed(store.history(10, task_id))]


def parse(**keys: object):
    lines = ["---", "id: t", 'schedule: "* * * * *"', "command: echo hi"]
    lines += [f"{k}: {v}" for k, v in keys.items()]
    return parse_task_text("\n".join([*lines, "---", ""]), Path("/tmp/tasks/t.md"),
                           Config(home=Path("/tmp")))


@pytest.mark.parametrize(("key", "value", "words"), [
    ("memory_max", "lots", "a size like 512M"),
    ("memory_max", "100K", "from 1M to 1024T"),
    ("nice", 25, "from -20 (first) to 19"),
    ("nice", "true", "from -20 (first) to 19"),
    ("io_class", "fast", "idle, best-effort, realtime"),
])
def test_bad_limits_name_the_file_line_and_fix(key, value, words):
    task, problems = parse(**{key: value})
    assert task is None
    (problem,) = problems
    assert problem.line == 5 and problem.key == key and words in problem.message
    assert str(problem).startswith(f"/tmp/tasks/t.md:5: error: {key}:")


def test_good_limits_are_read():
    task, problems = parse(memory_max="1.5G", nice=-5, io_class="Best-Effort")
    assert problems == []
    assert (task.memory_max, task.nice, task.io_class) == (3 * 2**29, -5, "best-effort")


def test_a_claude_task_cannot_take_limits():
    text = "---\nid: c\nschedule: '* * * * *'\nrun_as: claude\nnice: 5\n---\nSay hi.\n"
    task, problems = parse_task_text(text, Path("/tmp/tasks/c.md"), Config(home=Path("/tmp")))
    assert task is None and "runs inside the tick" in problems[0].message


def test_a_child_past_its_memory_limit_is_killed_so_and_climbs_the_ladder(home, write_task):
    write_task("hog", command=HOG, memory_max="96M", retry=True, schedule="0 9 * * *")
    write_task("plain", command="echo nope; exit 3", memory_max="256M", schedule="0 9 * * *")
    tick(home)
    assert runs(home, "plain")[0][3] == "exit 3"  # a failure of its own stays itself
    got = runs(home, "hog")
    assert [(a, k, s) for a, k, s, _ in got] == [(1, "run", "failed"), (2, "retry", "failed")]
    for *_, error in got:
        assert error.startswith("killed: memory limit 96 MiB"), error
    with state_store(load_config(home)[0]) as store:
        assert store.task_state("hog").consecutive_failures == 1


def test_under_its_limit_a_child_runs_with_its_nice_and_io_class(home, write_task):
    script = (f"{sys.executable} -c \"import os; print('nice', os.nice(0)); "
              "x = bytearray(20 * 1024 * 1024)\"; ionice -p $$")
    write_task("calm", command=script, memory_max="512M", nice=7, io_class="idle",
               schedule="0 9 * * *")
    report = tick(home)
    (_, _, result), = report.results
    assert result.ok, result
    log = result.log_path.read_text()
    assert "nice 7" in log and "idle" in log


def test_negative_nice_is_refused_without_root_before_the_start():
    assert Limits(nice=-5).refusal(0) is None
    assert "nice: -5 needs root" in Limits(nice=-5).refusal(1000)
    assert "realtime needs root" in Limits(io_class="realtime").refusal(1000)


def test_negative_nice_for_a_task_of_another_user_is_refused_not_dropped(home, write_task):
    if os.geteuid() != 0:
        pytest.skip("switching users needs a root tick")
    (home / "scheduler.yaml").write_text("allow_outside_home: [/tmp]\n")
    write_task("other", command="true", user="nobody", nice=-5, cwd="/tmp",
               schedule="0 9 * * *")
    tick(home)
    error = runs(home, "other")[0][3]
    assert error.startswith("cannot start: nice: -5 needs root (the task's process runs as "
                            "uid "), error


def _memory_controller() -> bool:
    base = cgroup_base()
    return base is not None and "memory" in (base / "cgroup.controllers").read_text().split()


@pytest.mark.skipif(not _memory_controller(),
                    reason="no cgroup v2 memory controller here (the RLIMIT_AS path is tested)")
def test_with_a_memory_cgroup_the_oom_kill_is_read_from_memory_events(home, write_task):
    write_task("hog", command=HOG, memory_max="64M", schedule="0 9 * * *")
    tick(home)
    assert "cgroup memory.max" in runs(home, "hog")[0][3]


def test_show_and_why_say_which_limits_apply(home, write_task):
    write_task("calm", command="true", memory_max="512M", nice=7, io_class="idle")
    for command in ("show", "why"):
        out = run_cli(home, command, "calm").stdout
        assert "memory_max 512 MiB, nice 7, io_class idle" in out, out
        assert [line for line in out.splitlines() if line.startswith("limits")], out


def test_the_dashboard_says_which_limits_and_pings_apply(home, write_task):
    from mdcron.web.data import task_view

    write_task("calm", command="true", memory_max="512M", nice=7,
               ping_url="https://hc-ping.com/secret-uuid")
    why = task_view(load_config(home)[0], "calm", T0.timestamp())["why"]
    assert any(line.startswith("limits: memory_max 512 MiB, nice 7") for line in why), why
    assert any(line.startswith("pings: https://hc-ping.com/… at the start") for line in why)
    assert not any("secret-uuid" in line for line in why)
