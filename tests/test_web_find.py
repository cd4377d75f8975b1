"""Find and compare, truthful pages (issue 24 items 9 and 10), over HTTP with httpx against
the real `scheduler.py web`, and in the real Chromium where the behaviour is the browser's
(search, filters and sorting that apply at once, shortcuts, dark mode)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import SCHEDULER
from test_web_browser import browser  # noqa: F401  (fixture: Playwright's Chromium)
from test_web_live import login, until
from web_server import bearer_client_fixture, server_fixture, start_web  # noqa: F401  (fixtures `server`, `client`)


def ids(html: str) -> list[str]:
    return re.findall(r'<tr data-task="([^"]+)"', html)


def three_tasks(write_task, cli) -> None:
    write_task("alpha", title="Alpha backup", command="exit 1", tags=["backup"],
               schedule="0 1 * * *")
    write_task("beta", title="Beta report", command="true", tags=["report"],
               schedule="0 2 * * *")
    write_task("gamma", title="Gamma Backup of mail", command="true", tags=["mail"],
               schedule="0 3 * * *")
    for _ in range(2):
        cli("run", "alpha")
    for _ in range(12):
        cli("run", "beta")


# ------------------------------------------------------------------ 9: over HTTP


def test_tasks_search_sort_status_filter_and_last_runs(home, write_task, cli, client):
    three_tasks(write_task, cli)
    assert ids(client.get("/?q=backup").text) == ["alpha", "gamma"]  # title, any case
    assert ids(client.get("/?q=mail").text) == ["gamma"]  # a tag
    assert ids(client.get("/?q=BETA+report").text) == ["beta"]  # every word
    assert ids(client.get("/?sort=id&dir=desc").text) == ["gamma", "beta", "alpha"]
    assert ids(client.get("/?sort=fails&dir=desc").text)[0] == "alpha"
    assert ids(client.get("/?status=failed").text) == ["alpha"]
    page = client.get("/?q=backup&sort=title").text
    assert 'value="backup"' in page and 'aria-sort="ascending"' in page  # kept on reload
    assert [r["id"] for r in client.get("/api/tasks?q=report").json()] == ["beta"]
    # the last 10 runs as dots, oldest first, coloured by status
    html = client.get("/").text
    beta = html.split('data-task="beta"', 1)[1].split("</tr>", 1)[0]
    assert "<i class=o>" + "●" * 10 + "</i>" in beta and "10 success" in beta
    alpha = html.split('data-task="alpha"', 1)[1].split("</tr>", 1)[0]
    assert "<i class=x>●●</i>" in alpha and "2 failed" in alpha
    assert "●" not in html.split('data-task="gamma"', 1)[1].split("</tr>", 1)[0]


def test_task_page_chart_note_holders_and_layout(home, write_task, cli, client):
    (home / "scheduler.yaml").write_text("resources:\n  db: 1\n")
    write_task("alpha", title="Alpha", command="exit 3", uses=["db"], self_heal=True,
               body="Backs up the **alpha** database.\n")
    # self-heal set up (a key) but not possible (a broken prompt template): the note says why
    (home / "prompts").mkdir()
    (home / "prompts" / "self-heal.txt").write_text("Fix $task_id, $nonsense")
    for _ in range(3):
        cli("run", "alpha", env={"ANTHROPIC_API_KEY": "sk-test-not-used"})
    html = client.get("/tasks/alpha").text
    # the duration chart: inline SVG drawn by the server, one bar per finished run
    svg = html.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert svg.count("<rect") == 3 and 'class="b-x"' in svg
    # why self-heal was not attempted (the API's note), on the Task and Run pages
    note = client.get("/api/tasks/alpha").json()["runs"][0]["note"]
    assert note and "not attempted" in note
    assert note in html.replace("&#39;", "'")
    rid = client.get("/api/tasks/alpha").json()["runs"][0]["run_id"]
    assert note in client.get(f"/runs/{rid}").text.replace("&#39;", "'")
    # who holds each uses: resource now
    assert "Resources this task uses" in html and "free now" in html
    # the description near the top; the comment form beside its thread (before the file)
    assert html.index("Backs up the") < html.index("Why (now)")
    assert html.index('id="comments"') < html.index('id="comment-form"') < html.index(
        "<h2>File</h2>")


def test_run_page_links_and_raw_log_download(home, write_task, cli, server, client):
    write_task("talk", command="echo line-one; echo line-two")
    for _ in range(3):
        cli("run", "talk")
    html = client.get("/runs/2").text
    assert 'href="/runs/1" rel="prev"' in html and 'href="/runs/3" rel="next"' in html
    assert "no earlier run" in client.get("/runs/1").text
    r = client.get("/runs/2/log.txt")
    assert r.status_code == 200 and r.text == "line-one\nline-two\n"
    assert r.headers["content-type"].startswith("text/plain")
    assert r.headers["content-disposition"] == 'attachment; filename="mdcron-run-2.log"'
    assert client.get("/runs/99/log.txt").status_code == 404
    with httpx.Client(base_url=server.base, timeout=30) as anonymous:  # same auth as pages
        assert anonymous.get("/runs/2/log.txt").status_code == 401


def test_upcoming_is_a_compact_timeline(home, write_task, client):
    write_task("often", command="true", schedule="*/5 * * * *")
    write_task("daily", command="true", schedule="30 6 * * *")
    html = client.get("/upcoming?days=7").text
    days = re.findall(r'class="day"( open)? data-day="([-\d]+)"', html)
    assert len(days) in (7, 8) and days[0][0] == " open"  # one day listed, the others linked
    assert all(not d[0] for d in days[1:]) and html.count('class="strip"') == len(days)
    second = days[1][1]
    html = client.get(f"/upcoming?days=7&day={second}").text
    assert f'<details class="day" open data-day="{second}"' in html
    assert client.get("/api/upcoming?days=7").json()["total"] > 0


# ------------------------------------------------------------------ 10: truthful pages


def test_health_shows_the_secret_names_the_tick_saw(home, write_task):
    (home / "scheduler.yaml").write_text('secret_env: ["*_TOKEN"]\n')
    write_task("t", command="true", schedule="0 0 1 1 *")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MDCRON_") and k != "ANTHROPIC_API_KEY"}
    tick_env = {**env, "ANTHROPIC_API_KEY": "sk-secret-value-1", "DEPLOY_TOKEN": "tok-value-2"}
    subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "tick"], env=tick_env,
                   check=True, capture_output=True)
    s = start_web(home)  # the web process has neither variable
    try:
        with httpx.Client(base_url=s.base, headers={"Authorization": f"Bearer {s.token}"}) as c:
            html = c.get("/health").text
            block = html.split('id="tick-env"', 1)[1].split("</div>", 1)[0]
            assert "as the tick saw it" in block
            assert re.search(r"ANTHROPIC_API_KEY</code>: <span class=\"badge s-success\">set",
                             block)
            assert re.search(r"DEPLOY_TOKEN</code>: <span class=\"badge s-success\">set", block)
            assert "sk-secret-value-1" not in html and "tok-value-2" not in html
            checks = {ch["check"]: ch for ch in c.get("/api/health").json()["checks"]}
            assert checks["api key"]["status"] == "ok"  # as the tick has it, not as web has
    finally:
        s.stop()
    stored = sqlite_meta(home, "tick_env")
    assert "sk-secret" not in stored and "tok-value" not in stored  # names only, never values


def sqlite_meta(home: Path, key: str) -> str:
    import sqlite3

    db = sqlite3.connect(home / "state" / "mdcron.db")
    try:
        return db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]
    finally:
        db.close()


def test_why_and_next_run_honour_maintenance_mode(home, write_task, cli, client):
    write_task("job", command="true", schedule="*/5 * * * *")
    assert cli("pause").returncode == 0
    why = cli("why", "job").stdout
    assert "paused: maintenance mode" in why and "nothing runs" in why
    html = client.get("/tasks/job").text
    assert "paused: maintenance mode" in html and "paused until resumed" in html
    row = client.get("/").text.split('data-task="job"', 1)[1].split("</tr>", 1)[0]
    assert "paused" in row.split('data-label="next run"', 1)[1]


def test_web_refuses_a_missing_or_mistyped_home(tmp_path):
    for home in (tmp_path / "no-such-home", tmp_path / "empty"):
        if home.name == "empty":
            home.mkdir()
        r = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "web",
                            "--port", "1"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert str(home) in r.stderr and "mkdir -p" in r.stderr and "Traceback" not in r.stderr
        assert not (home / "state").exists()  # nothing created


def test_run_now_shows_a_starting_row_until_the_run_is_there(home, write_task, cli, server,
                                                            client):
    write_task("job", command="true", schedule="0 0 1 1 *")
    now = int(time.time())
    assert 'id="starting"' in client.get(f"/tasks/job?started={now}").text
    assert 'id="starting"' not in client.get(f"/tasks/job?started={now - 600}").text
    cli("run", "job")
    page = client.get(f"/tasks/job?started={now}").text
    assert 'id="starting"' not in page and 'data-run="1"' in page
    r = client.post("/tasks/job/run", data={"csrf": csrf(client, "/tasks/job")},
                    headers={"Origin": server.base}, follow_redirects=False)
    assert r.status_code == 303 and re.fullmatch(r"/tasks/job\?started=\d+",
                                                 r.headers["location"])


def csrf(client: httpx.Client, path: str) -> str:
    return client.get(path).text.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def test_error_pages_keep_the_input_and_speak_of_the_page(home, write_task, server, client):
    path = write_task("job", command="true", schedule="0 0 1 1 *")
    before = path.read_bytes()
    r = client.post("/tasks/job/disable", data={"csrf": csrf(client, "/tasks/job"),
                                                "until": "2001-02-03T04:05", "zone": "UTC"},
                    headers={"Origin": server.base}, follow_redirects=False)
    assert r.status_code == 400
    assert 'value="2001-02-03T04:05"' in r.text and "<option selected>UTC</option>" in r.text
    assert "already past" in r.text and "--until" not in r.text
    assert path.read_bytes() == before  # nothing changed
    r = client.get("/history?day=2026-13-45&task=job")
    assert r.status_code == 400 and 'value="2026-13-45"' in r.text and 'value="job"' in r.text
    assert "YYYY-MM-DD" in r.text


# ------------------------------------------------------------------ 9: in the browser


def visible_ids(page) -> list[str]:
    return page.evaluate("Array.from(document.querySelectorAll('#tasks tr[data-task]'))"
                         ".filter(r => !r.hidden).map(r => r.dataset.task)")


def test_search_filters_sort_and_shortcuts_in_a_browser(home, write_task, cli, server,
                                                        browser):  # noqa: F811
    three_tasks(write_task, cli)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    login(page, server)
    until(page, "document.documentElement.classList.contains('js')")
    page.keyboard.press("/")  # "/" focuses the search box
    until(page, "document.activeElement && document.activeElement.id === 'q'")
    page.keyboard.type("backup")
    until(page, "location.search === '?q=backup'")  # the address keeps it for a reload
    assert visible_ids(page) == ["alpha", "gamma"]  # hidden at once, no reload
    page.select_option("#f-status", "failed")  # a filter applies as it is chosen
    until(page, "location.search === '?q=backup&status=failed'")
    assert visible_ids(page) == ["alpha"]
    page.reload()
    until(page, "document.documentElement.classList.contains('js')")
    assert visible_ids(page) == ["alpha"] and page.input_value("#q") == "backup"
    page.goto(server.base + "/")
    until(page, "document.documentElement.classList.contains('js')")
    page.locator('#tasks a.sort[data-sort="id"]').click()  # ascending
    page.locator('#tasks a.sort[data-sort="id"]').focus()
    page.keyboard.press("Enter")  # the keyboard sorts too: descending
    until(page, "location.search === '?sort=id&dir=desc'")
    assert visible_ids(page) == ["gamma", "beta", "alpha"]
    assert page.get_attribute('th:has(a[data-sort="id"])', "aria-sort") == "descending"
    # the live refresh fetches this address: the server's order is the same
    page.evaluate("document.dispatchEvent(new CustomEvent('mdcron:refresh'))")
    until(page, "document.querySelector('#tasks tr[data-task]').dataset.task === 'gamma'")
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("#keys-help").is_visible()
    page.keyboard.press("g")
    page.keyboard.press("h")
    page.wait_for_url("**/health")
    page.keyboard.press("g")
    page.keyboard.press("u")
    page.wait_for_url("**/upcoming")
    page.keyboard.press("g")
    page.keyboard.press("t")
    page.wait_for_url(server.base + "/")


def test_dark_mode_follows_the_preference(home, write_task, server, browser):  # noqa: F811
    write_task("job", command="true")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    login(page, server)
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert light == "rgb(246, 247, 249)" and dark == "rgb(12, 17, 29)"
    card = page.evaluate("getComputedStyle(document.querySelector('table')).backgroundColor")
    assert card == "rgb(22, 27, 38)"  # tables follow, not white boxes on a dark page
