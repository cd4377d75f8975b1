"""Issue 28: the dashboard's security checks hold on EVERY route. The routes are enumerated from
the app itself, so a route added later without the Host check, the login or CSRF fails here.
Driven over real HTTP against the real `scheduler.py web`; a refused request changes nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from conftest import render_task
from web_server import start_web

OPEN = {"/login", "/static/{name}"}  # reachable without a session (the guard's OPEN + static)
FILLED = {"task_id": "a", "run_id": "1", "incident": "1", "label": "0000", "name": "style.css"}


def app_routes() -> list[tuple[str, str]]:
    """(method, path template) of every route the app serves (HEAD aside)."""
    import tempfile

    from starlette.routing import Route

    from mdcron.web.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "tasks").mkdir()
        app = create_app(home, "t" * 40, {"127.0.0.1"})
        while not hasattr(app, "routes"):  # through the middleware wrappers
            app = app.app
        found = []
        for route in app.routes:
            assert isinstance(route, Route), f"{route!r}: a mount hides its routes from this test"
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    found.append((method, route.path))
    return found


ROUTES = app_routes()


def fill(template: str) -> str:
    path = template
    for key, value in FILLED.items():
        path = path.replace("{" + key + "}", value)
    assert "{" not in path, f"no value for a parameter of {template}: add it to FILLED"
    return path


def fingerprint(home: Path) -> str:
    """The task files and the state database: what a refused request must leave alone."""
    digest = hashlib.sha256()
    for path in sorted((home / "tasks").glob("*.md")):
        digest.update(path.read_bytes())
    db = home / "state" / "mdcron.db"
    if db.exists():
        digest.update(db.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("every_route") / "home"
    (home / "tasks").mkdir(parents=True)
    (home / "tasks" / "a.md").write_text(render_task("a", command="true"), encoding="utf-8")
    server = start_web(home)
    with httpx.Client(base_url=server.base, timeout=30) as client:
        server.login(client)
        html = client.get("/").text
        csrf = html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        yield home, server, client, csrf
    server.stop()


def test_the_enumeration_sees_the_routes_it_must():
    paths = {p for _, p in ROUTES}
    assert {"/", "/api/tasks", "/tasks/{task_id}/disable", "/api/tasks/{task_id}/run",
            "/metrics", "/login"} <= paths
    assert len(ROUTES) >= 30


@pytest.mark.parametrize(("method", "template"), ROUTES)
def test_a_foreign_host_header_is_refused_everywhere(served, method, template):
    home, server, client, csrf = served
    before = fingerprint(home)
    for auth in ({}, server.bearer()):  # the session's cookie, then the token (the JSON API)
        r = client.request(method, fill(template), data={"csrf": csrf} if method == "POST"
                           else None, headers={"Host": "evil.example:8765",
                                               "Origin": "http://evil.example:8765", **auth})
        assert r.status_code == 421, (method, template, r.status_code)
    assert fingerprint(home) == before


@pytest.mark.parametrize(("method", "template"), [r for r in ROUTES if r[1] not in OPEN])
def test_no_session_and_no_token_is_refused_everywhere(served, method, template):
    home, server, _, csrf = served
    before = fingerprint(home)
    with httpx.Client(base_url=server.base, timeout=30) as stranger:
        r = stranger.request(method, fill(template),
                             data={"csrf": csrf} if method == "POST" else None,
                             headers={"Origin": server.base})
        assert r.status_code == 401, (method, template, r.status_code)
        bad = stranger.request(method, fill(template), headers={
            "Origin": server.base, "Authorization": "Bearer " + "x" * 43})
        assert bad.status_code == 401, (method, template, bad.status_code)
    assert fingerprint(home) == before


POSTS = [r for r in ROUTES if r[0] == "POST" and r[1] != "/login"]


@pytest.mark.parametrize(("method", "template"), POSTS)
def test_a_session_post_without_the_csrf_token_is_refused_everywhere(served, method, template):
    home, server, client, _ = served
    before = fingerprint(home)
    for fields in ({}, {"csrf": "forged"}):
        r = client.post(fill(template), data=fields, headers={"Origin": server.base},
                        follow_redirects=False)
        assert r.status_code == 403, (template, fields, r.status_code)
    r = client.post(fill(template), headers={"Origin": server.base,
                                             "X-CSRF-Token": "forged"})
    assert r.status_code == 403, (template, "header", r.status_code)
    assert fingerprint(home) == before


@pytest.mark.parametrize(("method", "template"), POSTS)
def test_a_session_post_from_another_origin_is_refused_everywhere(served, method, template):
    home, server, client, csrf = served
    before = fingerprint(home)
    other_port = server.base.rsplit(":", 1)[0] + ":1"  # same host, another port: another origin
    for origin in ("http://evil.example", other_port, None):
        headers = {"Origin": origin} if origin else {}  # none at all: no Origin, no Referer
        r = client.post(fill(template), data={"csrf": csrf}, headers=headers,
                        follow_redirects=False)
        assert r.status_code == 403, (template, origin, r.status_code)
    assert fingerprint(home) == before
