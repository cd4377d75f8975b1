"""`logs/tick.log` is rotated by size by the tick itself (issue 25 item 9): real ticks started
the way cron's shell starts them (`>> logs/tick.log 2>&1`), several at once."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import SCHEDULER

from mdcron.run.tick_log_size import LIMIT

NOW = "2026-11-23T10:00:00+00:00"


def start_tick(home, now: str = NOW) -> subprocess.Popen:
    """As the crontab line: the shell opens logs/tick.log for appending, stdout and stderr."""
    log = os.open(home / "logs" / "tick.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    try:
        return subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                                 "--now", now], stdout=log, stderr=log, env=env)
    finally:
        os.close(log)


def big_log(home, extra: int = 0) -> int:
    (home / "logs").mkdir(exist_ok=True)
    size = LIMIT + extra
    with open(home / "logs" / "tick.log", "ab") as fh:
        fh.truncate(size)  # sparse: st_size is what counts
    return size


def test_a_tick_rotates_a_full_tick_log_and_writes_into_the_new_one(home, write_task):
    write_task("job", command="echo hi")
    size = big_log(home)
    assert start_tick(home).wait(60) == 0
    logs = home / "logs"
    assert (logs / "tick.log.1").stat().st_size == size  # nothing of this tick went there
    text = (logs / "tick.log").read_text()
    assert "reached 10.0 MiB" in text and "job: success" in text, text
    assert oct((logs / "tick.log").stat().st_mode & 0o777) == "0o600"


def test_concurrent_ticks_rotate_once_and_keep_three(home, write_task):
    write_task("job", command="echo hi")
    size = big_log(home, 7)
    ticks = [start_tick(home) for _ in range(4)]  # one runs the slot; each saw a full log
    assert [t.wait(120) for t in ticks] == [0, 0, 0, 0]
    logs = home / "logs"
    assert (logs / "tick.log.1").stat().st_size == size  # no tick wrote into the old file
    assert not (logs / "tick.log.2").exists()
    text = (logs / "tick.log").read_text()
    assert text.count("reached 10.0 MiB") == 1, text
    assert text.count("job: success") == 1, text
    for n in range(4):  # three more rotations: .1 .2 .3 kept, no .4
        big_log(home)
        assert start_tick(home, f"2026-11-23T10:0{n + 1}:00+00:00").wait(60) == 0
    assert sorted(p.name for p in logs.glob("tick.log*")) == [
        "tick.log", "tick.log.1", "tick.log.2", "tick.log.3"]
    assert (logs / "tick.log").stat().st_size < 4096
