"""Why a failure was not healed is said where a person looks: `history`, `show` and the alert.
And a home of one's own (no prompts/ folder) still heals with the shipped prompt. All through
the real CLI, with the fake Messages API and a real HTTP endpoint for alerts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from fake_anthropic import tool_use

BEFORE, AT = "2026-11-23T09:59:00+00:00", "2026-11-23T10:00:00+00:00"


def make_home(home: Path, sink, claude: str = "", self_heal: bool = True) -> None:
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{sink.json_url('/hook')}\"\n  default: ops\n"
        f"claude:\n  retry_backoff: 0.01\n{claude}")
    (home / "scripts").mkdir()
    script = home / "scripts" / "job.sh"
    script.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    script.chmod(0o755)
    (home / "tasks" / "job.md").write_text(
        "---\nid: job\nschedule: \"0 10 * * *\"\nrun_as: script\ncommand: scripts/job.sh\n"
        f"self_heal: {'true' if self_heal else 'false'}\n---\n")


def tick_twice(home: Path, env: dict[str, str]) -> None:
    run_cli(home, "tick", "--now", BEFORE, env=env)
    run_cli(home, "tick", "--now", AT, env=env)


def test_an_own_home_without_prompts_heals(tmp_path, http_sink, fake_claude):
    home = tmp_path / "jobs"  # like --home ~/jobs: tasks/ and nothing of mdcron's
    (home / "tasks").mkdir(parents=True)
    make_home(home, http_sink)
    fake_claude.tools(tool_use("finish", diagnosis="the network is down; nothing to change"))
    fake_claude.tools(tool_use("finish", diagnosis="still nothing to change"))
    tick_twice(home, fake_claude.environ)
    assert fake_claude.requests, "the heal never reached the API"
    assert "You are the self-heal assistant" in str(fake_claude.requests[0])
    history = json.loads(run_cli(home, "history", "--json").stdout)
    assert "heal" in [h["kind"] for h in history]
    doctor = run_cli(home, "doctor", env=fake_claude.environ).stdout
    assert "self-heal.txt (shipped default)" in doctor


CASES = {
    "budget": ("  max_heals_per_day: 0\n", True, True,
               "self-heal not attempted: job was healed 0 time(s) in the last 24 h"),
    "broken override": ("", True, True, "unknown placeholder $oops"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unhealed_failure_says_why(home, http_sink, fake_claude, case):
    claude, self_heal, with_key, said = CASES[case]
    make_home(home, http_sink, claude, self_heal)
    if case == "broken override":
        (home / "prompts").mkdir()
        (home / "prompts" / "self-heal.txt").write_text("Heal $task_id: $oops\n")
    env = fake_claude.environ if with_key else {}
    tick_twice(home, env)
    assert fake_claude.requests == []
    history = run_cli(home, "history").stdout
    show = run_cli(home, "show", "job").stdout
    [row] = json.loads(run_cli(home, "history", "--json").stdout)
    assert row["error"] == "exit 3" and said in row["note"]
    for text in (history, show):
        assert "self-heal not attempted" in " ".join(text.split()), text
    [alert] = http_sink.bodies()
    assert said in alert["message"]
    if case == "broken override":
        validate = run_cli(home, "validate")
        assert validate.returncode == 1 and "unknown placeholder $oops" in validate.stderr
        doctor = run_cli(home, "doctor", env=env).stdout
        assert "unknown placeholder $oops" in doctor and "the home’s own" in doctor


@pytest.mark.parametrize("with_key", [True, False])
def test_comments_left_unread_say_why(home, write_task, fake_claude, with_key):
    write_task("report", schedule="0 10 * * *", command="echo fine")
    (home / "prompts").mkdir()
    (home / "prompts" / "check-comments.txt").write_text("Comments: $comments $nope\n")
    env = fake_claude.environ if with_key else {}
    run_cli(home, "tick", "--now", BEFORE, env=env)
    run_cli(home, "comment", "report", "Skip today please.", env=env)
    run_cli(home, "tick", "--now", AT, env=env)
    [row] = json.loads(run_cli(home, "history", "--json").stdout)
    said = "unknown placeholder $nope" if with_key else "no ANTHROPIC_API_KEY"
    assert row["status"] == "success" and "comments left unread: " in row["note"]
    assert said in row["note"]
    assert "comments left unread" in " ".join(run_cli(home, "show", "report").stdout.split())


@pytest.mark.parametrize("with_key,self_heal", [(False, True), (True, False), (False, False)])
def test_no_heal_note_where_self_heal_is_not_set_up(home, http_sink, fake_claude, with_key,
                                                   self_heal):
    """Issue 25: without a key (or with self_heal: false) a failure row does not repeat "set
    it to enable self-heal"; `doctor` says it once, and `show` of a self_heal task."""
    make_home(home, http_sink, "", self_heal)
    env = fake_claude.environ if with_key else {}
    tick_twice(home, env)
    [row] = json.loads(run_cli(home, "history", "--json").stdout)
    assert row["error"] == "exit 3" and row["note"] is None
    assert "self-heal" not in run_cli(home, "history").stdout
    [alert] = http_sink.bodies()
    assert "self-heal not attempted" not in alert["message"]
    show = " ".join(run_cli(home, "show", "job", env=env).stdout.split())
    assert ("self-heal off: ANTHROPIC_API_KEY is not set" in show) == (self_heal and not with_key)
    if not with_key:
        doctor = " ".join(run_cli(home, "doctor").stdout.split())
        assert doctor.count("no self-heal") == 1
