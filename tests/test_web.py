"""Mission Control over HTTP: the real `scheduler.py web` (uvicorn) on 127.0.0.1, driven by
httpx; every page and action, and each security rule of issue 10."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import SCHEDULER, run_cli
from web_server import server_fixture, start_web  # noqa: F401  (the `server` fixture)

XSS = "<script>alert(1)</script>"


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.base, timeout=30) as c:
        server.login(c)
        yield c


def csrf_of(client: httpx.Client, path: str = "/") -> str:
    html = client.get(path).text
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def post(client: httpx.Client, server, path: str, **fields: str) -> httpx.Response:
    fields.setdefault("csrf", csrf_of(client))
    return client.post(path, data=fields, headers={"Origin": server.base},
                       follow_redirects=False)


def wait_for(check, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


# ------------------------------------------------------------------ pages in every state


def test_every_page_renders_and_escapes(home, write_task, cli, server, client):
    write_task("a", title=XSS, command="echo out-$((1+1))", tags=["ops"],
               body="# Notes\n<img src=x onerror=alert(2)>\n")
    (home / "tasks" / "broken.md").write_text("---\nid: broken\n---\n")
    assert cli("run", "a").returncode == 0
    cli("comment", "a", XSS)
    pages = ["/", "/?tag=ops", "/?status=success", "/tasks/a", "/runs/1", "/history",
             "/history?task=a&status=success&trigger=manual", "/incidents", "/upcoming",
             "/upcoming?days=7", "/health"]
    for page in pages:
        r = client.get(page)
        assert r.status_code == 200, (page, r.text)
        assert XSS not in r.text and "<img src=x" not in r.text, page
    home_page = client.get("/").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in home_page
    assert "broken" in home_page and "invalid" in home_page
    assert "out-2" in client.get("/runs/1").text  # the log, as text
    assert "&lt;img src=x" in client.get("/tasks/a").text  # Markdown with HTML escaped
    # one host (SQLite): every run is this machine's, so no host column and no Hosts table
    assert "<th>host</th>" not in client.get("/history").text
    assert "<h2>Hosts</h2>" not in client.get("/health").text
    r = client.get("/history?day=2026-13-99")
    assert r.status_code == 400 and "Traceback" not in r.text


def test_live_part_and_security_headers(home, write_task, client):
    write_task("a", command="true")
    r = client.get("/", headers={"X-Live": "1"})
    assert "<html" not in r.text and 'data-task="a"' in r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-frame-options"] == "DENY"
    assert client.get("/static/live.js").status_code == 200


def test_empty_duplicate_and_broken_config(home, write_task, cli, client):
    assert "no task files" in client.get("/").text
    write_task("same", command="true")
    write_task("same", command="true", filename="other.md")
    cli("tick")
    page = client.get("/").text
    assert "Duplicate id" in page and "open incident" in page
    (home / "scheduler.yaml").write_text("timezone: Not/AZone\n")
    r = client.get("/")
    assert r.status_code == 200 and "config cannot be used" in r.text
    assert client.get("/health").status_code == 200
    assert client.get("/api/tasks").status_code == 409


def test_api_uses_the_cli_field_names(home, write_task, cli, client):
    write_task("a", command="true", tags=["x"])
    cli("run", "a")
    listed = json.loads(cli("list", "--json").stdout)
    api = client.get("/api/tasks").json()
    assert set(listed[0]) <= set(api[0]) and api[0]["id"] == "a"
    history = json.loads(cli("history", "--json").stdout)
    assert client.get("/api/history").json()["runs"] == history
    shown = json.loads(cli("show", "a", "--json").stdout)
    assert set(shown) <= set(client.get("/api/tasks/a").json())
    assert client.get("/api/runs/1").json()["run"]["status"] == "success"
    assert client.get("/api/tasks/nope").status_code == 404


def test_chains_and_once_per_on_task_and_upcoming_pages(home, write_task, client):
    write_task("extract", schedule="0 6 * * *", command="true")
    write_task("report", schedule="after extract", command="true", once_per="day")
    write_task("daily", schedule="0 7 * * *", command="true", once_per="day")
    for page in ("/", "/tasks/report", "/tasks/extract", "/upcoming", "/api/upcoming"):
        assert client.get(page).status_code == 200, page
    fires = [f for hour in client.get("/api/upcoming").json()["hours"].values() for f in hour]
    by_id = {f["id"]: f for f in fires}
    assert "report" not in by_id  # a downstream has no fires of its own
    assert by_id["extract"]["then"] == ["report"]
    assert by_id["daily"]["once_per"] == "day"
    assert client.get("/api/tasks/report").json()["next"] == []


# ------------------------------------------------------------------ actions


def test_run_now_starts_a_process_and_the_page_follows_it(home, write_task, server, client):
    write_task("slow", command="sleep 1; echo done-now")
    r = post(client, server, "/tasks/slow/run")
    assert r.status_code == 303 and r.headers["location"].startswith("/tasks/slow")
    run = wait_for(lambda: (client.get("/api/tasks/slow").json()["runs"] or [None])[0])
    assert run["trigger"] == "manual"
    done = wait_for(lambda: (r := client.get(f"/api/runs/{run['run_id']}").json())["run"][
        "status"] != "running" and r)
    assert done["run"]["status"] == "success" and "done-now" in done["log"]


def test_api_run_with_bearer_token(home, write_task, server):
    write_task("a", command="echo via-api")
    with httpx.Client(base_url=server.base, timeout=30,
                      headers={"Authorization": f"Bearer {server.token}"}) as c:
        r = c.post("/api/tasks/a/run")
        assert r.status_code == 202 and r.json()["started"]
        done = wait_for(lambda: [x for x in c.get("/api/history?task=a").json()["runs"]
                                 if x["status"] != "running"])
        assert done[0]["status"] == "success" and done[0]["trigger"] == "manual"
        assert c.post("/api/tasks/nope/run").status_code == 404


def test_disable_enable_keep_every_other_byte(home, write_task, server, client):
    path = write_task("a", command="true", enabled=True)
    path.write_text(path.read_text() + "\n# a comment that stays\n")
    before = path.read_bytes()
    assert post(client, server, "/tasks/a/disable", reason="retired").status_code == 303
    assert b"disabled_reason: retired" in path.read_bytes()
    assert "retired" in client.get("/").text
    assert post(client, server, "/tasks/a/enable").status_code == 303
    assert path.read_bytes() == before
    assert post(client, server, "/tasks/a/disable", reason="rm -rf").status_code == 400
    assert post(client, server, "/tasks/nope/enable").status_code == 404


def test_pause_until_from_the_page(home, write_task, server, client):
    write_task("a", command="true")
    r = post(client, server, "/tasks/a/disable", until="2099-01-01T09:30")
    assert r.status_code == 303
    pauses = json.loads((home / "state" / "paused_until.json").read_text())
    assert "a" in pauses and "until" in client.get("/tasks/a").text
    assert post(client, server, "/tasks/a/disable", until="yesterday").status_code == 400


def test_comment_and_its_limits(home, write_task, server, client):
    write_task("a", command="true")
    assert post(client, server, "/tasks/a/comment", text="please " + XSS).status_code == 303
    page = client.get("/tasks/a").text
    assert "please &lt;script&gt;" in page
    assert post(client, server, "/tasks/a/comment", text="").status_code == 400
    assert post(client, server, "/tasks/a/comment", text="x" * 20000).status_code == 413
    assert post(client, server, "/tasks/a/comment", text="y" * 70000).status_code == 413


def test_resolve_incident_and_revert_without_heal(home, write_task, cli, server, client):
    write_task("same", command="true")
    write_task("same", command="true", filename="other.md")
    cli("tick")
    incident = client.get("/api/incidents").json()[0]
    assert incident["status"] == "open"
    assert post(client, server, f"/incidents/{incident['id']}/resolve").status_code == 303
    assert client.get("/api/incidents").json()[0]["status"] == "resolved"
    assert post(client, server, "/incidents/99/resolve").status_code == 404
    (home / "tasks" / "other.md").unlink()
    r = post(client, server, "/tasks/same/revert-heal")
    assert r.status_code == 409 and "no applied heal" in r.text


def test_maintenance_buttons(home, write_task, cli, server, client):
    write_task("a", command="echo ran")
    assert post(client, server, "/maintenance/on").status_code == 303
    assert (home / "state" / "maintenance.json").exists()
    assert "Maintenance mode" in client.get("/health").text
    out = cli("tick")
    assert "maintenance mode" in out.stdout and "a: success" not in out.stdout
    assert post(client, server, "/maintenance/off").status_code == 303
    assert "a: success" in cli("tick").stdout


# ------------------------------------------------------------------ security


def test_token_required_and_cookie_flags(home, server):
    with httpx.Client(base_url=server.base) as c:
        assert c.get("/").status_code == 401
        assert c.get("/api/tasks").status_code == 401
        r = c.get(f"/login?code={server.code}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        bearer = {"Authorization": f"Bearer {server.token}"}
        assert c.get("/api/tasks", headers=bearer).status_code == 200
    token_file = home / "state" / "web-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == server.token


def test_foreign_host_cross_origin_csrf_and_methods(home, write_task, server, client):
    write_task("a", command="true")
    assert client.get("/", headers={"Host": "evil.example:8765"}).status_code == 421
    good = csrf_of(client)
    r = client.post("/tasks/a/disable", data={"csrf": good},
                    headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    r = client.post("/tasks/a/disable", data={"csrf": good})  # no Origin, no Referer
    assert r.status_code == 403
    r = client.post("/tasks/a/disable", data={"csrf": "forged"},
                    headers={"Origin": server.base})
    assert r.status_code == 403
    assert client.get("/tasks/a/disable").status_code == 405
    assert client.delete("/", headers={"Origin": server.base}).status_code == 405
    assert b"enabled: false" not in (home / "tasks" / "a.md").read_bytes()
    for bad in ("/tasks/..%2F..%2Fetc%2Fpasswd", "/runs/-1", "/runs/1e9", "/api/runs/abc"):
        r = client.get(bad)
        assert 400 <= r.status_code < 500 and "Traceback" not in r.text, bad


def test_no_environment_dump(home, write_task, cli):
    write_task("a", command="true")
    env_secret = "s3cr3t-value-web"
    s = start_web(home)
    try:
        with httpx.Client(base_url=s.base, headers=s.bearer()) as c:
            for page in ("/", "/tasks/a", "/health", "/api/health"):
                assert env_secret not in c.get(page).text
    finally:
        s.stop()
    assert env_secret not in "".join(s.output)


def test_non_loopback_bind_needs_a_token_file(home, tmp_path):
    out = run_cli(home, "web", "--host", "0.0.0.0", "--port", "1")
    assert out.returncode == 2 and "--token-file" in out.stderr


# ------------------------------------------------------------------ pause with auto resume


def _aged(home: Path) -> None:
    """As test_cache.age: as if the last tick had read the files 10 s earlier, so its rows
    are not racily clean and the next tick may take the idle fast path."""
    from test_cache import age

    age(home)


def test_disable_until_is_ended_by_the_tick_even_on_the_fast_path(home, write_task):
    path = write_task("a", command="echo hi", enabled=True)
    before = path.read_bytes()
    assert run_cli(home, "tick", "--now", "2026-11-23T10:00:00+00:00").returncode == 0
    out = run_cli(home, "disable", "a", "--until", "2099-01-01T00:00:00+00:00")
    assert out.returncode == 0 and "until 2099-01-01" in out.stdout
    run_cli(home, "tick", "--now", "2098-12-31T23:00:00+00:00")  # reads the edit; retention
    _aged(home)
    still = run_cli(home, "tick", "--now", "2098-12-31T23:30:00+00:00")  # idle
    assert "enabled again" not in still.stdout and b"enabled: false" in path.read_bytes()
    after = run_cli(home, "tick", "--now", "2099-01-01T00:01:00+00:00")
    assert "pause over, enabled again" in after.stdout, after.stdout + after.stderr
    assert path.read_bytes() == before
    assert not json.loads((home / "state" / "paused_until.json").read_text())


def test_pause_and_resume_commands_reach_the_idle_tick(home, write_task):
    write_task("a", command="echo hi", schedule="0 12 * * *")
    run_cli(home, "tick", "--now", "2026-11-23T10:00:00+00:00")
    _aged(home)
    run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert run_cli(home, "pause").returncode == 0
    out = run_cli(home, "tick", "--now", "2026-11-23T10:02:00+00:00")
    assert "maintenance mode" in out.stdout, out.stdout + out.stderr
    assert "maintenance mode" in run_cli(home, "tick", "--now", "2026-11-23T12:00:00+00:00"
                                         ).stdout
    assert json.loads(run_cli(home, "history", "--json").stdout) == []
    assert run_cli(home, "resume").returncode == 0
    out = run_cli(home, "tick", "--now", "2026-11-23T12:01:00+00:00")
    assert "maintenance" not in out.stdout and "a: success" in out.stdout


def test_web_module_runs_as_command_help():
    out = subprocess.run([sys.executable, str(SCHEDULER), "web", "--help"],
                         capture_output=True, text=True, env={**os.environ})
    assert "--token-file" in out.stdout


# ------------------------------------------------------------------ several hosts (issue 11)


def test_pages_show_the_hosts_of_a_shared_state(pg_url, tmp_path):
    """Two hosts on one PostgreSQL: the runs tables name the host of each run, the run page
    says where it ran, and Health lists both hosts, their last tick, and the task file whose
    copies differ; a host silent for 10 minutes shows as silent."""
    import psycopg
    from conftest import render_task
    from test_hosts import BEFORE, NOW, make_home

    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 0) for name in ("a", "b"))
    for home in (a, b):
        for task_id, where in (("on-a", "a"), ("on-b", "b")):
            (home / "tasks" / f"{task_id}.md").write_text(render_task(
                task_id, schedule="0 10 * * *", command="true", hosts=[where]),
                encoding="utf-8")
    with open(b / "tasks" / "on-a.md", "a", encoding="utf-8") as handle:
        handle.write("b's own note\n")  # b's copy differs from a's
    for at in (BEFORE, NOW):
        for home in (a, b):
            out = run_cli(home, "tick", "--now", at)
            assert out.returncode == 0, out.stdout + out.stderr
    server = start_web(a)
    try:
        with httpx.Client(base_url=server.base, timeout=30, headers=server.bearer()) as c:
            history = c.get("/history").text
            assert "<th>host</th>" in history
            assert '<td class="host">a</td>' in history and '<td class="host">b</td>' in history
            assert '<td class="host">b</td>' in c.get("/tasks/on-b").text
            run_a = json.loads(run_cli(a, "history", "--json").stdout)
            run_id = next(r["run_id"] for r in run_a if r["task_id"] == "on-a")
            assert 'on host <b class="host">a</b>' in c.get(f"/runs/{run_id}").text
            health = c.get("/health").text
            rows = {h: health.split(f'data-host="{h}"', 1)[1].split("</tr>", 1)[0]
                    for h in ("a", "b")}
            assert "(this one)" in rows["a"] and "(this one)" not in rows["b"]
            assert all("ticking" in r and ">2<" in r and "on-a" in r for r in rows.values())
            assert "on-b" not in rows["a"]  # the same copy on both hosts
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("UPDATE hosts SET seen_at = seen_at - 600 WHERE name = 'b'")
            health = c.get("/health").text
            assert "silent" in health.split('data-host="b"', 1)[1].split("</tr>", 1)[0]
    finally:
        server.stop()
