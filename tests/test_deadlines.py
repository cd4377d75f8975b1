"""The deadline pieces in-process, against the trickling server (tests/trickle_server.py): each
gives up at its wall-clock deadline, not at a per-read timeout that a byte a second never trips.
The whole ticks are in tests/faults/test_fault_trickle.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mdcron.alerts.courier import Courier, CourierTimeout
from mdcron.alerts.heartbeat import DEADLINE, direct_get
from mdcron.claude.client import ClaudeError, ClaudeSession, ClaudeTimeout
from mdcron.settings.claude import ClaudeConfig
from tests.faults.faultlib import pid_alive, wait_until
from tests.http_sink import http_sink_fixture  # noqa: F401  (fixture `http_sink`)
from tests.trickle_server import TrickleServer, trickle_fixture  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parent.parent


def test_the_direct_ping_gives_up_at_its_deadline(trickle: TrickleServer):
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        direct_get("http", "127.0.0.1", str(trickle.port), "/ping",
                   deadline=time.monotonic() + 2.5)
    assert 2 <= time.monotonic() - start < 2.5 + 5


def test_the_courier_is_killed_at_its_deadline_and_the_next_message_gets_a_new_one(
        trickle: TrickleServer, http_sink):
    # a send's deadline counts from when it goes, the courier's start (an interpreter, then
    # apprise) included: a loaded machine spent the whole 2.5 s before the trickle was even
    # reached (no connection to hang up). Started and warmed by a first message, with time to
    # spare, the timed send is spent on the trickle alone.
    with Courier(timeout=60) as courier:
        assert courier.send(http_sink.json_url("/warm"), "warm", "body") is None
        first = courier._child.pid
        courier.timeout = 2.5
        start = time.monotonic()
        with pytest.raises(CourierTimeout):
            courier.send(trickle.json_url(), "title", "body")
        assert 2 <= time.monotonic() - start < 2.5 + 5
        wait_until(lambda: trickle.hung_up == trickle.connections == 1,
                   "the courier's connection closed", 30)
        courier.timeout = 60  # the new courier's start again, on a loaded machine
        assert courier.send(http_sink.json_url("/hook"), "next", "body") is None
        child = courier._child.pid
    assert child != first
    assert [r.json["title"] for r in http_sink.requests] == ["warm", "next"]
    wait_until(lambda: not pid_alive(child), "the courier ended with the flush", 30)


def test_a_claude_request_gives_up_at_claude_timeout_then_at_the_deadline(
        trickle: TrickleServer):
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": trickle.base_url}
    hi = [{"role": "user", "content": "hi"}]
    # claude.timeout comes first: a transient failure, the caller's deadline is far
    with ClaudeSession(ClaudeConfig(timeout=1.5, max_retries=0), env,
                       time.monotonic() + 60) as session:
        start = time.monotonic()
        with pytest.raises(ClaudeError, match="did not answer within 1.5 s") as caught:
            session.create(messages=hi)
        took = time.monotonic() - start
    assert not isinstance(caught.value, ClaudeTimeout)
    assert 1.4 <= took < 1.5 + 5  # generous: a loaded machine
    # the caller's deadline comes first: ClaudeTimeout, however many retries are allowed
    with ClaudeSession(ClaudeConfig(timeout=120, max_retries=3), env,
                       time.monotonic() + 60) as session:
        start = time.monotonic()
        session.deadline = start + 2
        with pytest.raises(ClaudeTimeout):
            session.create(messages=hi)
        took = time.monotonic() - start
    assert 1.4 <= took < 2 + 5
    wait_until(lambda: trickle.hung_up == trickle.connections == 2, "both requests hung up")


def test_the_urllib_ping_through_a_trickling_proxy_gives_up_at_the_deadline(
        trickle: TrickleServer):
    # a proxy in the environment sends the ping through urllib, whose reads are per-read timed
    code = ("import time; from mdcron.alerts.heartbeat import ping; start = time.monotonic();"
            " print(ping('http://heartbeat.invalid/ping', False, {}));"
            " print(round(time.monotonic() - start))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60, env={"http_proxy": trickle.url(), "no_proxy": "",
                                          "PATH": "/usr/bin:/bin"})
    said, took = out.stdout.split("\n")[:2]
    assert said == f"heartbeat (http://…): no answer within {DEADLINE:g} s", out.stderr
    assert DEADLINE - 1 <= int(took) <= DEADLINE + 10  # slack for a loaded machine
