"""Self-heal through the real SDK against the fake API: a real fix, the guard rails against an
adversarial model, budgets, probation and revert."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import fake_anthropic
import pytest
from conftest import REPO
from fake_anthropic import Reply, message, tool_use

from mdcron.core.clock import Clock, to_dt
from mdcron.core.outcome import Outcome, RunResult
from mdcron.selfheal.healer import (
    ClaudeHealer,
    RevertError,
    heal_history,
    revert_heal,
)
from mdcron.selfheal.tools import PACKAGE_DIR, Refused, Sandbox, glob_regex
from mdcron.settings.config import Config, load_config
from mdcron.state.store import Store
from mdcron.tasks.taskfile import load_task_file

fake_claude = fake_anthropic.fake_claude  # the fixture

NOW = 1_790_000_000.0


def at(ts: float) -> Clock:
    """The tick's clock at `ts` (a `tick --now` replay)."""
    return Clock(to_dt(ts))
BROKEN = "#!/bin/sh\nset -e\nech hello\n"
TASK = """---
id: job
title: Nightly job
schedule: "0 3 * * *"   # keep quoted
run_as: script
command: scripts/job.sh
timeout: 60
self_heal: true
{extra}---

Says hello every night.
"""
FAILURE = RunResult(Outcome.FAILED, exit_code=127, fail_reason="exit 127",
                    output_tail="scripts/job.sh: 3: ech: not found\n")


@pytest.fixture
def setup(tmp_path: Path):
    """A home with a broken script task, scheduler-like files, and a folder outside it."""
    def make(extra: str = "", claude: str = "") -> tuple[Config, Path, Path]:
        home = tmp_path / "home"
        outside = tmp_path / "outside"
        for d in ("tasks", "scripts", "prompts", "mdcron", "logs", "state"):
            (home / d).mkdir(parents=True, exist_ok=True)
        outside.mkdir(exist_ok=True)
        (outside / "target.sh").write_text("#!/bin/sh\necho outside\n")
        (outside / "secret.txt").write_text("s3cret\n")
        shutil.copy(REPO / "prompts" / "self-heal.txt", home / "prompts" / "self-heal.txt")
        (home / "mdcron" / "fake.py").write_text("# scheduler code\n")
        (home / "scheduler.py").write_text("# entry point\n")
        (home / "scheduler.yaml").write_text(
            f"claude:\n  retry_backoff: 0.01\n{claude}notify:\n  token: hunter2\n")
        (home / ".env").write_text("API_TOKEN=hunter2\n")
        (home / "notes.txt").write_text("notes\n")
        script = home / "scripts" / "job.sh"
        script.write_text(BROKEN)
        script.chmod(0o755)
        (home / "tasks" / "job.md").write_text(TASK.format(extra=extra))
        (home / "tasks" / "other.md").write_text(
            '---\nid: other\nschedule: "@daily"\ncommand: "true"\n---\n')
        config, _ = load_config(home)
        with Store(config.db_path) as store:
            store.observe([("job", True, str(home / "tasks" / "job.md"))], NOW)
        return config, home, outside

    return make


def load(config: Config, name: str = "job"):
    task, problems = load_task_file(config.tasks_dir / f"{name}.md", config)
    assert task is not None, problems
    return task


def heal(config: Config, environ: dict, task, *, attempt: int = 1, previous=None,
         healer: ClaudeHealer | None = None, deadline: float = 60):
    with Store(config.db_path) as store:
        healer = healer or ClaudeHealer(config, environ, store, at(NOW))
        return healer.heal(task, attempt=attempt, failure=FAILURE, previous=previous,
                           deadline=time.monotonic() + deadline, run_id=7)


def audit(config: Config) -> list[dict]:
    path = config.logs_dir / "self-heal-audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()]


def tree(*roots: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file (and the target of every symlink) under the roots."""
    out = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            rel_folder = Path(folder).relative_to(root)
            if rel_folder.parts and rel_folder.parts[0] in skip:
                continue
            for name in files + [d for d in dirs if os.path.islink(Path(folder, d))]:
                path = Path(folder, name)
                key = f"{root.name}/{rel_folder / name}"
                if path.is_symlink():
                    out[key] = "-> " + os.readlink(path)
                else:
                    out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_heal_fixes_a_broken_script(setup, fake_claude):
    config, home, _ = setup()
    script = home / "scripts" / "job.sh"
    fake_claude.tools(tool_use("read_file", path="scripts/job.sh"))
    fake_claude.tools(tool_use("replace_in_file", path="scripts/job.sh", old="ech hello",
                               new="echo hello"))
    fake_claude.tools(tool_use("finish", diagnosis="Typo: `ech` instead of `echo`."))
    record = heal(config, fake_claude.environ, load(config))

    assert record.outcome == "changed", record
    assert record.diagnosis == "Typo: `ech` instead of `echo`."
    assert "-ech hello\n+echo hello\n" in record.diff and "a/scripts/job.sh" in record.diff
    assert record.changed == (script.resolve(),)
    assert script.read_text() == "#!/bin/sh\nset -e\necho hello\n"
    assert os.access(script, os.X_OK)  # the mode survives the atomic replace
    assert (record.backup_dir / "scripts" / "job.sh").read_text() == BROKEN
    assert record.backup_dir.parent == home / "logs" / "heal-backups" / "job"
    prompt = fake_claude.requests[0]["messages"][0]["content"]
    assert "exit 127" in prompt and "ech: not found" in prompt and "scripts/job.sh" in prompt
    assert [t["name"] for t in fake_claude.requests[0]["tools"]] == [
        "read_file", "list_dir", "replace_in_file", "write_file", "finish"]
    first = fake_claude.tool_results(1)[0]
    assert first["is_error"] is False and first["content"] == BROKEN
    (line,) = audit(config)
    assert line["outcome"] == "changed" and line["task"] == "job" and line["attempt"] == 1
    assert line["diff"] == record.diff and line["changed"] == ["scripts/job.sh"]
    assert line["input_tokens"] == 33 and line["output_tokens"] == 21 and line["refused"] == []
    with Store(config.db_path) as store:
        (row,) = heal_history(store, "job")
    assert (row["outcome"], row["diff"], row["run_id"]) == ("changed", record.diff, 7)
    assert row["backup_dir"] == str(record.backup_dir)

    with Store(config.db_path) as store:
        restored = revert_heal(config, store, "job", now=NOW + 60)
        assert restored == [script.resolve()]
        assert script.read_bytes() == BROKEN.encode()
        assert heal_history(store, "job")[0]["outcome"] == "reverted"
        with pytest.raises(RevertError, match="no applied heal"):
            revert_heal(config, store, "job", now=NOW + 120)
    assert audit(config)[-1]["event"] == "revert"


def test_second_heal_sees_the_first(setup, fake_claude):
    config, _, _ = setup()
    fake_claude.tools(tool_use("finish", diagnosis="looked; nothing to change"))
    first = heal(config, fake_claude.environ, load(config))
    assert first.outcome == "no_change" and first.backup_dir is None
    fake_claude.text("Still nothing I can fix: the network is down.")
    second = heal(config, fake_claude.environ, load(config), attempt=2, previous=first)
    assert second.outcome == "no_change"
    assert second.diagnosis == "Still nothing I can fix: the network is down."
    prompt = fake_claude.requests[1]["messages"][0]["content"]
    assert "heal attempt 2" in prompt and "looked; nothing to change" in prompt
    assert "The previous heal in this chain:\n- it was healing: exit 127\n" in prompt
    first_prompt = fake_claude.requests[0]["messages"][0]["content"]
    # the first heal's prompt says nothing about a previous heal (no "(none)" lines)
    assert "previous heal" not in first_prompt.lower() and "(none" not in first_prompt
    assert "</task-file>\n\nTools:" in first_prompt


def test_a_home_without_prompts_heals_with_the_shipped_template(setup, fake_claude):
    config, home, _ = setup()
    (home / "prompts" / "self-heal.txt").unlink()
    (home / "prompts").rmdir()
    fake_claude.tools(tool_use("finish", diagnosis="nothing to change"))
    assert heal(config, fake_claude.environ, load(config)).outcome == "no_change"
    assert "You are the self-heal assistant" in str(fake_claude.requests[0])


def test_revert_refuses_to_overwrite_later_edits(setup, fake_claude):
    config, home, _ = setup()
    fake_claude.tools(tool_use("write_file", path="scripts/job.sh", content="#!/bin/sh\necho\n"))
    fake_claude.tools(tool_use("finish", diagnosis="rewrote it"))
    assert heal(config, fake_claude.environ, load(config)).outcome == "changed"
    (home / "scripts" / "job.sh").write_text("#!/bin/sh\necho mine\n")
    with Store(config.db_path) as store:
        with pytest.raises(RevertError, match="changed since heal"):
            revert_heal(config, store, "job", now=NOW + 120)
        revert_heal(config, store, "job", now=NOW + 180, force=True)
    assert (home / "scripts" / "job.sh").read_text() == BROKEN


def test_protected_keys_and_invalid_edits_are_refused(setup, fake_claude):
    config, home, _ = setup()
    task_file = home / "tasks" / "job.md"
    before = task_file.read_bytes()
    fake_claude.tools(
        tool_use("replace_in_file", path="tasks/job.md", old="self_heal: true",
                 new="self_heal: false"),
        tool_use("replace_in_file", path="tasks/job.md", old="id: job", new="id: job2"),
        tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60",
                 new="timeout: 60\nenabled: false"),
        tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60",
                 new="timeout: 60\nsecrets: [ANTHROPIC_API_KEY]"),
        tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60", new="timeout: soon"),
        tool_use("write_file", path=str(task_file), content="no frontmatter\n"),
        tool_use("replace_in_file", path="tasks/job.md", old="ti", new="x"),
    )
    fake_claude.tools(tool_use("finish", diagnosis="tried"))
    record = heal(config, fake_claude.environ, load(config))

    assert task_file.read_bytes() == before
    assert record.outcome == "no_change", record.diagnosis
    results = fake_claude.tool_results(1)
    assert [r["is_error"] for r in results] == [True] * 7
    reasons = [r["content"] for r in results]
    assert "self_heal may not be changed" in reasons[0]
    assert "id may not be changed" in reasons[1]
    assert "enabled may not be changed" in reasons[2]
    assert "secrets may not be changed" in reasons[3]
    assert "would not validate" in reasons[4] and "timeout" in reasons[4]
    assert "would not validate" in reasons[5]
    assert "occurs 2 times" in reasons[6]
    assert [r["reason"] for r in audit(config)[0]["refused"]] == reasons


def test_allowed_task_file_edit_and_rollback_of_an_unfinished_heal(setup, fake_claude):
    config, home, _ = setup(claude="  max_tool_calls: 3\n")
    task_file = home / "tasks" / "job.md"
    before = task_file.read_bytes()
    fake_claude.tools(tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60",
                               new="timeout: 120"))
    fake_claude.tools(tool_use("write_file", path="scripts/job.sh", content="#!/bin/sh\n"))
    fake_claude.tools(tool_use("read_file", path="notes.txt"))
    fake_claude.tools(tool_use("read_file", path="notes.txt"))  # ignores the forced finish
    record = heal(config, fake_claude.environ, load(config))

    assert record.outcome == "error" and "past the limit of 3" in record.diagnosis
    assert "rolled back" in record.diagnosis
    assert task_file.read_bytes() == before
    assert (home / "scripts" / "job.sh").read_text() == BROKEN
    assert fake_claude.requests[3]["tool_choice"] == {"type": "tool", "name": "finish"}
    assert fake_claude.tool_results(1)[0]["is_error"] is False  # the timeout edit was allowed


def test_api_failure_mid_heal_rolls_back(setup, fake_claude):
    config, home, _ = setup()
    fake_claude.tools(tool_use("write_file", path="scripts/job.sh", content="#!/bin/sh\n"))
    fake_claude.error(400, kind="invalid_request_error", text="bad request")
    record = heal(config, fake_claude.environ, load(config))
    assert record.outcome == "error" and "400" in record.diagnosis
    assert (home / "scripts" / "job.sh").read_text() == BROKEN
    assert audit(config)[0]["outcome"] == "error"


def test_adversarial_model_changes_nothing_outside_the_allowed_files(setup, fake_claude):
    globs = '["scripts/*", "mdcron/*", "scheduler.*", "prompts/*", "state/*", "logs/*", ' \
            '"tasks/*", ".env", "linkdir/*"]'
    config, home, outside = setup(extra=f"heal_paths: {globs}\n", claude="  max_tool_calls: 40\n")
    (home / "scripts" / "link.sh").symlink_to(outside / "target.sh")
    (home / "linkdir").symlink_to(outside)
    (home / "scripts" / "dangling.sh").symlink_to(outside / "new.sh")
    before = tree(home, outside, skip=("state", "logs"))
    bad_writes = [
        tool_use("write_file", path="../outside/pwned.txt", content="x"),
        tool_use("write_file", path=str(outside / "pwned.txt"), content="x"),
        tool_use("write_file", path="scripts/link.sh", content="x"),
        tool_use("replace_in_file", path="scripts/link.sh", old="outside", new="pwned"),
        tool_use("write_file", path="scripts/dangling.sh", content="x"),
        tool_use("write_file", path="linkdir/target.sh", content="x"),
        tool_use("write_file", path="scripts/../../outside/x", content="x"),
        tool_use("write_file", path="mdcron/fake.py", content="x"),
        tool_use("write_file", path="scheduler.py", content="x"),
        tool_use("write_file", path="scheduler.yaml", content="x"),
        tool_use("write_file", path=str(home / "scheduler.yaml"), content="x"),
        tool_use("write_file", path="prompts/self-heal.txt", content="x"),
        tool_use("write_file", path="state/mdcron.db", content="x"),
        tool_use("write_file", path="logs/self-heal-audit.log", content="x"),
        tool_use("write_file", path="tasks/other.md", content="x"),
        tool_use("write_file", path=".env", content="x"),
        tool_use("write_file", path=str(PACKAGE_DIR / "heal.py"), content="x"),
        tool_use("write_file", path="notes.txt", content="x"),
        tool_use("write_file", path="", content="x"),
        tool_use("delete_file", path="scripts/job.sh"),
        tool_use("read_file", path="scheduler.yaml"),
        tool_use("read_file", path="state/mdcron.db"),
        tool_use("read_file", path=".env"),
        tool_use("read_file", path="../outside/secret.txt"),
        tool_use("read_file", path="linkdir/secret.txt"),
        tool_use("list_dir", path="/"),
    ]
    fake_claude.tools(*bad_writes)
    fake_claude.tools(tool_use("write_file", path="scripts/big.sh", content="x" * 10_000_000))
    hundred = [tool_use("read_file", path="scripts/job.sh") for _ in range(100)]
    fake_claude.tools(*hundred)
    fake_claude.tools(tool_use("finish", diagnosis="done"))
    record = heal(config, fake_claude.environ, load(config))

    assert tree(home, outside, skip=("state", "logs")) == before
    assert not (home / "logs" / "heal-backups").exists()
    assert record.outcome == "no_change", record.diagnosis
    first = fake_claude.tool_results(1)
    assert len(first) == len(bad_writes) and all(r["is_error"] for r in first), [
        r["content"] for r in first if not r["is_error"]]
    reasons = [r["content"] for r in first]
    assert "outside the home" in reasons[0] and "outside the home" in reasons[1]
    assert "symlink" in reasons[2] and "symlink" in reasons[5]
    assert "never changed by self-heal" in reasons[7]
    assert "another task's file" in reasons[14]
    assert "may write only" in reasons[17]
    assert "unknown tool" in reasons[19]
    assert "hunter2" not in json.dumps(fake_claude.requests)
    assert "s3cret" not in json.dumps(fake_claude.requests)
    (big,) = fake_claude.tool_results(2)
    assert big["is_error"] and "exceed" in big["content"]
    echoed = fake_claude.requests[2]["messages"][3]["content"][0]["input"]["content"]
    assert "omitted by mdcron" in echoed  # the 10 MB input is not sent back
    hundred_results = fake_claude.tool_results(3)
    allowed = 40 - len(bad_writes) - 1
    assert [r["is_error"] for r in hundred_results] == [False] * allowed + [True] * (
        100 - allowed)
    assert "limit of 40 tool calls" in hundred_results[-1]["content"]
    assert fake_claude.requests[3]["tool_choice"] == {"type": "tool", "name": "finish"}
    line = audit(config)[0]
    assert len(line["refused"]) == sum(r["is_error"] for r in fake_claude.all_tool_results())
    assert line["tool_calls"] == len(bad_writes) + 1 + 100 + 1


def test_guard_also_refuses_the_real_scheduler_layout(setup):
    config, home, _ = setup(extra='heal_paths: ["**"]\n')
    repo_config = Config(home=REPO)
    task = load(config)
    sandbox = Sandbox(repo_config, task, REPO / "logs" / "unused", 1000)
    for path in ("mdcron/selfheal/healer.py", "scheduler.py", "prompts/self-heal.txt", "logs/x",
                 "state/mdcron.db", ".git/config", ".venv/bin/python"):
        with pytest.raises(Refused):
            sandbox.check_write(path)
    inside = Sandbox(config, task, home / "logs" / "unused", 1000)
    assert inside.check_write("notes.txt") == (home / "notes.txt").resolve()
    with pytest.raises(Refused):
        inside.check_write(str(PACKAGE_DIR / "heal.py"))
    assert glob_regex("scripts/**/*.sh").match("scripts/a/b/c.sh")
    assert glob_regex("scripts/**/*.sh").match("scripts/c.sh")
    assert not glob_regex("scripts/*.sh").match("scripts/a/c.sh")


def test_symlink_to_an_allowed_file_inside_the_home_is_followed(setup, fake_claude):
    config, home, _ = setup()
    (home / "alias.sh").symlink_to(home / "scripts" / "job.sh")
    fake_claude.tools(tool_use("replace_in_file", path="alias.sh", old="ech ", new="echo "))
    fake_claude.tools(tool_use("finish", diagnosis="fixed through the alias"))
    record = heal(config, fake_claude.environ, load(config))
    assert record.outcome == "changed"
    assert (home / "alias.sh").is_symlink()
    assert "echo hello" in (home / "scripts" / "job.sh").read_text()


def test_budgets(setup, fake_claude):
    config, home, _ = setup(claude="  max_heals_per_day: 3\n")
    (home / "scheduler.yaml").write_text(
        "max_heals_per_tick: 2\nclaude:\n  retry_backoff: 0.01\n  max_heals_per_day: 3\n")
    config, _ = load_config(home)
    task = load(config)
    with Store(config.db_path) as store:
        healer = ClaudeHealer(config, fake_claude.environ, store, at(NOW))
        for _ in range(2):
            fake_claude.tools(tool_use("finish", diagnosis="nothing"))
            assert heal(config, {}, task, healer=healer).outcome == "no_change"
        assert "max_heals_per_tick: 2" in healer.unavailable_reason(task)
        refused = heal(config, {}, task, healer=healer)
        assert refused.outcome == "refused" and len(fake_claude.requests) == 2

        next_tick = ClaudeHealer(config, fake_claude.environ, store, at(NOW + 60))
        assert next_tick.unavailable_reason(task) is None
        fake_claude.tools(tool_use("finish", diagnosis="nothing"))
        heal(config, {}, task, healer=next_tick)
        later = ClaudeHealer(config, fake_claude.environ, store, at(NOW + 120))
        assert "healed 3 time(s) in the last 24 h" in later.unavailable_reason(task)
        tomorrow = ClaudeHealer(config, fake_claude.environ, store, at(NOW + 86400 + 1))
        assert tomorrow.unavailable_reason(task) is None
    assert [line["outcome"] for line in audit(config)] == ["no_change"] * 2 + ["refused",
                                                                                "no_change"]


def test_unavailable_reasons(setup, fake_claude):
    config, home, _ = setup(extra="")
    task = load(config)
    with Store(config.db_path) as store:
        assert "ANTHROPIC_API_KEY" in ClaudeHealer(config, {}, store, at(NOW)).unavailable_reason(
            task)
        healer = ClaudeHealer(config, fake_claude.environ, store, at(NOW))
        assert healer.unavailable_reason(task) is None
        from mdcron.core.records import replace

        assert "self_heal: false" in healer.unavailable_reason(replace(task, self_heal=False))
        template = home / "prompts" / "self-heal.txt"
        template.write_text("Fix $task_id, $nonsense")
        assert "self-heal.txt: unknown placeholder $nonsense" in healer.unavailable_reason(task)
        assert "delete it to use the shipped default" in healer.unavailable_reason(task)
        record = healer.heal(task, attempt=1, failure=FAILURE, previous=None,
                             deadline=time.monotonic() + 5, run_id=1)
        assert record.outcome == "refused" and "self-heal.txt" in record.diagnosis
        template.unlink()  # no prompts/ of the home's own: the shipped default is used
        assert healer.unavailable_reason(task) is None
    assert fake_claude.requests == []


def test_deadline_bounds_a_heal(setup, fake_claude):
    config, _, _ = setup()

    def slow(body: dict) -> Reply:
        time.sleep(60)  # far past the deadline: only the deadline can end the heal in time
        return Reply(body=message([tool_use("finish", diagnosis="late")], stop_reason="tool_use"))

    fake_claude.dynamic(slow)
    start = time.monotonic()
    record = heal(config, fake_claude.environ, load(config), deadline=1.2)
    assert record.outcome == "error" and time.monotonic() - start < 30


def test_the_healer_reads_the_ticks_clock(setup, fake_claude):
    # A replayed tick (`tick --now`, years before the wall clock) counts its heals and audits
    # them at its own instant: the healer keeps no clock of its own.
    config, _, _ = setup()
    fake_claude.tools(tool_use("finish", diagnosis="nothing"))
    heal(config, fake_claude.environ, load(config))
    [line] = audit(config)
    assert line["time"].startswith(to_dt(NOW).isoformat(timespec="seconds")[:16])
    with Store(config.db_path) as store:
        [(created,)] = store.connect().execute("SELECT created_at FROM heals")
    assert NOW <= created < NOW + 60


def test_self_heal_may_not_change_who_the_task_runs_as(setup, fake_claude):  # issue 21
    config, home, _ = setup()
    task_file = home / "tasks" / "job.md"
    before = task_file.read_bytes()
    fake_claude.tools(
        tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60",
                 new="timeout: 60\nuser: root"),
        tool_use("replace_in_file", path="tasks/job.md", old="timeout: 60",
                 new="timeout: 60\ngroup: root"),
    )
    fake_claude.tools(tool_use("finish", diagnosis="tried"))
    heal(config, fake_claude.environ, load(config))
    assert task_file.read_bytes() == before
    reasons = [r["content"] for r in fake_claude.tool_results(1)]
    assert "user may not be changed" in reasons[0] and "group may not be" in reasons[1], reasons
