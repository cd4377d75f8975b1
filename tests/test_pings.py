"""Issue 26 item 4: `ping_url` in the healthchecks.io convention, against real HTTP servers on
127.0.0.1 (tests/http_sink.py), one of which never answers: the tick still ends on time."""

from __future__ import annotations

import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_cli

from mdcron.core.clock import Clock
from mdcron.core.outcome import Outcome, RunResult
from mdcron.run import pings
from mdcron.run.tick import run_tick
from mdcron.settings.config import Config, load_config
from mdcron.tasks.taskfile import parse_task_text

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
SECRET = "s3cr3t-token-value-42"


def tick(home: Path, lines: list[str] | None = None, **env: str):
    config, _ = load_config(home)
    say = lines.append if lines is not None else (lambda _l: None)
    return run_tick(config, Clock(T0), say=say, environ={"PATH": "/usr/bin:/bin", **env})


def seen(sink) -> list[tuple[str, str]]:
    with sink.lock:
        return [(r.method, r.path) for r in sink.requests]


@pytest.fixture
def silent_server():
    """Accepts connections (the kernel's backlog) and never answers a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_start_then_success_with_the_output_and_secrets_masked(home, write_task, http_sink):
    (home / "scheduler.yaml").write_text('secret_env: ["*_TOKEN"]\n')
    write_task("backup", command="echo hello; echo token=$API_TOKEN", secrets=["API_TOKEN"],
               ping_url=http_sink.url("/ping/abc-123"), schedule="0 9 * * *")
    report = tick(home, API_TOKEN=SECRET)
    assert report.results[0][2].ok
    assert seen(http_sink) == [("GET", "/ping/abc-123/start"), ("POST", "/ping/abc-123")]
    body = http_sink.requests[1].body.decode()
    assert "hello" in body and "token=[masked]" in body and SECRET not in body


def test_a_failure_pings_its_exit_code_once_after_the_whole_ladder(home, write_task, http_sink):
    write_task("flaky", command="echo broken >&2; exit 3", retry=True,
               ping_url=http_sink.url("/p"), schedule="0 9 * * *")
    tick(home)
    assert seen(http_sink) == [("GET", "/p/start"), ("POST", "/p/3")]
    assert b"broken" in http_sink.requests[1].body


def test_a_timeout_pings_fail(home, write_task, http_sink):
    write_task("slow", command="sleep 30", timeout=1, ping_url=http_sink.url("/p?rid=1"),
               schedule="0 9 * * *")
    tick(home)
    assert seen(http_sink) == [("GET", "/p/start?rid=1"), ("POST", "/p/fail?rid=1")]


def test_only_the_last_10_kib_of_output_is_sent(home, write_task, http_sink):
    script = f"{sys.executable} -c \"print('x' * 50000); print('THE END')\""
    write_task("loud", command=script, ping_url=http_sink.url("/p"), schedule="0 9 * * *")
    tick(home)
    body = http_sink.requests[-1].body
    assert len(body) <= pings.BODY_BYTES and body.rstrip().endswith(b"THE END")


def test_an_endpoint_that_never_answers_never_holds_the_tick(home, write_task, http_sink,
                                                             silent_server):
    write_task("quiet", command="true", ping_url=silent_server + "/never",
               schedule="0 9 * * *")
    write_task("other", command="true", ping_url=http_sink.url("/ok"), schedule="0 9 * * *")
    lines: list[str] = []
    began = time.monotonic()
    report = tick(home, lines)
    took = time.monotonic() - began
    assert all(r.ok for _, _, r in report.results)
    # the end ping waits for its /start within its own deadline, so both end by then
    assert took < pings.DEADLINE + 15, took  # slack for a loaded machine; never: for ever
    assert any("quiet: ping http://127.0.0.1:" in x and "no answer within 5 s" in x
               for x in lines), lines
    assert not any("/never" in x for x in lines)  # the URL's path (its key) is never shown
    assert seen(http_sink) == [("GET", "/ok/start"), ("POST", "/ok")]


def test_run_waits_for_its_end_ping_before_exiting(home, write_task, http_sink):
    write_task("manual", command="echo by hand", ping_url=http_sink.url("/m"))
    result = run_cli(home, "run", "manual")
    assert result.returncode == 0, result.stderr
    assert seen(http_sink) == [("GET", "/m/start"), ("POST", "/m")]


@pytest.mark.parametrize(("value", "words"), [
    ("ftp://example.com/x", "only http:// and https://"),
    ("hc-ping.com/abc", "only http:// and https://"),
    ('"https://hc-ping.com/${UUID}"', "not expanded"),
    ('"https://exa mple.com/"', "no spaces"),
])
def test_a_bad_ping_url_names_the_file_line_and_fix(value, words):
    text = f"---\nid: t\nschedule: '* * * * *'\ncommand: 'true'\nping_url: {value}\n---\n"
    task, problems = parse_task_text(text, Path("/tmp/tasks/t.md"), Config(home=Path("/tmp")))
    assert task is None
    assert problems[0].line == 5 and problems[0].key == "ping_url"
    assert words in problems[0].message, problems[0].message


@pytest.mark.parametrize(("result", "url"), [
    (None, "https://hc-ping.com/u/start"),
    (RunResult(Outcome.SUCCESS, exit_code=0), "https://hc-ping.com/u"),
    (RunResult(Outcome.FAILED, exit_code=2), "https://hc-ping.com/u/2"),
    (RunResult(Outcome.FAILED, exit_code=None, fail_reason="killed by SIGKILL"),
     "https://hc-ping.com/u/fail"),
    (RunResult(Outcome.TIMEOUT), "https://hc-ping.com/u/fail"),
])
def test_the_ping_target_follows_healthchecks(result, url):
    assert pings.target("https://hc-ping.com/u", result) == url


def test_a_slow_endpoint_is_given_up_at_the_deadline(home, write_task, http_sink):
    http_sink.delay = 30.0  # reads the request, then answers 30 s later
    write_task("slowping", command="true", ping_url=http_sink.url("/slow"),
               schedule="0 9 * * *")
    lines: list[str] = []
    began = time.monotonic()
    tick(home, lines)
    assert time.monotonic() - began < pings.DEADLINE + 15  # not the sink's 30 s
    assert any("slowping: ping http://127.0.0.1:" in x and "no answer within 5 s" in x
               for x in lines), lines
