"""environment.py: what a task's process sees, checked in a real subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mdcron.core.records import replace
from mdcron.run.environment import bypasses_claude_isolation, task_environment
from mdcron.run.process import CommandSpec, run_command
from mdcron.tasks.task import Task

SECRETS = ("ANTHROPIC_API_KEY", "*_TOKEN", "PUSHOVER_KEY")
BASE = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/home/someone",
    "LANG": "C.UTF-8",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "GITHUB_TOKEN": "ghp-secret",
    "SLACK_TOKEN": "xoxb-secret",
    "PUSHOVER_KEY": "po-secret",
    "TOKEN_STORE": "not a secret: the glob is *_TOKEN",
    "MDCRON_RUN_ID": "from the scheduler's own environment",
}


def make_task(tmp_path: Path, **fields) -> Task:
    return Task(id="backup", path=tmp_path / "backup.md", schedule="@daily", title="Backup",
                command="env", **fields)


def env_seen_by_child(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    spec = CommandSpec(argv=["/usr/bin/env", "-0"], cwd=tmp_path, env=env, timeout=10)
    result = run_command(spec, log_path=tmp_path / "env.log", max_log_bytes=1 << 20,
                         tail_bytes=4096)
    assert result.ok, result.fail_reason
    pairs = (item.split("=", 1) for item in result.log_path.read_text().split("\0") if item)
    return dict(pairs)


def test_secrets_are_removed_unless_asked_for_and_run_facts_are_set(tmp_path):
    task = make_task(
        tmp_path,
        secrets=("GITHUB_TOKEN",),
        env={"X": "${ANTHROPIC_API_KEY}", "MDCRON_TASK_ID": "spoofed", "MDCRON_ATTEMPT": "9",
             "LANG": "de_DE.UTF-8"},
        notify_to="ops@example.com",
    )
    env = task_environment(BASE, task, secret_names=SECRETS, run_id=42, attempt=2,
                           claude_config_dir=tmp_path / "claude")
    seen = env_seen_by_child(tmp_path, env)
    assert seen == env
    for name in ("ANTHROPIC_API_KEY", "SLACK_TOKEN", "PUSHOVER_KEY"):
        assert name not in seen
    assert "sk-ant-secret" not in "".join(seen.values())
    assert seen["GITHUB_TOKEN"] == "ghp-secret"  # asked for by name
    assert seen["TOKEN_STORE"] == BASE["TOKEN_STORE"]
    assert seen["X"] == "${ANTHROPIC_API_KEY}"  # literal: no expansion
    assert seen["LANG"] == "de_DE.UTF-8"
    assert seen["HOME"] == "/home/someone"
    assert seen["MDCRON_TASK_ID"] == "backup"
    assert seen["MDCRON_RUN_ID"] == "42"
    assert seen["MDCRON_ATTEMPT"] == "2"
    assert seen["MDCRON_NOTIFY_DEST"] == "ops@example.com"
    assert seen["CLAUDE_CONFIG_DIR"] == str(tmp_path / "claude")


def test_the_anthropic_key_is_secret_even_if_the_caller_forgets(tmp_path):
    env = task_environment(BASE, make_task(tmp_path), secret_names=(), run_id=1, attempt=1,
                           claude_config_dir=tmp_path)
    assert "ANTHROPIC_API_KEY" not in env
    assert env["SLACK_TOKEN"] == "xoxb-secret"  # not configured as secret here
    assert env["MDCRON_NOTIFY_DEST"] == ""


def test_a_task_may_ask_for_the_anthropic_key_and_set_its_claude_folder(tmp_path):
    task = make_task(tmp_path, secrets=("ANTHROPIC_API_KEY",), claude_config="/srv/claude-cfg")
    env = task_environment(BASE, task, secret_names=SECRETS, run_id=1, attempt=1,
                           claude_config_dir=tmp_path / "claude")
    seen = env_seen_by_child(tmp_path, env)
    assert seen["ANTHROPIC_API_KEY"] == "sk-ant-secret"
    assert seen["CLAUDE_CONFIG_DIR"] == "/srv/claude-cfg"
    assert "GITHUB_TOKEN" not in seen


def test_the_base_mapping_is_not_changed(tmp_path):
    base = dict(BASE)
    task = replace(make_task(tmp_path), env={"NEW": "1"})
    task_environment(base, task, secret_names=SECRETS, run_id=1, attempt=1,
                     claude_config_dir=tmp_path)
    assert base == BASE


@pytest.mark.parametrize(
    ("command", "word"),
    [
        ("sudo -u deploy claude -p 'summarise'", "sudo"),
        ("cd /srv && sudo /usr/local/bin/claude -p hi | tee out", "sudo"),
        ("nohup doas claude -p hi", "doas"),
        ("su - deploy -c 'claude -p hi'", "su"),
        ("ssh build@host claude -p 'hi'", "ssh"),
        ("ssh host 'cd repo && claude -p hi'", "ssh"),
        ("env -i PATH=/usr/bin claude -p hi", "env -i"),
        ("env --ignore-environment claude", "env -i"),
        ("env -u CLAUDE_CONFIG_DIR claude", "env -i"),
        ("env CLAUDE_CONFIG_DIR=/root/.claude claude", "env -i"),
        ("sh -c 'claude -p hi > out.txt'", "sh -c"),
        ("bash -lc \"cd repo && claude -p 'fix it'\"", "bash -c"),
        ("echo start; bash -c 'sudo claude -p x'", "sudo"),
    ],
)
def test_commands_that_escape_the_claude_config_dir_are_flagged(command, word):
    warning = bypasses_claude_isolation(command)
    assert warning is not None
    assert warning.startswith(f"`{word} ")


@pytest.mark.parametrize(
    "command",
    [
        "claude -p 'summarise the logs'",
        "env FOO=1 claude -p hi",
        "sudo apt-get update && claude -p hi",
        "ssh host uptime; claude -p 'report'",
        "sh -c 'make test'",
        "sudo ls ~/.claude/projects",
        "echo 'sudo claude' > notes.txt",
        "sudo systemctl restart claude-proxy",
        "bash ./run-claude.sh  # sudo claude",
        "claude -p \"unbalanced",
    ],
)
def test_ordinary_commands_are_not_flagged(command):
    assert bypasses_claude_isolation(command) is None


def test_runs_of_tasks_without_secrets_share_one_filtering_and_see_a_changed_environment(
        tmp_path):
    """Issue 27: the environment minus the secrets is worked out once for a tick's runs; each
    run still gets its own dict, and a changed environment (or secret list) is filtered anew."""
    task = make_task(tmp_path)
    first = task_environment(BASE, task, secret_names=SECRETS, run_id=1, attempt=1,
                             claude_config_dir=tmp_path)
    second = task_environment(BASE, task, secret_names=SECRETS, run_id=2, attempt=1,
                              claude_config_dir=tmp_path)
    assert first is not second and first["MDCRON_RUN_ID"] == "1"
    assert second["MDCRON_RUN_ID"] == "2"
    assert "GITHUB_TOKEN" not in first and first["TOKEN_STORE"] == BASE["TOKEN_STORE"]
    changed = {**BASE, "NEW_TOKEN": "new-secret", "PLAIN": "yes"}
    env = task_environment(changed, task, secret_names=SECRETS, run_id=3, attempt=1,
                           claude_config_dir=tmp_path)
    assert "NEW_TOKEN" not in env and env["PLAIN"] == "yes"
    env = task_environment(BASE, task, secret_names=(*SECRETS, "LANG"), run_id=4, attempt=1,
                           claude_config_dir=tmp_path)
    assert "LANG" not in env


def test_is_secret_matches_as_fnmatchcase_does():
    """Issue 27: names without a glob are compared, not compiled; the answer is fnmatchcase's
    for every name and pattern, specials and regex metacharacters included."""
    import random
    from fnmatch import fnmatchcase

    from mdcron.settings.config import ALWAYS_SECRET, is_secret

    rnd = random.Random(27)
    alphabet = "AB_*?[]!-.\\+()^$"
    for _ in range(3000):
        names = tuple("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 4)))
                      for _ in range(rnd.randint(0, 3)))
        name = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 4)))
        want = any(fnmatchcase(name, p) for p in (*ALWAYS_SECRET, *names))
        assert is_secret(name, names) is want, (name, names)
