"""Issue 24, item 4, and the revert-heal confirm step of item 3: who did what, from the page,
a script with the token and the CLI, in the state (SQLite and PostgreSQL), on the Task page
("Activity") and in `scheduler.py audit`."""

from __future__ import annotations

import json
import os
import pwd

import httpx
import pytest
from conftest import run_cli
from fake_anthropic import tool_use
from test_heal import setup  # noqa: F401 (a fixture)
from web_server import start_web

ME = pwd.getpwuid(os.geteuid()).pw_name


@pytest.fixture
def home_on(home, state_url):
    if state_url:
        (home / "scheduler.yaml").write_text(f"state_url: '{state_url}'\n", encoding="utf-8")
    return home


def audit(home, *args: str) -> list[dict]:
    out = run_cli(home, "audit", "--json", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_cli_actions_are_recorded(home_on, write_task):
    home = home_on
    write_task("a", command="true")
    write_task("b", command="true")
    for args in (("disable", "a", "--reason", "retired"), ("enable", "a"),
                 ("disable", "b", "--until", "2099-01-01T00:00:00+00:00"),
                 ("comment", "a", "look at this"), ("pause",), ("resume",), ("run", "b")):
        out = run_cli(home, *args)
        assert out.returncode in (0, 1), (args, out.stdout + out.stderr)
    rows = audit(home)
    actions = [(r["action"], r["task_id"]) for r in reversed(rows)]
    assert actions == [("disable", "a"), ("enable", "a"), ("disable", "b"), ("comment", "a"),
                       ("maintenance-on", None), ("maintenance-off", None), ("run", "b")]
    assert all(r["who"] == f"cli ({ME})" for r in rows)
    assert all(r["origin"] == "no terminal" for r in rows)  # a subprocess without a tty
    assert "until 2099-01-01" in rows[4]["detail"]
    assert [r["action"] for r in audit(home, "--task", "a")] == ["comment", "enable", "disable"]
    assert len(audit(home, "-n", "2")) == 2
    table = run_cli(home, "audit", "--task", "a").stdout
    assert "comment" in table and f"cli ({ME})" in table
    assert run_cli(home, "audit", "-n", "0").returncode == 2  # a bad number: usage error


def test_page_and_token_actions_are_recorded_and_shown(home, write_task, cli):
    write_task("a", command="true")
    write_task("same", command="true")
    write_task("same", command="true", filename="other.md")
    cli("tick")  # a duplicate id: an incident to resolve
    server = start_web(home)
    try:
        with httpx.Client(base_url=server.base, timeout=30) as c:
            server.login(c)
            page = c.get("/health").text
            token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            label = page.split('data-session="', 1)[1].split('"', 1)[0]

            def post(path: str, **fields: str) -> int:
                return c.post(path, data={"csrf": token, **fields},
                              headers={"Origin": server.base}, follow_redirects=False
                              ).status_code

            assert post("/tasks/a/disable", reason="by_choice") == 303
            assert post("/tasks/a/enable") == 303
            assert post("/tasks/a/disable", until="2099-01-01T09:30") == 303
            assert post("/tasks/a/enable") == 303
            assert post("/tasks/a/comment", text="hi") == 303
            assert post("/maintenance/on") == 303
            assert post("/maintenance/off") == 303
            incident = c.get("/api/incidents").json()[0]["id"]
            assert post(f"/incidents/{incident}/resolve") == 303
            (home / "tasks" / "other.md").unlink()
            r = c.post("/api/tasks/a/run", headers=server.bearer())
            assert r.status_code == 202
            task_page = c.get("/tasks/a").text
            activity = task_page.split('id="activity"', 1)[1]
            assert activity.count("data-audit=") == 6
            assert f"web session {label} ({ME})" in activity and "127.0.0.1" in activity
            assert f"api token ({ME})" in activity
            api = c.get("/api/tasks/a").json()["activity"]
            assert [a["action"] for a in api][:2] == ["run", "comment"]
    finally:
        server.stop()
    rows = audit(home)
    assert [r["action"] for r in reversed(rows)] == [
        "login", "disable", "enable", "pause", "enable", "comment", "maintenance-on",
        "maintenance-off", "resolve", "run"]
    assert rows[-1]["detail"] == "with the one-time link"
    web_rows = [r for r in rows if r["who"].startswith("web session")]
    assert len(web_rows) == 9 and all(r["origin"] == "127.0.0.1" for r in web_rows)
    # the web's run is recorded once: the `scheduler.py run` it starts does not add its own
    runs = [r for r in rows if r["action"] == "run"]
    assert len(runs) == 1 and runs[0]["who"] == f"api token ({ME})"


def test_revert_confirm_rechecks_and_ignores_a_hidden_force(setup, fake_claude):  # noqa: F811
    """A heal changed a file; someone edited it since. A hidden force=1 does not skip the
    check; the confirm page's step reverts only while the file is as the page showed it."""
    from test_heal import BROKEN, heal, load

    fake_claude.tools(tool_use("write_file", path="scripts/job.sh", content="#!/bin/sh\necho\n"))
    fake_claude.tools(tool_use("finish", diagnosis="rewrote it"))
    config, home, _ = setup()
    assert heal(config, fake_claude.environ, load(config)).outcome == "changed"
    script = home / "scripts" / "job.sh"
    script.write_text("#!/bin/sh\necho mine\n")
    server = start_web(home)
    try:
        with httpx.Client(base_url=server.base, timeout=30) as c:
            server.login(c)
            page = c.get("/tasks/job").text
            token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]

            def revert(**fields: str) -> httpx.Response:
                return c.post("/tasks/job/revert-heal", data={"csrf": token, **fields},
                              headers={"Origin": server.base}, follow_redirects=False)

            r = revert(force="1")
            assert r.status_code == 409 and "revert anyway" in r.text
            assert script.read_text() == "#!/bin/sh\necho mine\n"
            shown = r.text.split('name="confirm" value="', 1)[1].split('"', 1)[0]
            script.write_text("#!/bin/sh\necho mine, later\n")  # changed after it was shown
            r = revert(confirm=shown)
            assert r.status_code == 409 and "revert anyway" in r.text
            assert script.read_text() == "#!/bin/sh\necho mine, later\n"
            again = r.text.split('name="confirm" value="', 1)[1].split('"', 1)[0]
            assert again != shown
            assert revert(confirm=again).status_code == 303
            assert script.read_text() == BROKEN
    finally:
        server.stop()
    rows = audit(home, "--task", "job")
    assert rows[0]["action"] == "revert-heal" and "confirmed" in rows[0]["detail"]
