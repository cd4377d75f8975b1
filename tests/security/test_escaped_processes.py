"""Issue 21 item 7: no process outlives its run. A grandchild that calls setsid() leaves the task's
process group; it must still end with the run (timeout or the leader's exit), and after a tick
killed with -9 the next tick must find it, kill it, free the task's lock and `uses:` unit, and
name it in the alert. Each test runs with the run's cgroup (when this machine lets the tick make
one) and with the mark alone (MDCRON_CGROUP=off), real ticks in real processes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "faults"))

from faultlib import (  # noqa: E402
    BEFORE,
    NOW,
    held_locks,
    lock_pgid,
    pid_alive,
    run_cli,
    start_tick,
    wait_until,
)

from mdcron.run.proctree import MARK_ENV, cgroup_base  # noqa: E402

MODES = ["cgroup", "mark"]


def mode_env(mode: str) -> dict[str, str]:
    if mode == "cgroup":
        if cgroup_base() is None:
            pytest.skip("this machine gives the tick no writable cgroup v2 (the mark is tested)")
        return {}
    return {"MDCRON_CGROUP": "off"}


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries TESTTAG=<tag> (every process of the task)."""
    needle = f"\0TESTTAG={tag}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = b"\0" + Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if needle in env and pid_alive(int(name)):
            found.append(int(name))
    return found


def kill_quietly(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def escaping(pidfile: Path) -> str:
    """Shell: a grandchild in a new session (setsid), its pid written once it runs."""
    return f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300' &"


def wait_pidfile(path: Path) -> int:
    wait_until(lambda: path.exists() and path.read_text().strip(), f"{path.name} written")
    return int(path.read_text())


def statuses(home: Path, task_id: str) -> list[tuple[str, str]]:
    db = sqlite3.connect(home / "state" / "mdcron.db", timeout=60)
    try:
        return db.execute("SELECT status, coalesce(error, '') FROM runs WHERE task_id = ?"
                          " ORDER BY id", (task_id,)).fetchall()
    finally:
        db.close()


def unit_held(home: Path, name: str) -> bool:
    fd = os.open(home / "state" / "resources" / f"{name}.0.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@pytest.mark.parametrize("mode", MODES)
def test_setsid_grandchild_dies_with_a_timed_out_run(home, write_task, mode):
    env, tag, gc = mode_env(mode), uuid.uuid4().hex, home / "gc.pid"
    (home / "scheduler.yaml").write_text("timezone: UTC\nkill_grace: 1\n")
    write_task("slow", schedule="0 10 * * *", timeout=3, env={"TESTTAG": tag},
               command=f"{escaping(gc)} sleep 300")
    try:
        assert run_cli(home, "tick", "--now", BEFORE, env=env).returncode == 0
        out = run_cli(home, "tick", "--now", NOW, env=env)
        assert out.returncode in (0, 1), out.stdout + out.stderr
        assert statuses(home, "slow")[0][0] == "timeout"
        grandchild = int(gc.read_text())
        assert not pid_alive(grandchild), "the setsid grandchild outlived the run"
        assert tagged(tag) == []
        assert held_locks(home) == []
        log = next((home / "logs" / "runs" / "slow").glob("*.log")).read_text()
        assert f"pid {grandchild} (sleep 300)" in log  # the run's log names what it ended
    finally:
        kill_quietly(tagged(tag))


@pytest.mark.parametrize("mode", MODES)
def test_setsid_grandchild_dies_when_its_leader_exits(home, write_task, mode):
    env, tag, gc = mode_env(mode), uuid.uuid4().hex, home / "gc.pid"
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    write_task("quick", schedule="0 10 * * *", timeout=120, env={"TESTTAG": tag},
               command=f"{escaping(gc)} while [ ! -s {gc} ]; do sleep 0.01; done")
    try:
        assert run_cli(home, "tick", "--now", BEFORE, env=env).returncode == 0
        out = run_cli(home, "tick", "--now", NOW, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        assert statuses(home, "quick")[0][0] == "success"
        assert not pid_alive(int(gc.read_text())), "the setsid grandchild outlived the run"
        assert tagged(tag) == []
        assert held_locks(home) == []
    finally:
        kill_quietly(tagged(tag))


@pytest.mark.parametrize("mode", MODES)
def test_term_ignoring_grandchild_that_clears_its_environment_dies_at_timeout(home, write_task,
                                                                             mode):
    """No mark to find it by (env -i), deaf to TERM, in a new session: found through its parent
    (the leader lives at the timeout), or its cgroup, and killed after the grace."""
    env, gc = mode_env(mode), home / "gc.pid"
    (home / "scheduler.yaml").write_text("timezone: UTC\nkill_grace: 1\n")
    write_task("deaf", schedule="0 10 * * *", timeout=3, command=(
        f"setsid env -i sh -c 'trap \"\" TERM; echo $$ > {gc}.tmp; mv {gc}.tmp {gc};"
        f" exec sleep 301' & sleep 300"))
    grandchild = None
    try:
        assert run_cli(home, "tick", "--now", BEFORE, env=env).returncode == 0
        out = run_cli(home, "tick", "--now", NOW, env=env)
        assert statuses(home, "deaf")[0][0] == "timeout", out.stdout + out.stderr
        grandchild = int(gc.read_text())
        assert not pid_alive(grandchild), "the grandchild outlived the run"
        assert held_locks(home) == []
    finally:
        if grandchild is not None:
            kill_quietly([grandchild])


@pytest.mark.parametrize("mode", MODES)
def test_a_grandchild_that_clears_its_environment_ends_with_its_leader(home, write_task, mode):
    """No mark, a new session, and the leader exits normally. The cgroup knows it; without one,
    the tick looks at the leader's descendants each second while it runs and remembers them
    (the leader lives 3 s after its grandchild started here: the limit in the README is a
    process that escapes and is orphaned between two looks)."""
    env, gc = mode_env(mode), home / "gc.pid"
    (home / "scheduler.yaml").write_text("timezone: UTC\n")
    write_task("bare", schedule="0 10 * * *", timeout=120, command=(
        f"setsid env -i sh -c 'echo $$ > {gc}.tmp; mv {gc}.tmp {gc}; exec sleep 302' &"
        f" while [ ! -s {gc} ]; do sleep 0.01; done; sleep 3"))
    grandchild = None
    try:
        assert run_cli(home, "tick", "--now", BEFORE, env=env).returncode == 0
        out = run_cli(home, "tick", "--now", NOW, env=env)
        assert statuses(home, "bare")[0][0] == "success", out.stdout + out.stderr
        grandchild = int(gc.read_text())
        assert not pid_alive(grandchild), "the grandchild outlived the run"
    finally:
        if grandchild is not None:
            kill_quietly([grandchild])


def killed_tick_scenario(home: Path, write_task, env: dict[str, str], tag: str,
                         notify: str = ""):
    """A tick killed with -9 while `hold` (uses: gpu) runs, whose grandchild called setsid;
    then its leader ends. Returns (grandchild pid, leader pid): the lock and the unit are
    still held by the grandchild alone."""
    gc, release = home / "gc.pid", home / "release"
    (home / "scheduler.yaml").write_text(f"timezone: UTC\nresources: {{gpu: 1}}\n{notify}")
    write_task("hold", schedule="0 10 * * *", timeout=300, uses=["gpu"], env={"TESTTAG": tag},
               command=f"{escaping(gc)} while [ ! -e {release} ]; do sleep 0.02; done")
    write_task("other", schedule="1 10 * * *", timeout=60, uses=["gpu"], on_busy="skip",
               command="true")
    assert run_cli(home, "tick", "--now", BEFORE, env=env).returncode == 0
    tick = start_tick(home, NOW, env=env)
    try:
        grandchild = wait_pidfile(gc)
        wait_until(lambda: lock_pgid(home, "hold"), "the lock names the task's group")
        leader = lock_pgid(home, "hold")
    finally:
        tick.send_signal(signal.SIGKILL)
        tick.communicate()
    release.touch()
    wait_until(lambda: not pid_alive(leader), "the task's leader exited")
    assert pid_alive(grandchild)
    assert held_locks(home) == ["hold"] and unit_held(home, "gpu")  # by the grandchild alone
    return grandchild, leader


@pytest.mark.parametrize("mode", MODES)
def test_next_tick_kills_what_a_killed_tick_left_and_frees_lock_and_unit(home, write_task, mode,
                                                                        http_sink):
    env, tag = mode_env(mode), uuid.uuid4().hex
    notify = f"notify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n"
    try:
        grandchild, _ = killed_tick_scenario(home, write_task, env, tag, notify)
        out = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00", env=env)
        assert out.returncode in (0, 1), out.stdout + out.stderr
        assert not pid_alive(grandchild), out.stdout + out.stderr
        assert tagged(tag) == []
        assert held_locks(home) == [] and not unit_held(home, "gpu")
        status, error = statuses(home, "hold")[0]
        assert status == "crashed" and f"pid {grandchild} (sleep 300)" in error, error
        assert [s for s, _ in statuses(home, "other")] == ["success"]  # the unit was free
        alerts = [json.dumps(b) for b in http_sink.bodies()]  # the alert as it went out
        assert len(alerts) == 1 and "hold" in alerts[0], alerts
        assert f"pid {grandchild} (sleep 300)" in alerts[0], alerts
        # the next slot of the task runs as usual
        out = run_cli(home, "tick", "--now", "2026-11-24T10:00:00+00:00", env=env)
        assert statuses(home, "hold")[-1][0] == "success", out.stdout + out.stderr
    finally:
        kill_quietly(tagged(tag))


def test_a_forged_mark_does_not_get_a_bystander_killed(home, write_task):
    """Without a cgroup the mark decides. A process of another user started with the exact mark
    of the over run (copied from the grandchild's environment) is not the run's: the next tick
    kills the grandchild and leaves the bystander alone. (With a cgroup marks are not read.)"""
    if os.geteuid() != 0:
        pytest.skip("needs root: the bystander runs as another user")
    env, tag = mode_env("mark"), uuid.uuid4().hex
    bystander = None
    try:
        grandchild, _ = killed_tick_scenario(home, write_task, env, tag)
        environ = Path(f"/proc/{grandchild}/environ").read_bytes().split(b"\0")
        mark = next(v.split(b"=", 1)[1].decode() for v in environ
                    if v.startswith(MARK_ENV.encode() + b"="))
        forged = {MARK_ENV: mark, "PATH": "/usr/bin:/bin"}
        bystander = subprocess.Popen(["sleep", "300"], env=forged, user=65534, group=65534,
                                     start_new_session=True)
        cmdline = Path(f"/proc/{bystander.pid}/cmdline")
        wait_until(lambda: cmdline.read_bytes().startswith(b"sleep"), "the bystander runs")
        out = run_cli(home, "tick", "--now", "2026-11-23T10:01:00+00:00", env=env)
        assert out.returncode in (0, 1), out.stdout + out.stderr
        assert not pid_alive(grandchild)
        assert bystander.poll() is None, "the bystander with a forged mark was killed"
        assert f"pid {bystander.pid}" not in statuses(home, "hold")[0][1]
    finally:
        kill_quietly(tagged(tag))
        if bystander is not None:
            bystander.kill()
            bystander.wait()
