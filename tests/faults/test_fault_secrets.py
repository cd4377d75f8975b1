"""Secrets in the scheduler's environment (the Anthropic key, notification tokens) never reach a
task that did not ask for them, and never appear in logs, the database, command output or
alerts, even when a destination fails and its error is printed."""

from __future__ import annotations

import shutil

from conftest import REPO
from fake_anthropic import tool_use
from faultlib import BEFORE, NOW, doctor, run_cli

SECRETS = {
    "TELEGRAM_BOT_TOKEN": "tg-7f3a9c1e5b2d4068",
    "HOOK_TOKEN": "hook-2b8e6d4f0a1c3957",
    "BAD_TOKEN": "bad-9d1f3b5e7a2c4860",
    "HB_TOKEN": "hb-4c6e8a0b2d1f3579",
    "GITHUB_TOKEN": "gh-1a3c5e7b9d2f4680",  # a secret by the config's secret_env glob
}


def test_secrets_reach_no_task_and_no_output(home, write_task, http_sink, fake_claude):
    secrets = {**SECRETS, "ANTHROPIC_API_KEY": "sk-ant-e5c7a9b1d3f20486"}
    env = {**fake_claude.environ, **secrets}  # the fake API takes any key
    shutil.copytree(REPO / "prompts", home / "prompts")
    (home / "scheduler.yaml").write_text(
        "secret_env: ['*_TOKEN']\n"
        f"heartbeat_url: \"http://127.0.0.1:9/ping/${{HB_TOKEN}}\"\n"
        "notify:\n  default: ops\n  destinations:\n"
        f"    ops: \"{http_sink.json_url('/hook/${HOOK_TOKEN}')}\"\n"
        "    bad: \"json://127.0.0.1:9/x/${BAD_TOKEN}\"\n"
        "    tg: \"tgram://${TELEGRAM_BOT_TOKEN}/12345\"\n"
        "claude:\n  retry_backoff: 0.01\n")
    dump = "env; cat /proc/self/environ | tr '\\0' '\\n'; echo \"key=$ANTHROPIC_API_KEY\""
    write_task("dump", schedule="0 10 * * *", command=f"{dump}; exit 1", notify_on="always",
               env={"LITERAL": "${ANTHROPIC_API_KEY}"})
    write_task("dumpbad", schedule="0 10 * * *", command=f"{dump}; exit 3", notify_to="bad",
               self_heal=False)
    write_task("dumptg", schedule="0 10 * * *", command=f"{dump}; exit 4", notify_to="tg",
               self_heal=False)
    write_task("ok", schedule="0 10 * * *", command=dump, notify_on="always")
    for _ in range(4):
        fake_claude.tools(tool_use("finish", diagnosis="nothing to change"))
    run_cli(home, "tick", "--now", BEFORE, env=env)
    outputs = [run_cli(home, "tick", "--now", NOW, env=env)]
    for command in (["list"], ["list", "--json"], ["show", "dump"], ["show", "dump", "--json"],
                    ["history"], ["history", "--json"], ["logs", "dump"], ["logs", "ok"],
                    ["incidents", "--all"], ["validate"], ["validate", "--json"],
                    ["why", "dump"], ["next", "dump"]):
        outputs.append(run_cli(home, *command, env=env))
    outputs.append(doctor(home, env=env))
    said = "\n".join(o.stdout + o.stderr for o in outputs)
    assert "notification" in said  # the failing destinations were reported ...
    assert "json://…" in said or "tgram://…" in said  # ... by scheme only
    logs = list((home / "logs").rglob("*.log"))
    assert len(logs) >= 4
    first_log = min((home / "logs" / "runs" / "dump").iterdir()).read_text()
    assert "MDCRON_TASK_ID=dump" in first_log  # the dump did dump the environment
    assert "LITERAL=${ANTHROPIC_API_KEY}" in first_log and "key=\n" in first_log
    alerts = [r.body.decode(errors="replace") for r in http_sink.requests]
    assert len(alerts) >= 2
    api = [str(r) for r in fake_claude.requests]
    assert api  # the heal did talk to the (fake) API: what it sent is checked too
    files = [p for p in home.rglob("*") if p.is_file()]
    for name, value in secrets.items():
        assert value not in said, f"{name} printed by a command"
        assert all(value not in a for a in alerts), f"{name} in an alert"
        assert all(value not in request for request in api), f"{name} sent to the API"
        for path in files:
            assert value.encode() not in path.read_bytes(), f"{name} in {path}"


def test_a_literal_password_in_the_config_is_not_kept_in_the_state(home, write_task):
    """Issue 23 item 7a: the parse cache's key once held scheduler.yaml's whole text."""
    secret = "pw-literal-5e1c9a7b3d"
    (home / "scheduler.yaml").write_text(
        "notify:\n  default: ops\n  destinations:\n"
        f"    ops: \"json://mdcron:{secret}@127.0.0.1:9/hook\"\n")
    write_task("ok", schedule="0 10 * * *", command="echo fine")
    for now in (BEFORE, NOW):
        assert run_cli(home, "tick", "--now", now).returncode in (0, 1)
    state = home / "state"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "mdcron.db" for p in files)
    assert not [p for p in files if secret.encode() in p.read_bytes()]
