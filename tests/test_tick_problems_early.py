"""An invalid task file is reported when the tick finds it, before its runs (issue 25 item
13): said while a slow task of the same tick still runs. Real tick, output to a file as cron's
shell would; the task waits for a file the test creates."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from conftest import SCHEDULER

NOW = "2026-11-23T10:00:00+00:00"


def test_an_invalid_file_is_said_before_a_slow_task_ends(home, write_task):
    go = home / "go"
    write_task("long", command=f"while [ ! -e {go} ]; do sleep 0.05; done", timeout=120)
    (home / "tasks" / "broken.md").write_text("---\nid: broken\nschedule: \"61 * * * *\"\n"
                                             "command: echo\n---\n")
    log = home / "tick.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    with open(log, "ab") as out:
        tick = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                                 "--now", NOW], stdout=out, stderr=out, env=env)
    try:
        give_up = time.monotonic() + 30
        while "broken.md" not in log.read_text():
            assert tick.poll() is None, log.read_text()
            assert time.monotonic() < give_up, "the invalid file was not said while it ran"
            time.sleep(0.05)
        assert tick.poll() is None
    finally:
        go.write_text("")
        assert tick.wait(60) == 1
    text = log.read_text()
    assert text.count("broken.md") == 1, text  # said once, not again at the end
    assert text.index("broken.md") < text.index("long: success"), text
