"""Issue 24, items 1 and 3: the dashboard's login (a one-time code, then a session cookie named
after the port), the token for scripts only, and the smaller security fixes, over HTTP against
the real `scheduler.py web`; the session book's expiry rules with an injected clock."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from conftest import SCHEDULER, run_cli
from test_web_browser import browser  # noqa: F401 (a fixture: Chromium, or a skip)
from web_server import start_web

from mdcron.web.sessions import CODE_TTL, IDLE, MAX_AGE, Sessions


@pytest.fixture
def server(home):
    s = start_web(home)
    yield s
    s.stop()


@contextmanager
def logged_in(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base, timeout=30) as c:
        server.login(c)
        yield c


def csrf_of(client: httpx.Client, path: str = "/") -> str:
    return client.get(path).text.split('name="csrf" value="', 1)[1].split('"', 1)[0]


# ------------------------------------------------------------------ item 1: login and sessions


def test_the_printed_link_has_a_one_time_code_and_never_the_token(home, server):
    printed = "".join(server.output)
    assert server.token not in printed and "/login?code=" in printed
    assert "Bearer" in printed and str(home / "state" / "web-token") in printed
    with httpx.Client(base_url=server.base) as c:
        r = c.get(f"/login?code={server.code}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"
        name = f"mdcron_session_{server.port}"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(name + "=")
        assert server.token not in cookie
        low = cookie.lower()
        assert "httponly" in low and "samesite=strict" in low and "path=/" in low
        assert c.get("/").status_code == 200
    with httpx.Client(base_url=server.base) as other:  # the code is spent
        r = other.get(f"/login?code={server.code}", follow_redirects=False)
        assert r.status_code == 401 and "used already or has expired" in r.text
        assert "set-cookie" not in r.headers
        assert other.get("/").status_code == 401


def test_the_token_is_for_scripts_and_the_login_form_only(home, server):
    with httpx.Client(base_url=server.base) as c:
        # a token in a cookie (the old scheme) or in the address opens nothing
        c.cookies.set("mdcron_token", server.token)
        c.cookies.set(f"mdcron_session_{server.port}", server.token)
        assert c.get("/").status_code == 401
        c.cookies.clear()
        r = c.get(f"/history?token={server.token}", follow_redirects=False)
        assert r.status_code == 400 and "set-cookie" not in r.headers
        assert "login link" in r.text
        assert c.get("/api/tasks", headers=server.bearer()).status_code == 200
        r = c.post("/login", data={"token": "wrong"}, headers={"Origin": server.base})
        assert r.status_code == 401 and "set-cookie" not in r.headers
        r = c.post("/login", data={"token": server.token}, headers={"Origin": server.base},
                   follow_redirects=False)
        assert r.status_code == 303 and server.token not in r.headers["set-cookie"]
        assert c.get("/").status_code == 200
        r = c.post("/login", data={"token": server.token},
                   headers={"Origin": "http://evil.example"})
        assert r.status_code == 403


def test_no_open_redirect(home, server):
    """`//evil.example/x?token=T` once answered 303 to //evil.example/x: off-site."""
    for target in (f"//evil.example/x?token={server.token}", "//evil.example/x",
                   f"/login?code={server.code}&next=//evil.example/"):
        answer = raw(server, b"GET " + target.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1")
        head = answer.split(b"\r\n\r\n", 1)[0].lower()
        assert b"location: //" not in head and b"evil.example" not in head, (target, head)
        assert b"set-cookie: mdcron_token" not in head


def test_two_dashboards_on_one_machine_keep_their_own_sessions(home, tmp_path, server):
    other_home = tmp_path / "other"
    (other_home / "tasks").mkdir(parents=True)
    other = start_web(other_home)
    try:
        with httpx.Client(timeout=30) as c:  # one browser: one cookie jar for 127.0.0.1
            for s in (server, other):
                r = c.get(f"{s.base}/login?code={s.code}", follow_redirects=False)
                assert r.status_code == 303
            names = {cookie.name for cookie in c.cookies.jar}
            assert names == {f"mdcron_session_{server.port}", f"mdcron_session_{other.port}"}
            assert c.get(f"{server.base}/").status_code == 200
            assert c.get(f"{other.base}/").status_code == 200
    finally:
        other.stop()


def test_sessions_are_listed_and_revoked_from_health(home, server):
    with logged_in(server) as a, httpx.Client(base_url=server.base, timeout=30) as b:
        r = b.post("/login", data={"token": server.token}, headers={"Origin": server.base})
        assert r.status_code == 303
        health = a.get("/health").text
        rows = health.split('data-session="')[1:]
        assert len(rows) == 2 and sum("(this one)" in r for r in rows) == 1
        b_label = next(r.split('"', 1)[0] for r in rows if "(this one)" not in r)
        r = a.post(f"/sessions/{b_label}/revoke", data={"csrf": csrf_of(a, "/health")},
                   headers={"Origin": server.base}, follow_redirects=False)
        assert r.status_code == 303
        assert b.get("/").status_code == 401 and a.get("/").status_code == 200
    done = run_cli(home, "audit").stdout
    assert "login" in done and "revoke-session" in done and f"session {b_label}" in done


def test_revoke_sessions_reaches_a_running_server_and_a_restart_ends_them(home):
    server = start_web(home)
    try:
        with logged_in(server) as c:
            assert c.get("/").status_code == 200
            out = run_cli(home, "web", "--revoke-sessions")
            assert out.returncode == 0 and "revoked" in out.stdout
            assert c.get("/").status_code == 401
            assert c.get("/api/tasks", headers=server.bearer()).status_code == 200  # scripts
    finally:
        server.stop()
    server = start_web(home)
    try:
        with logged_in(server) as c2:
            assert c2.get("/").status_code == 200
            cookie = dict(c2.cookies.items())
    finally:
        server.stop()
    server2 = start_web(home)
    try:  # a restart: the old session id (sent to the new port's name too) opens nothing
        with httpx.Client(base_url=server2.base) as c3:
            for value in cookie.values():
                c3.cookies.set(f"mdcron_session_{server2.port}", value)
            assert c3.get("/").status_code == 401
    finally:
        server2.stop()


def test_the_token_is_never_printed_when_stdout_is_not_a_terminal(home):
    """stdout is a pipe here (journald, docker logs): the banner has the code, not the token."""
    server = start_web(home)
    try:
        assert server.token not in "".join(server.output)
    finally:
        server.stop()


def test_session_expiry_idle_and_max_age(tmp_path):
    clock = [1000.0]
    book = Sessions(tmp_path / "marker", monotonic=lambda: clock[0], wall=lambda: 0.0)
    code = book.new_code()
    clock[0] += CODE_TTL + 1
    assert book.redeem(code, "127.0.0.1", "t") is None  # a code expires unused
    sid, session = book.redeem(book.new_code(), "127.0.0.1", "t")
    assert book.find(sid) is session
    clock[0] += IDLE - 60
    assert book.find(sid) is session  # used: its idle time starts again
    clock[0] += IDLE - 60
    assert book.find(sid) is session
    clock[0] += IDLE + 1
    assert book.find(sid) is None  # idle too long
    sid, _ = book.open("127.0.0.1", "t")
    for _ in range(int(MAX_AGE // (IDLE / 2)) + 1):
        clock[0] += IDLE / 2
        found = book.find(sid)
    assert found is None  # never longer than MAX_AGE, however busy
    assert book.find("") is None and book.find("é\udcff") is None


# ------------------------------------------------------------------ item 3: smaller fixes


def test_origin_must_match_scheme_host_and_port(home, write_task, server):
    write_task("a", command="true")
    with logged_in(server) as c:
        token = csrf_of(c)
        for origin in (f"http://127.0.0.1:{server.port + 1}", f"https://127.0.0.1:{server.port}",
                       "http://127.0.0.1", "null"):
            r = c.post("/tasks/a/disable", data={"csrf": token}, headers={"Origin": origin})
            assert r.status_code == 403, origin
        r = c.post("/tasks/a/disable", data={"csrf": token},
                   headers={"Referer": f"http://127.0.0.1:{server.port + 1}/tasks/a"})
        assert r.status_code == 403
        assert b"enabled: false" not in (home / "tasks" / "a.md").read_bytes()
        r = c.post("/tasks/a/disable", data={"csrf": token}, headers={"Origin": server.base},
                   follow_redirects=False)
        assert r.status_code == 303


def raw(server, head: bytes) -> bytes:
    """A request as given (httpx would refuse non-ASCII header bytes and tidy `//` paths)."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(head + b"\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def raw_get(server, header: bytes) -> bytes:
    return raw(server, b"GET /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header)


def test_non_ascii_credentials_are_refused_not_crashed(home, write_task, server):
    write_task("a", command="true")
    name = f"mdcron_session_{server.port}".encode()
    for header in (b"Cookie: " + name + "=é\u20ac".encode(),
                   b"Cookie: " + name + b"=\xff\xfe",
                   b"Authorization: Bearer " + "tökén".encode(),
                   b"Authorization: Bearer \xff"):
        answer = raw_get(server, header)
        status = int(answer.split(b" ", 2)[1])
        assert status in (400, 401), answer[:300]
        assert b"Traceback" not in answer
        assert b"content-security-policy" in answer.lower(), answer[:400]
    with logged_in(server) as c:
        r = c.post("/tasks/a/disable", headers={"Origin": server.base,
                                                "X-CSRF-Token": "é€".encode()})
        assert r.status_code == 403 and "content-security-policy" in r.headers
        r = c.post("/tasks/a/disable", data={"csrf": "ünïcode"},
                   headers={"Origin": server.base})
        assert r.status_code == 403 and "content-security-policy" in r.headers
    assert not any("Traceback" in line for line in server.output)


def _token_file_refused(home, path) -> subprocess.CompletedProcess:
    return run_cli(home, "web", "--port", "1", "--token-file", str(path), timeout=30)


def test_a_token_file_others_can_read_or_a_weak_token_is_refused(home, tmp_path):
    path = tmp_path / "token"
    path.write_text("x" * 43 + "\n")
    path.chmod(0o644)
    out = _token_file_refused(home, path)
    assert out.returncode == 2 and "chmod 600" in out.stderr and "Traceback" not in out.stderr
    path.chmod(0o600)
    path.write_text("short\n")
    out = _token_file_refused(home, path)
    assert out.returncode == 2 and "32 to 256" in out.stderr
    path.write_text("a b c d " * 8)
    assert _token_file_refused(home, path).returncode == 2
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    out = _token_file_refused(home, fifo)
    assert out.returncode == 2 and "not a regular file" in out.stderr
    if os.geteuid() == 0:  # a file owned by someone else (root can make one)
        path.write_text("y" * 43 + "\n")
        os.chown(path, 65534, 65534)
        out = _token_file_refused(home, path)
        assert out.returncode == 2 and "belongs to uid 65534" in out.stderr
    # a good one is used as it is, and a missing one is created 0600
    good = tmp_path / "good"
    good.write_text("z" * 43 + "\n")
    good.chmod(0o600)
    server = start_web(home, token_file=good)
    try:
        assert server.token == "z" * 43
        assert httpx.get(f"{server.base}/api/tasks", headers=server.bearer()).status_code == 200
    finally:
        server.stop()
    fresh = tmp_path / "fresh"
    server = start_web(home, token_file=fresh)
    server.stop()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600 and len(server.token) == 43


def test_run_now_replayed_starts_one_run(home, write_task, server):
    # the run lasts until every replay was answered (a fixed 3 s: a loaded machine's 100
    # requests could outlast it, and a replay after its end rightly starts a second run)
    done = home / "replays-answered"
    write_task("slow", command=f"while [ ! -e {done} ]; do sleep 0.05; done", timeout=300)
    with logged_in(server) as c:
        try:
            token = csrf_of(c)
            codes: list[int] = []

            def fire() -> None:
                with httpx.Client(base_url=server.base, timeout=60, cookies=c.cookies) as one:
                    for _ in range(10):
                        codes.append(one.post("/tasks/slow/run", data={"csrf": token},
                                              headers={"Origin": server.base},
                                              follow_redirects=False).status_code)

            threads = [threading.Thread(target=fire) for _ in range(10)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(codes) == 100 and codes.count(303) == 1, sorted(set(codes))
            assert set(codes) == {303, 409}
            r = c.post("/api/tasks/slow/run", headers=server.bearer())
            assert r.status_code == 409 and "running" in r.json()["error"]
        finally:
            done.touch()  # the run ends
    deadline = time.monotonic() + 60
    while '"status": "success"' not in (out := run_cli(home, "history", "--json").stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.2)
    assert out.count('"task_id": "slow"') == 1


def test_comment_author_is_the_session_account_not_a_form_field(home, write_task, server):
    import pwd

    write_task("a", command="true")
    with logged_in(server) as c:
        r = c.post("/tasks/a/comment", data={"csrf": csrf_of(c), "text": "hello",
                                              "author": "the-boss"},
                   headers={"Origin": server.base}, follow_redirects=False)
        assert r.status_code == 303
    comments = run_cli(home, "comments", "a").stdout
    assert "the-boss" not in comments
    assert pwd.getpwuid(os.geteuid()).pw_name + ": hello" in comments


def test_web_help_names_the_new_option():
    out = subprocess.run([sys.executable, str(SCHEDULER), "web", "--help"],
                         capture_output=True, text=True)
    assert "--revoke-sessions" in out.stdout


def test_login_link_in_a_real_browser(home, write_task, browser):  # noqa: F811
    """Chromium: the link logs in once; the cookie is the session's, HttpOnly and Strict, named
    after the port; a second browser gets the login form, and the token pasted there works."""
    write_task("a", command="true")
    server = start_web(home)
    try:
        first = browser.new_context()
        page = first.new_page()
        page.goto(server.login_url)
        page.locator('tr[data-task="a"]').wait_for()
        assert page.url.rstrip("/") == server.base  # the code left the address bar
        cookies = first.cookies()
        assert [c["name"] for c in cookies] == [f"mdcron_session_{server.port}"]
        assert cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict"
        assert cookies[0]["value"] != server.token
        assert page.evaluate("document.cookie") == ""  # no script can read it
        second = browser.new_context().new_page()
        second.goto(server.login_url)
        second.get_by_text("used already or has expired").wait_for()
        second.locator("input[name=token]").fill(server.token)
        second.get_by_role("button", name="log in").click()
        second.locator('tr[data-task="a"]').wait_for()
    finally:
        server.stop()
