"""Comments read by Claude before a run, through the real SDK against the fake API."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fake_anthropic
import pytest
from conftest import REPO
from fake_anthropic import tool_use

from mdcron.claude.comments import add_comment, check_comments, thread, unread
from mdcron.settings.config import Config, load_config
from mdcron.state.store import state_store
from mdcron.tasks.taskfile import load_task_file

fake_claude = fake_anthropic.fake_claude  # the fixture

NOW = 1_790_000_000.0
TASK = """---
id: report
schedule: "0 6 * * *"   # weekday mornings, quoted
command: ./report.sh --all
timeout: 5m
tags: [reports]
---

Builds the weekly report.
"""


@pytest.fixture
def env(home: Path, state_url: str | None):  # both back ends (issue 11)
    shutil.copy2(REPO / "prompts" / "check-comments.txt", _prompts(home) / "check-comments.txt")
    (home / "scheduler.yaml").write_text("claude:\n  retry_backoff: 0.01\n  max_retries: 1\n"
                                         + (f"state_url: '{state_url}'\n" if state_url else ""))
    (home / "tasks" / "report.md").write_text(TASK)
    config, _ = load_config(home)
    store = state_store(config)
    yield config, store
    store.close()


def _prompts(home: Path) -> Path:
    (home / "prompts").mkdir(exist_ok=True)
    return home / "prompts"


def task_of(config: Config):
    task, problems = load_task_file(config.tasks_dir / "report.md", config)
    assert task is not None, problems
    return task


def decide(fake, **inputs: object) -> None:
    fake.tools(tool_use("decide", **inputs))


def audit(config: Config) -> list[dict]:
    return [json.loads(x) for x in (config.logs_dir / "comments-audit.log").read_text()
            .splitlines()]


def test_thread_and_run(env, fake_claude):
    config, store = env
    first = add_comment(store, "report", "ann", "Looks fine, thanks.", NOW - 60)
    add_comment(store, "report", "bob", "Agreed.", NOW - 30)
    decide(fake_claude, action="run", reason="Nothing to change; running as usual.")
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)

    assert (decision.action, decision.reason) == ("run", "Nothing to change; running as usual.")
    sent = fake_claude.requests[0]
    assert sent["tool_choice"] == {"type": "tool", "name": "decide"}
    assert [t["name"] for t in sent["tools"]] == ["decide"]
    prompt = sent["messages"][0]["content"]
    assert "ann: Looks fine, thanks." in prompt and "bob: Agreed." in prompt
    assert "./report.sh --all" in prompt
    rows = thread(store, "report")
    assert [r["id"] for r in rows][0] == first
    assert all(r["read_at"] == NOW and r["action"] == "run" for r in rows)
    assert rows[0]["reply"] == "Nothing to change; running as usual."
    assert unread(store, "report") == []
    (line,) = audit(config)
    assert line["action"] == "run" and line["comments"] == [r["id"] for r in rows]
    assert line["input_tokens"] == 11
    # nothing unread: no call at all
    assert check_comments(task_of(config), config, fake_claude.environ, store, NOW).action == "run"
    assert len(fake_claude.requests) == 1


def test_skip(env, fake_claude):
    config, store = env
    before = (config.tasks_dir / "report.md").read_bytes()
    add_comment(store, "report", "ann", "Skip today please, the server is down", NOW)
    decide(fake_claude, action="skip", reason="Skipping this run as asked.")
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "skip"
    assert (config.tasks_dir / "report.md").read_bytes() == before
    assert thread(store, "report")[0]["action"] == "skip"


def test_pause_edits_only_enabled_and_reason(env, fake_claude):
    config, store = env
    add_comment(store, "report", "ann", "Stop this until I'm back.", NOW)
    decide(fake_claude, action="pause", reason="Paused until someone enables it.")
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "pause"
    text = (config.tasks_dir / "report.md").read_text()
    assert text == TASK.replace("tags: [reports]\n",
                                "tags: [reports]\nenabled: false\ndisabled_reason: paused\n")
    task = task_of(config)
    assert task.enabled is False and task.disabled_reason == "paused"


def test_update_is_applied_byte_preserving(env, fake_claude):
    config, store = env
    add_comment(store, "report", "ann", "Run it at 7:30 and tag it weekly too.", NOW)
    updates = {"schedule": "30 7 * * 1-5", "tags": ["reports", "weekly"], "retry": True}
    decide(fake_claude, action="update", reason="Moved to 07:30 on weekdays.", updates=updates)
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "update" and decision.applied_updates == updates
    text = (config.tasks_dir / "report.md").read_text()
    assert 'schedule: 30 7 * * 1-5   # weekday mornings, quoted\n' in text or \
        'schedule: "30 7 * * 1-5"   # weekday mornings, quoted\n' in text
    assert "tags: [reports, weekly]\n" in text and "retry: true\n" in text
    assert text.endswith("---\n\nBuilds the weekly report.\n")
    task = task_of(config)
    assert (task.schedule, task.tags, task.retry) == ("30 7 * * 1-5", ("reports", "weekly"), True)
    assert audit(config)[0]["applied_updates"] == updates


@pytest.mark.parametrize(
    ("inputs", "why"),
    [
        ({"action": "update", "reason": "r", "updates": {"schedule": "61 * * * *"}},
         "would not validate"),
        ({"action": "update", "reason": "r", "updates": {"command": "rm -rf ~"}},
         "command may not be changed"),
        ({"action": "update", "reason": "r", "updates": {"enabled": False}},
         "enabled may not be changed"),
        ({"action": "update", "reason": "r", "updates": {"timeout": "forever"}},
         "would not validate"),
        ({"action": "update", "reason": "r"}, "needs the keys"),
        ({"action": "delete", "reason": "r"}, "unknown action 'delete'"),
        ({"reason": "r"}, "unknown action None"),
    ],
)
def test_refused_decisions_run_unchanged(env, fake_claude, inputs, why):
    config, store = env
    before = (config.tasks_dir / "report.md").read_bytes()
    add_comment(store, "report", "mallory", "Do something odd.", NOW)
    fake_claude.tools(tool_use("decide", **inputs))
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "run" and decision.applied_updates == {}
    assert decision.reason.startswith("refused: ") and why in decision.reason
    assert (config.tasks_dir / "report.md").read_bytes() == before
    (row,) = thread(store, "report")
    assert row["read_at"] == NOW and row["reply"] == decision.reason and row["action"] == "run"
    assert why in audit(config)[0]["refused"]


def test_a_model_that_does_not_decide_is_refused(env, fake_claude):
    config, store = env
    add_comment(store, "report", "ann", "Hello?", NOW)
    fake_claude.text("I would rather chat.")
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "run" and "did not call the decide tool" in decision.reason
    assert unread(store, "report") == []


def test_no_key_leaves_comments_unread(env, fake_claude):
    config, store = env
    add_comment(store, "report", "ann", "Pause it.", NOW)
    environ = {"ANTHROPIC_BASE_URL": fake_claude.base_url}
    decision = check_comments(task_of(config), config, environ, store, NOW)
    assert decision.action == "run"
    assert decision.reason == "comments left unread: no ANTHROPIC_API_KEY in the scheduler's " \
        "environment"
    assert len(unread(store, "report")) == 1 and fake_claude.requests == []


def test_api_errors_leave_comments_unread(env, fake_claude):
    config, store = env
    add_comment(store, "report", "ann", "Pause it.", NOW)
    fake_claude.error(500)
    fake_claude.error(529, kind="overloaded_error")
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "run" and "comments left unread" in decision.reason
    assert "529" in decision.reason
    assert len(unread(store, "report")) == 1
    assert not (config.logs_dir / "comments-audit.log").exists()


def test_broken_template_leaves_comments_unread(env, fake_claude):
    config, store = env
    (config.prompts_dir / "check-comments.txt").write_text("Read $comments for $whom")
    add_comment(store, "report", "ann", "Pause it.", NOW)
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert "check-comments.txt: unknown placeholder $whom" in decision.reason
    assert len(unread(store, "report")) == 1
    assert fake_claude.requests == []


def test_a_home_without_prompts_uses_the_shipped_template(env, fake_claude):
    config, store = env
    (config.prompts_dir / "check-comments.txt").unlink()
    add_comment(store, "report", "ann", "Skip today please.", NOW)
    fake_claude.tools(tool_use("decide", action="skip", reason="as asked"))
    decision = check_comments(task_of(config), config, fake_claude.environ, store, NOW)
    assert decision.action == "skip"
    assert "Skip today please." in str(fake_claude.requests[0])
