"""The daemon's held tick (issue 27, cli/warm.py): started ahead of its minute, warmed, told to
go through a pipe. These tests play the daemon's part with a real pipe and a real child; the
child is told to go once it is blocked reading the pipe (/proc/<pid>/syscall), so the change
made before the go is one made while it waited, as in the last second before a minute. The
daemon's side (go at the boundary, a stale tick replaced) runs over one real minute (slow)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, SCHEDULER, run_cli
from conftest import age_cache as age

T0 = "2026-11-23T09:00:00+00:00"
T1 = "2026-11-23T09:01:00+00:00"
EX_STALE = 75


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}


def _task(home: Path, task_id: str, command: str) -> None:
    (home / "tasks" / f"{task_id}.md").write_text(
        f"---\nid: {task_id}\nschedule: \"* * * * *\"\ntimezone: UTC\ncommand: {command!r}\n"
        f"---\n\n# {task_id}\n", encoding="utf-8")


class Held:
    """`tick --warm-fd N` started as the daemon starts it; go() and drop() as the daemon."""

    def __init__(self, home: Path, *extra: str, script: Path = SCHEDULER) -> None:
        read_end, self.write_end = os.pipe()
        self.fd = read_end
        self.proc = subprocess.Popen(
            [sys.executable, str(script), "tick", "--home", str(home), *extra,
             "--warm-fd", str(read_end)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(), pass_fds=(read_end,))
        os.close(read_end)

    def wait_held(self, seconds: float = 60.0) -> None:
        """Until the child blocks on its end of the pipe, warmed: in read(), or, held for a
        real minute (no --now), in the select that waits for it until just before that
        minute (cli/warm._wait: pselect6 or select, the pipe's fd + 1 first). Waiting for the
        read alone waited out the minute: up to 60 s, the whole of this wait's deadline."""
        want = (f"0 {hex(self.fd)} ", f"270 {hex(self.fd + 1)} ", f"23 {hex(self.fd + 1)} ")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.proc.communicate()
            try:
                if Path(f"/proc/{self.proc.pid}/syscall").read_text().startswith(want):
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError("the held tick never waited on its pipe")

    def go(self) -> tuple[int, str, str]:
        os.write(self.write_end, b"g")
        os.close(self.write_end)
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err

    def drop(self) -> tuple[int, str, str]:
        os.close(self.write_end)
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err


def test_a_task_file_changed_while_the_tick_waited_runs_as_changed(home):
    _task(home, "a", f"echo one > {home}/out")
    _task(home, "c", f"echo c > {home}/c-out")
    assert run_cli(home, "tick", "--now", T0).returncode == 0  # first seen
    (home / "c-out").unlink()
    age(home)  # the cached row is trusted unless the file's stat changed since
    held = Held(home, "--now", T1)
    held.wait_held()
    (home / "tasks" / "c.md").unlink()  # removed while it waited: it does not run
    _task(home, "a", f"echo two > {home}/out")  # in the last moment before the minute
    _task(home, "b", f"echo b > {home}/b-out")  # new, due at this minute: it runs now
    code, out, err = held.go()
    assert code == 0, out + err
    assert (home / "out").read_text() == "two\n"
    assert (home / "b-out").read_text() == "b\n"
    assert not (home / "c-out").exists()
    listed = {r["id"]: r for r in json.loads(run_cli(home, "list", "--json").stdout)}
    assert set(listed) == {"a", "b"}


def test_a_config_changed_while_the_tick_waited_makes_it_stale_and_it_runs_nothing(home):
    (home / "scheduler.yaml").write_text("timezone: UTC\n", encoding="utf-8")
    _task(home, "a", f"echo one > {home}/out")
    assert run_cli(home, "tick", "--now", T0).returncode == 0
    (home / "out").unlink(missing_ok=True)  # T0's run: only T1's counts below
    held = Held(home, "--now", T1)
    held.wait_held()
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 2\n", encoding="utf-8")
    code, out, err = held.go()
    assert (code, out, err) == (EX_STALE, "", "")
    assert not (home / "out").exists()
    assert run_cli(home, "tick", "--now", T1).returncode == 0  # the fresh tick in its place
    assert (home / "out").read_text() == "one\n"


def test_updated_code_makes_a_held_tick_stale(home, tmp_path):
    """The code is a copy here, so that one of its modules can be touched."""
    code = tmp_path / "code"
    shutil.copytree(REPO / "mdcron", code / "mdcron",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(SCHEDULER, code / "scheduler.py")
    _task(home, "a", f"echo one > {home}/out")
    held = Held(home, "--now", T1, script=code / "scheduler.py")
    held.wait_held()
    module = code / "mdcron" / "run" / "tick.py"
    module.write_text(module.read_text(encoding="utf-8") + "\n# updated\n", encoding="utf-8")
    code_, out, err = held.go()
    assert (code_, out, err) == (EX_STALE, "", "")
    assert not (home / "out").exists()


def test_a_dropped_tick_does_nothing(home):
    _task(home, "a", f"echo one > {home}/out")
    assert run_cli(home, "tick", "--now", T0).returncode == 0
    (home / "out").unlink(missing_ok=True)  # T0's run: only T1's counts below
    held = Held(home, "--now", T1)
    held.wait_held()
    code, out, err = held.drop()
    assert (code, out, err) == (EX_STALE, "", "")
    assert not (home / "out").exists()


def test_an_idle_minute_ahead_keeps_the_held_tick_small_and_still_sees_new_files(home,
                                                                                tmp_path):
    """Nothing due at the next real minute: the held tick stays the idle path's small process
    (smaller than one warmed for work); a task written while it waited is still seen at the
    go (the idle proof fails, the full tick observes it)."""
    (home / "tasks" / "yearly.md").write_text(
        "---\nid: yearly\nschedule: \"0 0 1 1 *\"\ntimezone: UTC\ncommand: 'true'\n---\n",
        encoding="utf-8")
    assert run_cli(home, "tick").returncode == 0  # state and cache for the idle proof
    age(home)
    light = Held(home)
    light.wait_held()
    busy = tmp_path / "busy"  # a home with work every minute: its held tick is warmed
    (busy / "tasks").mkdir(parents=True)
    _task(busy, "every", "true")
    assert run_cli(busy, "tick").returncode == 0
    warmed = Held(busy)
    warmed.wait_held()
    assert _rss_kib(light.proc.pid) + 4096 < _rss_kib(warmed.proc.pid)
    assert warmed.drop()[0] == EX_STALE
    _task(home, "a", f"echo one > {home}/out")
    code, out, err = light.go()
    assert code == 0 and err == "", out + err
    db = sqlite3.connect(home / "state" / "mdcron.db")
    assert db.execute("SELECT count(*) FROM task_state WHERE task_id = 'a'").fetchone() == (1,)
    db.close()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_the_daemon_replaces_a_held_tick_whose_config_changed(home):
    """One real minute boundary (at most ~75 s): the config changes while the next minute's
    tick is held; at the minute that tick refuses, the daemon starts a fresh one, which runs
    the minute's slot with the new config."""
    (home / "scheduler.yaml").write_text("timezone: UTC\n", encoding="utf-8")
    _task(home, "a", f"date +%s.%N >> {home}/out")
    proc = subprocess.Popen(
        [sys.executable, str(SCHEDULER), "daemon", "--home", str(home), "--log-format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
    seen: list[dict] = []
    try:
        held = None
        end = time.monotonic() + 80
        while held is None and time.monotonic() < end:  # warmed: blocked reading its pipe
            for pid in _children(proc.pid):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
                    fd = int(argv[argv.index("--warm-fd") + 1])
                    call = Path(f"/proc/{pid}/syscall").read_text()
                except (OSError, ValueError):
                    continue
                # reading its pipe, or waiting on it for its boundary (cli/warm._came: a
                # pselect6 whose first argument is the pipe's fd + 1)
                if call.startswith((f"0 {hex(fd)} ", f"270 {hex(fd + 1)} ")):
                    held = pid
            time.sleep(0.05)
        assert held is not None, "no held tick before the minute"
        (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 3\n",
                                             encoding="utf-8")
        assert proc.stdout is not None
        fresh = None
        while time.monotonic() < end:
            line = proc.stdout.readline()
            if line.startswith("{"):
                event = json.loads(line)
                seen.append(event)
                if event.get("reason") == "replaces a stale warm tick":
                    fresh = event["pid"]
                if event["event"] == "tick ended" and event["pid"] == fresh:
                    break
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    names = [(e["event"], e.get("reason")) for e in seen]
    assert ("tick replaced", None) in names, (names, out)
    assert ("tick started", "replaces a stale warm tick") in names, (names, out)
    assert (home / "out").exists(), (names, out)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]
