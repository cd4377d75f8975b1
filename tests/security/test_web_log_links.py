"""A run's log replaced by a symlink (or a FIFO) pointing out of logs/: the dashboard's live
tail and its raw download never follow it out of the logs folder and never hang on it."""

from __future__ import annotations

import os

from conftest import run_cli
from web_server import bearer_client_fixture, server_fixture  # noqa: F401  (fixtures)


def test_a_log_swapped_for_a_link_out_of_logs_is_not_followed(home, write_task, tmp_path,
                                                              server, client):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE\n")
    write_task("talk", command="echo ordinary output")
    assert run_cli(home, "run", "talk").returncode == 0
    [run] = client.get("/api/history?task=talk").json()["runs"]
    log = home / "logs" / "runs" / "talk"
    [path] = [p for p in log.rglob("*.log")]
    path.unlink()
    path.symlink_to(secret)
    tail = client.get(f"/api/runs/{run['run_id']}/log?offset=0")
    raw = client.get(f"/runs/{run['run_id']}/log.txt")
    page = client.get(f"/runs/{run['run_id']}")
    for answer in (tail, raw, page):
        assert answer.status_code == 200 and "TOP-SECRET" not in answer.text, answer.text
    path.unlink()
    os.mkfifo(path)  # a FIFO in its place: answered at once, not waited on
    assert client.get(f"/runs/{run['run_id']}/log.txt", timeout=10).status_code == 200
    assert client.get(f"/api/runs/{run['run_id']}/log?offset=0", timeout=10).status_code == 200
