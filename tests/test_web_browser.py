"""Mission Control in a real browser: Playwright driving the system's Chromium against the
real `scheduler.py web`. Skipped (with how to install) when Chromium is missing."""

from __future__ import annotations

import shutil

import pytest
from web_server import start_web

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def browser():
    if not shutil.which("chromium"):
        pytest.skip("Chromium is not installed: `apt-get install -y chromium` (Debian/Ubuntu);"
                    " .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="pip install -r requirements-dev.txt")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def test_run_now_comment_disable_enable_in_a_browser(home, write_task, browser, tmp_path):
    path = write_task("report", title="Nightly report", command="sleep 1; echo report-done",
                      schedule="0 6 * * 1-5", tags=["ops"], enabled=True,
                      body="Builds the **nightly** report.\n")
    path.write_text(path.read_text().replace("tags:", "# owner: ops team\ntags:"))
    write_task("backup", title="Backup", command="true", schedule="*/15 * * * *")
    original = path.read_bytes()
    server = start_web(home)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(server.login_url)
        assert page.url.rstrip("/") == server.base  # the one-time code left the address bar
        row = page.locator('tr[data-task="report"]')
        row.get_by_role("button", name="run now").click()
        page.wait_for_url("**/tasks/report?started=*")  # the time it was asked: a "starting…" row
        # the run appears and finishes without a reload (live.js polls the live part)
        page.locator("tr[data-run] .badge.s-running, tr[data-run] .badge.s-success").first \
            .wait_for(timeout=30000)
        page.locator("tr[data-run] .badge.s-success").first.wait_for(timeout=60000)
        page.locator("textarea[name=text]").fill("please <b>check</b> the totals")
        page.locator("#post-comment").click()
        page.get_by_text("please <b>check</b> the totals").wait_for()
        page.locator("#disable").click()
        page.get_by_text("disabled: by_choice").wait_for()
        assert b"enabled: false" in path.read_bytes()
        page.get_by_role("button", name="enable").click()
        page.get_by_role("button", name="pause").wait_for()
        assert path.read_bytes() == original  # every other byte kept
        page.goto(f"{server.base}/")
        page.locator('tr[data-task="report"] .badge.s-success').wait_for()
        page.screenshot(path=str(tmp_path / "tasks.png"), full_page=True)
        assert (tmp_path / "tasks.png").stat().st_size > 1000
        page.goto(f"{server.base}/tasks/report")
        page.screenshot(path=str(tmp_path / "task.png"), full_page=True)
    finally:
        server.stop()
