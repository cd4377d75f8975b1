"""run_as: claude through the real SDK against the fake API: output, tokens, failures, retries."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import fake_anthropic
import pytest
from conftest import REPO

from mdcron.claude.client import (
    DEFAULT_MODEL,
    ClaudeConfig,
    TemplateError,
    last_line_error,
    parse_claude_config,
    render_template,
    run_claude_task,
)
from mdcron.core.outcome import Outcome
from mdcron.settings.config import Config
from mdcron.tasks.task import Task

fake_claude = fake_anthropic.fake_claude  # the fixture


@pytest.fixture
def config(home: Path) -> Config:
    return Config(home=home.resolve(), claude=ClaudeConfig(retry_backoff=0.01, max_retries=3))


def claude_task(home: Path, **kw: object) -> Task:
    fields: dict = {"id": "ask", "path": home / "tasks" / "ask.md", "schedule": "@daily",
                    "title": "ask", "run_as": "claude", "body": "Say hello.", "timeout": 60.0}
    fields.update(kw)
    return Task(**fields)


def run(task: Task, config: Config, environ: dict, tmp: Path):
    log = tmp / "logs" / "runs" / task.id / "1.log"
    return run_claude_task(task, config, environ, log_path=log,
                           deadline=time.monotonic() + 30), log


def test_reply_is_the_output_and_tokens_are_recorded(fake_claude, config, home):
    fake_claude.text("Hello there.\nAll good.", input_tokens=12, output_tokens=5)
    result, log = run(claude_task(home, prompt="Be brief."), config, fake_claude.environ, home)
    assert result.outcome is Outcome.SUCCESS, result.fail_reason
    assert result.output_tail.startswith("Hello there.\nAll good.")
    assert log.read_text() == "Hello there.\nAll good.\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert result.extra["input_tokens"] == 12 and result.extra["output_tokens"] == 5
    assert result.extra["model"] == DEFAULT_MODEL
    sent = fake_claude.requests[0]
    assert sent["messages"] == [{"role": "user", "content": "Be brief."}]  # prompt over body
    assert sent["model"] == DEFAULT_MODEL and sent["max_tokens"] == 4096
    assert "test-key" in fake_claude.headers[0].get("authorization", "") + \
        fake_claude.headers[0].get("x-api-key", "")


def test_body_is_the_prompt_and_the_task_model_wins(fake_claude, config, home):
    fake_claude.text("ok")
    result, _ = run(claude_task(home, model="claude-haiku-4-5"), config, fake_claude.environ, home)
    assert result.ok
    assert fake_claude.requests[0]["messages"][0]["content"] == "Say hello."
    assert fake_claude.requests[0]["model"] == "claude-haiku-4-5"
    assert result.extra["model"] == "claude-haiku-4-5"


def test_output_tail_keeps_the_last_bytes(fake_claude, config, home):
    fake_claude.text("x" * 10000 + "END")
    result, log = run(claude_task(home), config, fake_claude.environ, home)
    assert len(result.output_tail.encode()) <= 4096 and result.output_tail.endswith("END\n")
    assert log.stat().st_size == 10004


def test_empty_reply_fails(fake_claude, config, home):
    fake_claude.text("")
    result, log = run(claude_task(home), config, fake_claude.environ, home)
    assert result.outcome is Outcome.FAILED
    assert "empty reply" in result.fail_reason
    assert "empty reply" in log.read_text()


def test_json_error_envelope_fails(fake_claude, config, home):
    fake_claude.text('Checked the feed.\n{"status": "error", "error": "feed is down"}\n\n')
    result, _ = run(claude_task(home), config, fake_claude.environ, home)
    assert result.outcome is Outcome.FAILED and result.fail_reason == "feed is down"
    assert result.extra["output_tokens"] == 7


def test_envelope_rules():
    assert last_line_error('{"status": "error", "message": "m"}') == "m"
    assert last_line_error('{"status": "ok"}') is None
    assert last_line_error('{"status": "error"}\nlater text') is None
    assert last_line_error("") is None


def test_rate_limit_then_success(fake_claude, config, home):
    fake_claude.error(429, kind="rate_limit_error", headers={"retry-after": "0"})
    fake_claude.error(529, kind="overloaded_error")
    fake_claude.disconnect()
    fake_claude.text("made it")
    result, _ = run(claude_task(home), config, fake_claude.environ, home)
    assert result.ok, result.fail_reason
    assert len(fake_claude.requests) == 4
    assert result.extra["input_tokens"] == 11  # only the answered call counts


def test_server_errors_until_retries_run_out(fake_claude, config, home):
    for _ in range(4):
        fake_claude.error(500, text="boom")
    fake_claude.text("too late")
    result, _ = run(claude_task(home), config, fake_claude.environ, home)
    assert result.outcome is Outcome.FAILED
    assert "500" in result.fail_reason and "boom" in result.fail_reason
    assert "gave up after 4 tries" in result.fail_reason
    assert len(fake_claude.requests) == 4


def test_permanent_errors_are_not_retried(fake_claude, config, home):
    fake_claude.error(401, kind="authentication_error", text="invalid x-api-key")
    result, _ = run(claude_task(home), config, fake_claude.environ, home)
    assert result.outcome is Outcome.FAILED and "ANTHROPIC_API_KEY" in result.fail_reason
    assert len(fake_claude.requests) == 1


def test_a_long_retry_after_is_not_waited_for(fake_claude, config, home):
    fake_claude.error(429, kind="rate_limit_error", headers={"retry-after": "3600"})
    start = time.monotonic()
    result, _ = run(claude_task(home), config, fake_claude.environ, home)
    assert result.outcome is Outcome.FAILED and "too long" in result.fail_reason
    assert time.monotonic() - start < 60  # not the hour asked for (a loaded machine: seconds)


def test_no_key_is_a_clear_failure(fake_claude, config, home):
    environ = {"ANTHROPIC_BASE_URL": fake_claude.base_url, "ANTHROPIC_API_KEY": "  "}
    result, log = run(claude_task(home), config, environ, home)
    assert result.outcome is Outcome.FAILED
    assert "set ANTHROPIC_API_KEY" in result.fail_reason
    assert fake_claude.requests == []
    assert "ANTHROPIC_API_KEY" in log.read_text()


def test_config_defaults_and_problems(tmp_path):
    cfg, problems = parse_claude_config({}, None)
    assert cfg == ClaudeConfig() and problems == []
    assert (cfg.model, cfg.max_tokens, cfg.timeout, cfg.max_retries) == (DEFAULT_MODEL, 4096,
                                                                         120.0, 3)
    assert (cfg.max_heals_per_tick, cfg.max_heals_per_day) == (3, 4)
    raw = {"claude": {"model": "claude-opus-4-8", "timeout": "2m", "max_retries": 0,
                      "max_tokens": -1, "modle": "x"}, "max_heals_per_tick": 1}
    cfg, problems = parse_claude_config(raw, tmp_path / "scheduler.yaml")
    assert (cfg.model, cfg.timeout, cfg.max_retries, cfg.max_tokens) == ("claude-opus-4-8",
                                                                         120.0, 0, 4096)
    assert cfg.max_heals_per_tick == 1
    errors = [p for p in problems if p.severity == "error"]
    warnings = [p for p in problems if p.severity == "warning"]
    assert [p.key for p in errors] == ["claude.max_tokens"]
    assert "did you mean 'model'" in warnings[0].message
    _, problems = parse_claude_config({"claude": "yes"}, None)
    assert problems[0].key == "claude"


def test_templates_fail_clearly(home, config):
    with pytest.raises(TemplateError, match="nothing.txt is missing"):
        render_template(config, "nothing.txt", {})
    (home / "prompts").mkdir()
    (home / "prompts" / "t.txt").write_text("Hi $name, $bogus")
    with pytest.raises(TemplateError, match=r"t\.txt: unknown placeholder \$bogus"):
        render_template(config, "t.txt", {"name": "x"})
    (home / "prompts" / "t.txt").write_text("costs $ 5")
    with pytest.raises(TemplateError, match=r"t\.txt.*\$\$"):
        render_template(config, "t.txt", {})
    (home / "prompts" / "t.txt").write_text("Hi $name, $$5")
    assert render_template(config, "t.txt", {"name": "Ann"}) == "Hi Ann, $5"


def test_shipped_templates_render(config):
    shipped = Config(home=REPO)
    from mdcron.claude.comments import TEMPLATE as COMMENTS
    from mdcron.selfheal.healer import _PLACEHOLDERS, TEMPLATE

    assert "$" not in render_template(shipped, TEMPLATE, {k: "" for k in _PLACEHOLDERS})
    values = dict.fromkeys(("task_id", "task_file", "task_text", "comments", "now"), "")
    assert "decide" in render_template(shipped, COMMENTS, values)


def test_importing_the_claude_modules_does_not_load_the_sdk():
    probe = ("import sys, json; import mdcron.claude.client, mdcron.selfheal.healer, "
             "mdcron.selfheal.tools, mdcron.claude.comments; "
             "print(json.dumps('anthropic' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) is False
