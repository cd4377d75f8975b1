"""Every command exits quietly when its reader goes away (`list --json | head -c 300`): no
traceback, the command's own exit status, and a tick still does all its work."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import SCHEDULER, run_cli

BEFORE, AT = "2026-11-23T09:59:00+00:00", "2026-11-23T10:00:00+00:00"
COMMANDS = [
    ["list"], ["list", "--json"], ["history"], ["history", "--json"], ["next", "ok"],
    ["next", "ok", "--json"], ["next", "*/5 * * * *", "-n", "50"], ["validate"],
    ["validate", "--json"], ["why", "ok"], ["show", "bad"], ["show", "bad", "--json"],
    ["logs", "ok"], ["incidents", "--all"], ["incidents", "--json"], ["comments", "ok"],
    ["comments", "ok", "--json"], ["doctor"], ["doctor", "--json"],
    ["tick", "--now", AT, "--dry-run"], ["run", "ok"], ["show", "nonexistent"], ["--help"],
]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MDCRON_", "ANTHROPIC_"))}


def closed_reader(home, args: list[str], both: bool = False) -> subprocess.CompletedProcess:
    """Run the CLI with stdout (and stderr, when `both`) a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, str(SCHEDULER), "--home", str(home), *args],
            stdout=write, stderr=write if both else subprocess.PIPE, text=True, env=env(),
            timeout=60,
        )
    finally:
        os.close(write)


@pytest.fixture
def busy_home(home, write_task):
    for i in range(60):  # more than a pipe's buffer of `list --json`
        write_task(f"job-{i:02d}", schedule="0 10 * * *", command="echo hi", title="x" * 200)
    write_task("ok", schedule="0 10 * * *", command="echo fine")
    write_task("bad", schedule="0 10 * * *", command="echo broken; exit 2")
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", AT)
    run_cli(home, "comment", "ok", "hello")
    return home


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_output_quietly(busy_home, args):
    normal = run_cli(busy_home, *args, env=env())
    cut = closed_reader(busy_home, args)
    assert "Traceback" not in cut.stderr and "BrokenPipe" not in cut.stderr, cut.stderr
    assert cut.returncode == normal.returncode


def test_head_reads_the_first_bytes_of_a_long_listing(busy_home):
    shell = (f"set -o pipefail; {sys.executable} {SCHEDULER} --home {busy_home} list --json"
             " | head -c 300")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env(),
                          timeout=60)
    assert len(done.stdout) == 300 and done.stdout.startswith("[")
    assert done.stderr == "" and done.returncode == 0


def test_a_tick_whose_output_is_gone_still_runs_everything(home, write_task):
    for i in range(40):
        write_task(f"t{i:02d}", schedule="0 10 * * *", command="echo fine")
    write_task("bad", schedule="0 10 * * *", command="exit 2")
    run_cli(home, "tick", "--now", BEFORE)
    done = closed_reader(home, ["tick", "--now", AT], both=True)
    assert done.returncode == 1  # a task failed: the tick's own status
    rows = json.loads(run_cli(home, "history", "-n", "100", "--json").stdout)
    assert len(rows) == 41 and all(r["status"] != "running" for r in rows)
