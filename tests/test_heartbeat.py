"""heartbeat.ping: a plain http(s) URL goes over a socket directly, anything else via urllib."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mdcron.alerts.heartbeat import ping, plain_url, with_fail
from mdcron.core.envref import SCHEME
from mdcron.core.urlscheme import scheme_of
from tests.http_sink import HttpSink, http_sink_fixture  # noqa: F401

REPO = Path(__file__).resolve().parent.parent


def test_with_fail_appends_to_the_path_only():
    assert with_fail("http://h") == "http://h/fail"
    assert with_fail("http://h/") == "http://h/fail"
    assert with_fail("http://h:8/a/b/") == "http://h:8/a/b/fail"
    assert with_fail("https://h/p?x=1#f") == "https://h/p/fail?x=1#f"
    assert with_fail("https://h?x=/y") == "https://h/fail?x=/y"


def test_direct_ping_reaches_the_sink_with_query_and_fail(http_sink: HttpSink):
    env = {"TOKEN": "s3cr3t-token-value"}
    assert ping(http_sink.url("/ping/${TOKEN}?rid=7"), False, env) is None
    assert ping(http_sink.url("/ping/${TOKEN}"), True, env) is None
    got = [(r.method, r.path, r.headers.get("User-Agent"), r.headers.get("Host"))
           for r in http_sink.requests]
    host = f"127.0.0.1:{http_sink.port}"
    assert got == [("GET", "/ping/s3cr3t-token-value?rid=7", "mdcron", host),
                   ("GET", "/ping/s3cr3t-token-value/fail", "mdcron", host)]


def test_direct_ping_reports_status_and_refusal_masked(http_sink: HttpSink):
    env = {"TOKEN": "s3cr3t-token-value"}
    http_sink.fail_next(1, 503)
    assert ping(http_sink.url("/${TOKEN}"), False, env) == "heartbeat (http://…): HTTP 503"
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    error = ping(f"http://127.0.0.1:{port}/${{TOKEN}}", False, env)
    assert error and error.startswith("heartbeat (http://…): ") and "refused" in error.lower()
    assert "s3cr3t" not in error


def test_a_proxy_in_the_environment_goes_through_urllib(http_sink: HttpSink):
    # the sink plays the proxy: urllib sends it the absolute URL; a direct GET would not
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from mdcron.alerts.heartbeat import ping;"
         " print(ping('http://heartbeat.invalid/ping', False, {}))"],
        cwd=REPO, capture_output=True, text=True, timeout=30,
        env={"http_proxy": http_sink.url(), "no_proxy": "", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "None", out.stderr
    assert http_sink.requests[-1].path == "http://heartbeat.invalid/ping"


def test_plain_url_takes_only_what_the_direct_get_can():
    assert plain_url("http://h.example:8080/p/x?a=1&b=%20#f") == (
        "http", "h.example", "8080", "/p/x?a=1&b=%20#f")
    assert plain_url("https://hc-ping.com") == ("https", "hc-ping.com", None, "")
    assert plain_url("https://h?x=1") == ("https", "h", None, "?x=1")
    for other in ("ftp://h/", "http://user@h/", "http://[::1]:80/", "http://h:/", "http://h:1x/",
                  "http://h/a b", "http://h#f", "http:///p", "h/p", "http://h:123456/"):
        assert plain_url(other) is None, other


def test_scheme_of_agrees_with_the_scheme_pattern():
    for url in ("https://x/y", " tgram://a/b", "json://h", "a+b.c-d://x", "1abc://x", "://x",
                "no scheme", "", "ht tp://x", "é://x", "x:/y"):
        match = SCHEME.match(url.strip())
        assert scheme_of(url) == (f"{match.group(1)}://…" if match else "(not a URL)"), url


def test_a_plain_ping_imports_neither_urllib_request_nor_http_client(http_sink: HttpSink):
    code = ("import sys; from mdcron.alerts.heartbeat import ping;"
            f" assert ping({http_sink.url('/p')!r}, False, {{}}) is None;"
            " print(sorted(m for m in ('urllib.request', 'http.client', 'ssl', 're')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stderr
    assert [r.path for r in http_sink.requests] == ["/p"]
