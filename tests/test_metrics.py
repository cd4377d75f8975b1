"""Issue 26 item 5: the same figures from the tick's textfile (written by hand, atomically) and
from the web's /metrics (prometheus_client), both read back with prometheus_client's parser."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from conftest import REPO, run_cli
from prometheus_client.parser import text_string_to_metric_families
from test_cache import age
from web_server import free_port, start_web

NOW = "2026-11-23T10:00:07+00:00"
LATER = "2026-11-23T10:01:02+00:00"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def metrics_home(home, write_task):
    (home / "prom").mkdir()
    (home / "scheduler.yaml").write_text("metrics_file: prom/mdcron.prom\n"
                                         "max_consecutive_failures: 1\n")
    write_task("good", command="true")
    write_task("bad", command="exit 2", schedule="*/5 * * * *")
    write_task("quiet", command="true", schedule="0 3 * * *")
    return home


def test_the_tick_writes_the_textfile_atomically_with_every_figure(metrics_home):
    assert run_cli(metrics_home, "tick", "--now", NOW).returncode == 1  # `bad` failed
    path = metrics_home / "prom" / "mdcron.prom"
    got = samples(path.read_text())
    t = 1795428000.0  # 2026-11-23T10:00:00Z
    assert got[("mdcron_task_last_success_timestamp_seconds", (("task", "good"),))] >= t
    assert got[("mdcron_task_last_failure_timestamp_seconds", (("task", "bad"),))] >= t
    assert ("mdcron_task_last_success_timestamp_seconds", (("task", "bad"),)) not in got
    assert got[("mdcron_task_last_duration_seconds", (("task", "good"),))] >= 0
    assert got[("mdcron_task_runs_total", (("status", "success"), ("task", "good")))] == 1
    assert got[("mdcron_task_runs_total", (("status", "failed"), ("task", "bad")))] == 1
    assert got[("mdcron_task_suspended", (("task", "bad"),))] == 1  # max 1 failure in a row
    assert got[("mdcron_task_suspended", (("task", "good"),))] == 0
    assert got[("mdcron_task_interval_seconds", (("task", "quiet"),))] == 86400
    assert got[("mdcron_incidents_open", ())] == 1  # bad's suspension
    assert got[("mdcron_outbox_pending", ())] >= 0
    assert got[("mdcron_tick_lag_seconds", ())] == pytest.approx(7.0, abs=1.0)
    assert got[("mdcron_tick_duration_seconds", ())] > 0
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(path.parent)) == ["mdcron.prom", "mdcron.prom.tasks"]  # no temp


def test_an_idle_tick_rewrites_the_file_with_its_own_tick_figures(home, write_task):
    (home / "scheduler.yaml").write_text("metrics_file: mdcron.prom\n")
    write_task("good", command="true")
    run_cli(home, "tick", "--now", NOW)
    age(home)  # as if read 10 s ago: not "racily clean", the idle proof may trust its stat
    path = home / "mdcron.prom"
    before, inode = samples(path.read_text()), path.stat().st_ino
    tasks_file = path.with_name("mdcron.prom.tasks")
    kept = tasks_file.stat().st_mtime_ns, tasks_file.stat().st_ino
    run_cli(home, "tick", "--now", "2026-11-23T10:00:40+00:00")  # nothing due: idle
    assert (tasks_file.stat().st_mtime_ns, tasks_file.stat().st_ino) == kept  # the idle path
    after = samples(path.read_text())
    assert path.stat().st_ino != inode  # replaced by a rename, never written in place
    assert after[("mdcron_tick_lag_seconds", ())] == pytest.approx(40.0, abs=1.0)
    assert after[("mdcron_tick_last_timestamp_seconds", ())] == pytest.approx(1795428040.0,
                                                                               abs=1.0)
    tick_names = {"mdcron_tick_lag_seconds", "mdcron_tick_duration_seconds",
                  "mdcron_tick_last_timestamp_seconds"}
    assert {k: v for k, v in after.items() if k[0] not in tick_names} == {
        k: v for k, v in before.items() if k[0] not in tick_names}


def test_a_metrics_file_that_cannot_be_written_never_fails_the_tick(home, write_task):
    (home / "scheduler.yaml").write_text("metrics_file: missing/mdcron.prom\n")
    write_task("good", command="true")
    result = run_cli(home, "tick", "--now", NOW)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "metrics_file" in result.stdout and "No such file or directory" in result.stdout


def test_a_bad_metrics_file_names_the_key(home):
    (home / "scheduler.yaml").write_text("metrics_file: [a, b]\n")
    result = run_cli(home, "validate")
    assert result.returncode != 0 and "metrics_file" in result.stderr + result.stdout


def test_web_serves_the_same_figures_behind_its_token_and_on_metrics_listen(metrics_home):
    run_cli(metrics_home, "tick", "--now", NOW)
    from_file = samples((metrics_home / "prom" / "mdcron.prom").read_text())
    port = free_port()
    server = start_web(metrics_home, "--metrics-listen", f"127.0.0.1:{port}")
    try:
        assert httpx.get(f"{server.base}/metrics", timeout=30).status_code == 401
        r = httpx.get(f"{server.base}/metrics", timeout=30,
                      headers={"Authorization": f"Bearer {server.token}"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        from_web = samples(r.text)
        open_one = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
        assert open_one.status_code == 200
        assert samples(open_one.text).keys() >= from_file.keys()
    finally:
        server.stop()
    mine = {k: v for k, v in from_web.items() if k[0].startswith("mdcron_")}
    assert mine.keys() == from_file.keys()
    for key, value in from_file.items():
        assert mine[key] == pytest.approx(value), key


def test_the_tick_never_imports_prometheus_client(home, write_task):
    (home / "scheduler.yaml").write_text("metrics_file: m.prom\n")
    write_task("plain", command="true")
    probe = ("import sys\nfrom mdcron.cli.main import main\n"
             f"main(['--home', {str(home)!r}, 'tick', '--now', {NOW!r}])\n"
             "print('LOADED', 'prometheus_client' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True)
    assert "LOADED False" in out.stdout, out.stdout + out.stderr
    assert (home / "m.prom").exists()


def test_the_figures_on_both_state_back_ends(home, write_task, state_url):
    (home / "scheduler.yaml").write_text("metrics_file: mdcron.prom\n")
    write_task("good", command="true")
    write_task("bad", command="exit 4")
    env = {"MDCRON_STATE_URL": state_url} if state_url else {}
    run_cli(home, "tick", "--now", NOW, env=env)
    got = samples((home / "mdcron.prom").read_text())
    assert got[("mdcron_task_runs_total", (("status", "success"), ("task", "good")))] == 1
    assert got[("mdcron_task_runs_total", (("status", "failed"), ("task", "bad")))] == 1
    assert got[("mdcron_task_last_failure_timestamp_seconds", (("task", "bad"),))] > 0
    assert got[("mdcron_task_suspended", (("task", "bad"),))] == 0
