"""Issue 21 (items 2, 3, 5): a self-heal by a hostile model must not escape. It may change the
script and the task's prose, not the keys that decide what runs, where, when and as whom; one heal
cannot prepare the next; a heal killed half-way is rolled back by the next tick. The model is
the fake Messages API on 127.0.0.1 (tests/fake_anthropic.py) through the real SDK; the tick is the
real CLI in a subprocess, killed with a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SCHEDULER, run_cli
from fake_anthropic import Reply, message, tool_use

from mdcron.core.clock import Clock, to_dt
from mdcron.core.outcome import Outcome, RunResult
from mdcron.selfheal.healer import ClaudeHealer
from mdcron.selfheal.tools import Refused, Sandbox
from mdcron.settings.config import load_config
from mdcron.state.store import Store
from mdcron.tasks.taskfile import load_task_file

BEFORE, AT, LATER = ("2026-11-23T09:59:00+00:00", "2026-11-23T10:00:00+00:00",
                     "2026-11-23T10:05:00+00:00")
NOW = 1_790_000_000.0
BROKEN = "#!/bin/sh\necho broken >&2\nexit 3\n"
SCRIPT_TASK = """---
id: job
title: Nightly job
schedule: "0 10 * * *"   # keep quoted
run_as: script
command: scripts/job.sh
timeout: 60
self_heal: true
---

Says hello every morning.
"""
SHELL_TASK = """---
id: job
schedule: "0 10 * * *"
command: "exit 3"
timeout: 60
---

Fails on purpose.
"""
OTHER = '---\nid: other\nschedule: "@daily"\ncommand: "true"\nself_heal: false\n---\n'
FAILURE = RunResult(Outcome.FAILED, exit_code=3, fail_reason="exit 3", output_tail="broken\n")


def make_home(tmp_path: Path, task: str = SCRIPT_TASK, sink=None) -> tuple[Path, Path]:
    home, outside = tmp_path / "home", tmp_path / "outside"
    for folder in (home / "tasks", home / "scripts", outside):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text("s3cret outside the home\n")
    notify = (f"notify:\n  destinations:\n    ops: \"{sink.json_url('/hook')}\"\n"
              "  default: ops\n") if sink else ""
    (home / "scheduler.yaml").write_text(f"{notify}claude:\n  retry_backoff: 0.01\n")
    script = home / "scripts" / "job.sh"
    script.write_text(BROKEN)
    script.chmod(0o755)
    (home / "tasks" / "job.md").write_text(task)
    (home / "tasks" / "other.md").write_text(OTHER)
    return home, outside


def audit(home: Path) -> list[dict]:
    path = home / "logs" / "self-heal-audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def refusals(home: Path) -> list[str]:
    return [r["reason"] for line in audit(home) for r in line.get("refused", [])]


def heals(home: Path) -> list[dict]:
    with Store(home / "state" / "mdcron.db") as store:
        return list(reversed(store.heal_history("job", 100)))


def tick(home: Path, env: dict[str, str]) -> None:
    run_cli(home, "tick", "--now", BEFORE, env=env)
    run_cli(home, "tick", "--now", AT, env=env)


def heal_once(home: Path, environ: dict[str, str]):
    config, _ = load_config(home)
    task, problems = load_task_file(home / "tasks" / "job.md", config)
    assert task is not None, problems
    with Store(config.db_path) as store:
        healer = ClaudeHealer(config, environ, store, Clock(to_dt(NOW)))
        return healer.heal(task, attempt=1, failure=FAILURE, previous=None,
                           deadline=time.monotonic() + 60, run_id=7)


# --- item 2: the keys that decide what runs are not the model's ------------------------------


def test_a_heal_cannot_change_the_command_and_the_rerun_runs_the_old_one(tmp_path,
                                                                          fake_claude):
    home, outside = make_home(tmp_path, SHELL_TASK)
    evil = f'command: "cat {outside}/secret.txt; echo pwned > {outside}/pwned"'
    fake_claude.tools(tool_use("replace_in_file", path="tasks/job.md", old='command: "exit 3"',
                               new=evil))
    fake_claude.tools(tool_use("finish", diagnosis="pointed the task elsewhere"))
    fake_claude.tools(tool_use("finish", diagnosis="nothing more"))
    tick(home, fake_claude.environ)

    assert not (outside / "pwned").exists()
    assert b'command: "exit 3"' in (home / "tasks" / "job.md").read_bytes()
    (result,) = fake_claude.tool_results(1)
    assert result["is_error"] and "refused: heal tried to change `command`" in result["content"]
    assert any("refused: heal tried to change `command`" in r for r in refusals(home))
    assert "s3cret" not in json.dumps(fake_claude.requests)  # not in heal 2's output_tail


KEY_EDITS = {
    "schedule": ('"0 10 * * *"', '"* * * * *"'),
    "cwd": ("timeout: 60", "timeout: 60\ncwd: scripts"),
    "env": ("timeout: 60", "timeout: 60\nenv: {LD_PRELOAD: /tmp/evil.so}"),
    "run_as": ("run_as: script", "run_as: shell"),
    "hosts": ("timeout: 60", "timeout: 60\nhosts: [elsewhere]"),
    "uses": ("timeout: 60", "timeout: 60\nuses: [gpu]"),
    "self_heal": ("self_heal: true", "self_heal: false"),
    "command": ("command: scripts/job.sh", "command: scripts/job.sh --evil"),
    "user": ("timeout: 60", "timeout: 60\nuser: root"),  # not a key today: refused all the same
}


@pytest.mark.parametrize("key", sorted(KEY_EDITS))
def test_a_heal_cannot_change_a_key_that_decides_what_runs(tmp_path, fake_claude, key):
    home, _ = make_home(tmp_path)
    (home / "scheduler.yaml").write_text("resources: {gpu: 1}\nclaude:\n  retry_backoff: 0.01\n")
    task_file = home / "tasks" / "job.md"
    before = task_file.read_bytes()
    old, new = KEY_EDITS[key]
    fake_claude.tools(tool_use("replace_in_file", path="tasks/job.md", old=old, new=new))
    fake_claude.tools(tool_use("finish", diagnosis=f"changed {key}"))
    record = heal_once(home, fake_claude.environ)

    assert task_file.read_bytes() == before
    assert record.outcome == "no_change", record.diagnosis
    (result,) = fake_claude.tool_results(1)
    assert result["is_error"], result
    said = f"refused: heal tried to change `{key}`"
    assert said in result["content"]
    [line] = audit(home)
    assert [r["reason"] for r in line["refused"]] == [result["content"]]


def test_a_heal_may_change_the_prose_the_timeout_title_and_tags(tmp_path, fake_claude):
    # the control: what the allow-list lets through still goes through
    home, _ = make_home(tmp_path)
    fake_claude.tools(
        tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60",
                 new="timeout: 120\ntags: [nightly]"),
        tool_use("replace_in_file", path="tasks/job.md", old="title: Nightly job",
                 new="title: Morning job  # renamed"),
        tool_use("replace_in_file", path="tasks/job.md", old="Says hello every morning.",
                 new="Says hello every morning; needs the network."),
        tool_use("replace_in_file", path="scripts/job.sh", old="exit 3", new="exit 0"))
    fake_claude.tools(tool_use("finish", diagnosis="fixed"))
    record = heal_once(home, fake_claude.environ)
    assert record.outcome == "changed", record.diagnosis
    assert [r["is_error"] for r in fake_claude.tool_results(1)] == [False] * 4
    text = (home / "tasks" / "job.md").read_text()
    assert "timeout: 120\ntags: [nightly]" in text and "needs the network" in text


# --- item 3: one heal cannot prepare the next ---------------------------------------------------


def test_heal_one_cannot_widen_what_heal_two_may_write(tmp_path, fake_claude):
    home, _ = make_home(tmp_path)
    other = home / "tasks" / "other.md"
    before = other.read_bytes()
    fake_claude.tools(tool_use("replace_in_file", path="tasks/job.md",
                               old="command: scripts/job.sh", new="command: tasks/other.md"))
    fake_claude.tools(tool_use("finish", diagnosis="run the other file"))
    fake_claude.tools(tool_use(
        "write_file", path="tasks/other.md",
        content='---\nid: other\nschedule: "@daily"\ncommand: "env"\n---\n'))
    fake_claude.tools(tool_use("finish", diagnosis="fixed the other task"))
    tick(home, fake_claude.environ)

    assert other.read_bytes() == before
    assert len(fake_claude.requests) == 4, "both heals ran"
    heal_two = fake_claude.tool_results(3)[0]
    assert heal_two["is_error"] and "another task's file" in heal_two["content"]
    assert b"command: scripts/job.sh" in (home / "tasks" / "job.md").read_bytes()


def test_the_writable_set_never_holds_another_tasks_file(tmp_path):
    # even when a person's task names one as its script: editing it would bypass its keys
    home, _ = make_home(tmp_path, SCRIPT_TASK.replace("scripts/job.sh", "tasks/other.md"))
    config, _ = load_config(home)
    task, problems = load_task_file(home / "tasks" / "job.md", config)
    assert task is not None, problems
    sandbox = Sandbox(config, task, home / "logs" / "unused", 10_000)
    with pytest.raises(Refused, match="another task's file"):
        sandbox.check_write("tasks/other.md")
    assert sandbox.check_write("tasks/job.md") == (home / "tasks" / "job.md").resolve()


# --- no way out of the home: the tools, and what the rerun would run ---------------------------


def _escape(tmp_path, fake_claude, target: str, through: str) -> tuple[Path, Path]:
    """Heal 1 writes `target` itself, and points the task's command at writing `through`."""
    home, outside = make_home(tmp_path, SHELL_TASK)
    fake_claude.tools(
        tool_use("write_file", path=target, content="pwned\n"),
        tool_use("replace_in_file", path="tasks/job.md", old='command: "exit 3"',
                 new=f'command: "echo pwned > {through}"'))
    fake_claude.tools(tool_use("finish", diagnosis="escaped"))
    fake_claude.tools(tool_use("finish", diagnosis="nothing more"))
    tick(home, fake_claude.environ)
    return home, outside


def _assert_held(home: Path, outside: Path, fake_claude) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    results = fake_claude.tool_results(1)
    assert [r["is_error"] for r in results] == [True, True], results
    assert "outside the home" in results[0]["content"]
    assert "refused: heal tried to change `command`" in results[1]["content"]
    assert len(refusals(home)) >= 2


def test_a_heal_cannot_write_through_dot_dot(tmp_path, fake_claude):
    home, outside = _escape(tmp_path, fake_claude, "../outside/pwned", "../outside/pwned")
    _assert_held(home, outside, fake_claude)


def test_a_heal_cannot_write_an_absolute_path(tmp_path, fake_claude):
    outside = tmp_path / "outside"
    home, outside = _escape(tmp_path, fake_claude, str(outside / "pwned"), str(outside / "pwned"))
    _assert_held(home, outside, fake_claude)


def test_a_heal_cannot_write_through_a_symlink_pointing_out(tmp_path, fake_claude):
    def build(body: dict) -> Reply:  # the link exists before the model's first call
        return Reply(body=message([
            tool_use("write_file", path="linkdir/pwned", content="pwned\n"),
            tool_use("replace_in_file", path="tasks/job.md", old='command: "exit 3"',
                     new='command: "echo pwned > linkdir/pwned"')], stop_reason="tool_use"))

    home, outside = make_home(tmp_path, SHELL_TASK)
    (home / "linkdir").symlink_to(outside)
    fake_claude.dynamic(build)
    fake_claude.tools(tool_use("finish", diagnosis="escaped"))
    fake_claude.tools(tool_use("finish", diagnosis="nothing more"))
    tick(home, fake_claude.environ)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    results = fake_claude.tool_results(1)
    assert [r["is_error"] for r in results] == [True, True], results
    assert "symlink" in results[0]["content"]
    assert "refused: heal tried to change `command`" in results[1]["content"]


# --- item 5: a killed heal leaves nothing half-done --------------------------------------------

HEALED = "#!/bin/sh\necho healed\n"


def _kill_mid_heal(home: Path, fake_claude) -> int:
    """Start a tick whose heal writes the script, then hangs on the model's next answer; SIGKILL
    the tick there. Returns the heal's run id."""
    entered, release = threading.Event(), threading.Event()

    def hang(body: dict) -> Reply:
        entered.set()
        release.wait(120)
        return Reply(body=message([tool_use("finish", diagnosis="late")],
                                  stop_reason="tool_use"))

    fake_claude.tools(tool_use("write_file", path="scripts/job.sh", content=HEALED))
    fake_claude.dynamic(hang)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    env.update(fake_claude.environ)
    run_cli(home, "tick", "--now", BEFORE, env=fake_claude.environ)
    proc = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                             "--now", AT], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert entered.wait(120), "the heal never asked the model a second time"
        assert (home / "scripts" / "job.sh").read_text() == HEALED  # the heal's write is done
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
        release.set()
    with Store(home / "state" / "mdcron.db") as store:
        [(run_id,)] = store.connect().execute("SELECT id FROM runs WHERE kind = 'heal'")
    return int(run_id)


def test_a_killed_heal_is_rolled_back_by_the_next_tick(tmp_path, fake_claude, http_sink):
    home, _ = make_home(tmp_path, sink=http_sink)
    script = home / "scripts" / "job.sh"
    run_id = _kill_mid_heal(home, fake_claude)

    next_tick = run_cli(home, "tick", "--now", LATER)  # no key needed to roll back
    assert next_tick.returncode in (0, 1), next_tick.stderr
    assert script.read_text() == BROKEN and os.access(script, os.X_OK)
    [row] = heals(home)
    assert (row["run_id"], row["outcome"]) == (run_id, "rolled_back")
    assert "rolled back scripts/job.sh" in row["diagnosis"]
    line = audit(home)[-1]
    assert (line["event"], line["outcome"], line["restored"]) == (
        "recovered", "rolled_back", ["scripts/job.sh"])
    assert not list((home / "logs" / "heal-journal").glob("*.json"))
    history = json.loads(run_cli(home, "history", "--json").stdout)
    [heal_run] = [h for h in history if h["kind"] == "heal"]
    assert heal_run["status"] == "crashed" and "rolled back scripts/job.sh" in heal_run["note"]
    assert any("rolled back scripts/job.sh" in json.dumps(b) for b in http_sink.bodies())

    revert = run_cli(home, "revert-heal", "job")
    assert revert.returncode == 1 and "no applied heal to revert" in revert.stderr
    assert "rolled its changes back" in revert.stderr
    assert script.read_text() == BROKEN
    run_cli(home, "tick", "--now", "2026-11-23T10:06:00+00:00")
    assert len(heals(home)) == 1  # settled once


def test_a_killed_heal_whose_file_was_edited_since_is_left_and_revertible(tmp_path,
                                                                           fake_claude):
    home, _ = make_home(tmp_path)
    script = home / "scripts" / "job.sh"
    _kill_mid_heal(home, fake_claude)
    script.write_text("#!/bin/sh\necho mine\n")  # a person fixed it before the next tick

    run_cli(home, "tick", "--now", LATER)
    assert script.read_text() == "#!/bin/sh\necho mine\n"  # never overwritten
    [row] = heals(home)
    assert row["outcome"] == "interrupted" and "left as found: scripts/job.sh" in row["diagnosis"]
    assert audit(home)[-1]["left"] == ["scripts/job.sh (changed since the heal)"]
    refused = run_cli(home, "revert-heal", "job")
    assert refused.returncode == 1 and "changed since heal" in refused.stderr
    forced = run_cli(home, "revert-heal", "job", "--force")
    assert forced.returncode == 0, forced.stderr
    assert script.read_text() == BROKEN



def _heal_in_a_process_that_dies(home: Path, *, recorded: bool) -> None:
    """A process writes the journal and the script as a heal does, maybe records the heal's
    row (then dies before removing the journal), and exits: its journal is left behind."""
    code = f"""
import sys
sys.path.insert(0, {str(SCHEDULER.parent)!r})
from mdcron.core.private_files import write_private
from mdcron.selfheal.journal import HealJournal
from mdcron.selfheal.tools import sha256
from mdcron.settings.config import load_config
from mdcron.state.store import Store
from pathlib import Path
config, _ = load_config(Path({str(home)!r}))
script = config.home / "scripts" / "job.sh"
backup_dir = config.logs_dir / "heal-backups" / "job" / "20261123T100000Z-1"
before = script.read_bytes()
write_private(backup_dir / "scripts" / "job.sh", before, root=config.home)
journal = HealJournal.begin(config, "job", config.tasks_dir / "job.md", 5, 1, {NOW!r},
                            backup_dir)
journal.intend("scripts/job.sh", before, backup_dir / "scripts" / "job.sh",
               sha256({HEALED!r}.encode()))
script.write_text({HEALED!r})
if {recorded!r}:
    with Store(config.db_path) as store:
        store.add_heal("job", 5, 1, {NOW!r}, "fixed", "", str(backup_dir), "changed")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_journal_whose_heal_was_recorded_is_only_closed(tmp_path):
    home, _ = make_home(tmp_path)
    run_cli(home, "tick", "--now", BEFORE)
    _heal_in_a_process_that_dies(home, recorded=True)
    run_cli(home, "tick", "--now", LATER)
    assert (home / "scripts" / "job.sh").read_text() == HEALED  # the heal had finished
    assert [h["outcome"] for h in heals(home)] == ["changed"]
    assert not list((home / "logs" / "heal-journal").glob("*.json"))


def test_a_journal_of_a_process_that_died_is_rolled_back_without_a_run_row(tmp_path):
    home, _ = make_home(tmp_path)
    run_cli(home, "tick", "--now", BEFORE)
    _heal_in_a_process_that_dies(home, recorded=False)
    said = run_cli(home, "tick", "--now", LATER)
    assert (home / "scripts" / "job.sh").read_text() == BROKEN
    [row] = heals(home)
    assert row["outcome"] == "rolled_back" and row["run_id"] == 5
    assert "rolled back scripts/job.sh" in said.stdout + said.stderr  # the tick's log says it


def test_an_unreadable_journal_is_set_aside_and_said(tmp_path):
    home, _ = make_home(tmp_path)
    folder = home / "logs" / "heal-journal"
    folder.mkdir(parents=True)
    (folder / "job--x.json").write_text("{not json")
    said = run_cli(home, "tick", "--now", LATER)
    assert "cannot be read" in said.stdout + said.stderr
    assert (folder / "job--x.json.unreadable").exists()
    assert "cannot be read" not in run_cli(home, "tick", "--now", LATER).stdout  # said once
