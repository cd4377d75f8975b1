"""Mission Control that is pleasant to watch (issue 24 items 5–8), in the real Chromium (as
test_web_browser.py) against the real `scheduler.py web`, and over HTTP with httpx:
the log tail and Stop, refresh without disturbing, phones at 390 px, times in the browser's zone.
Screenshots at 1280 and 390 px are kept under tests/artifacts/ (gitignored); the path is printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
from conftest import SCHEDULER, render_task
from test_web import wait_for
from test_web_browser import browser  # noqa: F401  (fixture: Playwright's Chromium)
from web_server import bearer_client_fixture, server_fixture, start_web  # noqa: F401  (fixtures `server`, `client`)

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def login(page, server) -> None:
    """The one place that knows how a browser signs in (the printed link)."""
    page.goto(server.login_url)  # the one-time code: once per server


def start_run(home: Path, task_id: str) -> subprocess.Popen:
    """`scheduler.py run <id>` in the background, as `run now` starts it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    return subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "run",
                             task_id], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True)


def until(page, js: str, timeout: float = 30) -> None:
    """Wait until `js` is true in the page (wait_for_function would eval: the CSP forbids)."""
    wait_for(lambda: page.evaluate(js), timeout)




def running_run(client: httpx.Client, task_id: str) -> dict:
    return wait_for(lambda: next((r for r in client.get(f"/api/tasks/{task_id}").json()["runs"]
                                  if r["status"] == "running"), None))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1] != "Z"


# ------------------------------------------------------------------ 5: the log, followed


def test_log_endpoint_returns_the_bytes_since_an_offset(home, write_task, server, client):
    flag = home / "go"
    write_task("talk", command=f"echo first-é; while [ ! -e {flag} ]; do sleep 0.05; done;"
               " echo second", timeout=120)
    proc = start_run(home, "talk")
    try:
        run = running_run(client, "talk")
        rid = run["run_id"]
        first = wait_for(lambda: (d := client.get(f"/api/runs/{rid}/log?offset=0").json())
                         ["text"] and d)
        assert first["text"] == "first-é\n" and not first["finished"]
        assert first["offset"] == len("first-é\n".encode())
        again = client.get(f"/api/runs/{rid}/log?offset={first['offset']}").json()
        assert again["text"] == "" and again["offset"] == first["offset"]
        flag.touch()
        assert proc.wait(60) == 0
        last = client.get(f"/api/runs/{rid}/log?offset={first['offset']}").json()
        assert last["finished"] and last["text"] == "second\n"
        assert client.get(f"/api/runs/{rid}/log?offset=x").status_code == 400
        assert client.get("/api/runs/999/log?offset=0").status_code == 404
    finally:
        proc.kill()


def test_stop_ends_a_running_task_and_says_who(home, write_task, server, client):
    write_task("long", command="echo started; sleep 300", timeout=600, retry=True)
    proc = start_run(home, "long")
    try:
        run = running_run(client, "long")
        rid = run["run_id"]
        wait_for(lambda: "started" in client.get(f"/api/runs/{rid}/log?offset=0").json()["text"])
        lock = json.loads((home / "state" / "locks" / "long.lock").read_text())
        pgid = lock["pgid"]
        assert alive(pgid)
        r = client.post(f"/api/runs/{rid}/stop")
        assert r.status_code == 200, r.text
        proc.wait(60)
        done = wait_for(lambda: (x := client.get(f"/api/runs/{rid}").json())["run"]["status"]
                        != "running" and x)
        assert done["run"]["status"] == "failed"
        assert done["run"]["error"].startswith("stopped from the dashboard by ")
        assert "[mdcron] stopped from the dashboard by " in done["log"]
        assert not alive(pgid)
        runs = client.get("/api/tasks/long").json()["runs"]
        assert len(runs) == 1, runs  # a person's Stop is not retried (retry: true)
        assert client.post(f"/api/runs/{rid}/stop").status_code == 409  # not running now
        assert client.post("/api/runs/999/stop").status_code == 404
    finally:
        proc.kill()


def test_log_tail_and_stop_in_a_browser(home, write_task, server, browser):  # noqa: F811
    write_task("chatty", command="i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo line-$i;"
               " sleep 0.05; done", timeout=600)
    proc = start_run(home, "chatty")
    try:
        with httpx.Client(base_url=server.base, timeout=30,
                          headers={"Authorization": f"Bearer {server.token}"}) as c:
            rid = running_run(c, "chatty")["run_id"]
            wait_for(lambda: "line-60\n" in c.get(f"/api/runs/{rid}/log?offset=0").json()["text"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("dialog", lambda d: d.accept())
        login(page, server)
        page.goto(f"{server.base}/runs/{rid}")
        log = page.locator("#log")
        page.evaluate("document.getElementById('log').dataset.mark = 'same'")
        at_bottom = ("(() => { const p = document.getElementById('log');"
                     " return p.scrollHeight - p.scrollTop - p.clientHeight < 24 })()")
        assert page.evaluate(at_bottom), "the page opens at the latest lines"
        seen = int(page.evaluate("document.getElementById('log').textContent.trim()"
                                 ".split('\\n').pop().split('-')[1]"))
        # it appends: later lines arrive, the earlier ones stay, the element is the same one
        until(page, f"document.getElementById('log').textContent.includes('line-{seen + 30}\\n')")
        assert "line-1\n" in log.text_content()
        assert page.evaluate("document.getElementById('log').dataset.mark") == "same"
        assert page.evaluate(at_bottom), "the view follows the new lines"
        # elapsed time against the timeout
        assert "of its 10 min 00 s timeout" in page.locator(".elapsed").text_content()
        # scrolled up to read: the view stays there while lines arrive
        page.evaluate("document.getElementById('log').scrollTop = 0")
        now = int(page.evaluate("document.getElementById('log').textContent.trim()"
                                ".split('\\n').pop().split('-')[1]"))
        until(page, f"document.getElementById('log').textContent.includes('line-{now + 20}\\n')")
        assert page.evaluate("document.getElementById('log').scrollTop") == 0
        lock = json.loads((home / "state" / "locks" / "chatty.lock").read_text())
        page.get_by_role("button", name="stop").click()
        page.locator(".card .badge.s-failed").wait_for(timeout=60000)
        page.get_by_text("stopped from the dashboard by").first.wait_for(timeout=30000)
        assert proc.wait(60) is not None
        assert not alive(lock["pgid"])
        page.screenshot(path=str(_artifact("run-stopped-1280.png")), full_page=True)
    finally:
        proc.kill()


# ------------------------------------------------------------------ 6: refresh, undisturbed


def test_unchanged_tasks_page_refresh_is_a_304_at_1000_tasks(home, server, client):
    for i in range(1000):
        (home / "tasks" / f"t{i:04d}.md").write_text(render_task(
            f"t{i:04d}", title=f"Task {i}", command="true", schedule=f"{i % 60} * * * *",
            tags=["bulk"]))
    full = client.get("/")
    assert full.status_code == 200
    for _ in range(3):  # the page's next runs move at a minute boundary (a schedule fires
        minute = time.time() // 60  # every minute here): a pair that straddles one is redone
        first = client.get("/", headers={"X-Live": "1"})
        tag = first.headers["etag"]
        again = client.get("/", headers={"X-Live": "1", "If-None-Match": tag})
        if time.time() // 60 == minute:
            break
    size = len(again.content) + sum(len(k) + len(v) + 4 for k, v in again.headers.items())
    print(f"\nTasks page at 1,000 tasks: full {len(full.content) / 1024:.0f} KiB, live part"
          f" {len(first.content) / 1024:.0f} KiB, unchanged refresh {size} bytes (headers"
          " included)")
    assert again.status_code == 304 and size <= 50 * 1024
    (home / "tasks" / "t0000.md").write_text(render_task("t0000", title="Renamed",
                                                         command="true"))
    changed = client.get("/", headers={"X-Live": "1", "If-None-Match": tag})
    assert changed.status_code == 200 and "Renamed" in changed.text


def test_refresh_keeps_focus_and_says_when_updates_stop(home, write_task, browser):  # noqa: F811
    for name in ("alpha", "beta", "gamma"):
        write_task(name, title=name.title(), command="true", schedule="0 6 * * *")
    server = start_web(home)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        live = []
        page.on("response", lambda r: live.append(r.status)
                if r.request.headers.get("x-live") == "1" else None)
        login(page, server)
        button = page.locator('tr[data-task="beta"] button.primary')
        button.focus()
        page.evaluate("window.focused = document.activeElement")
        page.evaluate("window.scrollTo(0, 0)")
        for _ in range(300):  # Playwright delivers its events while it is called: wait in it
            if live.count(304) >= 2:
                break
            page.wait_for_timeout(100)
        assert live.count(304) >= 2, live  # unchanged: 304s, nothing replaced
        write_task("delta", title="Delta", command="true", schedule="0 7 * * *")
        page.locator('tr[data-task="delta"]').wait_for(timeout=30000)  # a change arrives
        assert 200 in live
        assert page.evaluate("document.activeElement === window.focused")  # the same element
        assert page.evaluate("document.activeElement.closest('tr').dataset.task") == "beta"
        server.stop()
        note = page.locator("#live-status")
        note.wait_for(state="visible", timeout=30000)
        assert "cannot be reached" in note.text_content()
    finally:
        server.stop()


def test_rows_do_not_move_under_the_mouse(home, write_task, server, browser):  # noqa: F811
    for name in ("beta", "gamma"):
        write_task(name, title=name.title(), command="true", schedule="0 6 * * *")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    live: list[int] = []
    page.on("response", lambda r: live.append(r.status)
            if r.request.headers.get("x-live") == "1" else None)
    login(page, server)
    box = page.locator('tr[data-task="beta"]').bounding_box()
    assert box
    page.mouse.move(box["x"] + 20, box["y"] + box["height"] / 2)
    write_task("alpha", title="Alpha", command="true", schedule="0 6 * * *")  # sorts first
    seen = len(live)
    for _ in range(300):
        if live[seen:].count(200) >= 2:
            break
        page.wait_for_timeout(100)
    assert live[seen:].count(200) >= 2, live
    assert page.locator('tr[data-task="alpha"]').count() == 0  # held while the mouse is there
    page.mouse.move(5, 5)  # the header
    page.locator('tr[data-task="alpha"]').wait_for(timeout=30000)


def test_signed_out_and_gone_pages_say_live_updates_stopped(home, write_task, server,
                                                            browser):  # noqa: F811
    write_task("a", command="true")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    login(page, server)
    page.goto(f"{server.base}/tasks/a")
    (home / "tasks" / "a.md").unlink()
    page.locator("#live-status").wait_for(state="visible", timeout=30000)
    assert "no longer exists (404)" in page.locator("#live-status").text_content()
    write_task("b", command="true")
    page.goto(f"{server.base}/tasks/b")
    page.context.clear_cookies()
    page.locator("#live-status").wait_for(state="visible", timeout=30000)
    assert "sign-in (401)" in page.locator("#live-status").text_content()


# ------------------------------------------------------------------ 7: phones


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def test_every_page_fits_a_phone_and_screenshots_are_kept(home, write_task, cli, server,
                                                          browser):  # noqa: F811
    write_task("nightly-report-for-the-finance-team", title="A rather long title " * 4,
               command="echo " + "x" * 300, tags=["ops", "finance"], schedule="0 6 * * 1-5",
               body="# Notes\n" + "word " * 200)
    write_task("backup", title="Backup", command="true", schedule="*/15 * * * *")
    (home / "tasks" / "broken.md").write_text("---\nid: broken\n---\n")
    assert cli("run", "nightly-report-for-the-finance-team").returncode == 0
    cli("comment", "backup", "please check " + "y" * 120)
    pages = {"tasks": "/", "task": "/tasks/nightly-report-for-the-finance-team",
             "run": "/runs/1", "history": "/history", "incidents": "/incidents",
             "upcoming": "/upcoming", "upcoming7": "/upcoming?days=7", "health": "/health",
             "missing": "/tasks/nope"}
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    login(page, server)
    wide = []
    for name, path in pages.items():
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 800})
            page.goto(server.base + path)
            until(page, "document.readyState === 'complete'")
            over = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
            if over > 0:
                wide.append(f"{path} at {width} px: {over} px too wide")
            page.screenshot(path=str(_artifact(f"{name}-{width}.png")), full_page=True)
            if width == 390:  # the brand never covers the title; Health is on screen
                h1 = page.locator("main h1").first.bounding_box()
                header = page.locator("header").bounding_box()
                assert h1 and header and h1["y"] >= header["y"] + header["height"], path
                health = page.locator("header nav a", has_text="Health").bounding_box()
                assert health and health["x"] + health["width"] <= 390, path
    print(f"\nscreenshots at 1280 and 390 px: {ARTIFACTS}")
    assert wide == []
    # the Tasks table became cards: each row as wide as the screen, the key fields labelled
    page.goto(server.base + "/")
    row = page.locator('tr[data-task="backup"]').bounding_box()
    assert row and row["width"] <= 390
    assert page.locator('tr[data-task="backup"] td[data-label="next run"]').is_visible()


# ------------------------------------------------------------------ 8: times people read


def test_times_in_the_browsers_zone_and_pause_in_the_chosen_zone(home, write_task, server,
                                                                 browser):  # noqa: F811
    write_task("a", command="true", schedule="0 6 * * *")
    context = browser.new_context(timezone_id="America/New_York",
                                  viewport={"width": 1280, "height": 800})
    page = context.new_page()
    login(page, server)
    assert page.locator("#zone").text_content() == "times: America/New_York"
    nxt = page.locator('tr[data-task="a"] td[data-label="next run"] time')
    assert nxt.text_content().startswith("in ")  # relative
    title = nxt.get_attribute("title")
    assert "America/New_York" in title and ("UTC-05:00" in title or "UTC-04:00" in title)
    there = datetime.fromisoformat(nxt.get_attribute("datetime")).astimezone(
        ZoneInfo("America/New_York"))
    assert title.startswith(there.strftime("%Y-%m-%d %H:%M:%S America/New_York"))
    page.goto(f"{server.base}/tasks/a")
    zone = page.locator("select[name=zone]")
    assert zone.input_value() == "America/New_York"  # the browser's zone by default
    page.locator("input[name=until]").fill("2099-01-01T09:30")
    page.get_by_role("button", name="pause").click()
    page.get_by_text("disabled: paused").wait_for()
    pauses = json.loads((home / "state" / "paused_until.json").read_text())
    until = datetime.fromtimestamp(pauses["a"]["until"], UTC)
    assert until == datetime(2099, 1, 1, 14, 30, tzinfo=UTC)  # 09:30 in New York
    context.close()


def test_pause_until_zone_is_checked(home, write_task, server, client):
    write_task("a", command="true")
    csrf = client.get("/tasks/a").text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    r = client.post("/tasks/a/disable", data={"csrf": csrf, "until": "2099-01-01T09:30",
                                              "zone": "Mars/Olympus"}, follow_redirects=False)
    assert r.status_code == 400 and "is not a time zone" in r.text
    r = client.post("/tasks/a/disable", data={"csrf": csrf, "until": "2099-01-01T09:30",
                                              "zone": "Asia/Tokyo"}, follow_redirects=False)
    assert r.status_code == 303
    pauses = json.loads((home / "state" / "paused_until.json").read_text())
    assert datetime.fromtimestamp(pauses["a"]["until"], UTC) == datetime(2099, 1, 1, 0, 30,
                                                                         tzinfo=UTC)


def test_a_character_cut_by_a_write_waits_for_its_last_byte(tmp_path):
    from mdcron.web.logread import read_chunk, whole_chars

    euro = "€".encode()  # three bytes
    assert whole_chars(b"ab" + euro) == 5 and whole_chars(b"ab" + euro[:2]) == 2
    assert whole_chars(b"ab" + euro[:1]) == 2 and whole_chars(b"") == 0
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "run.log"
    log.write_bytes(b"x" + euro[:2])
    first = read_chunk(log, logs, 0)
    assert first is not None and (first.text, first.offset) == ("x", 1)
    log.write_bytes(b"x" + euro + b"\n")
    rest = read_chunk(log, logs, first.offset)
    assert rest is not None and (rest.text, rest.offset) == ("€\n", 5)
    assert read_chunk(tmp_path / "elsewhere.log", logs, 0) is None  # only the home's logs
    big = read_chunk(log, logs, 0, limit=2, final=True)
    assert big is not None and big.skipped and big.offset == 5
