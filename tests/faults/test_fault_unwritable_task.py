"""Issue 22 item 8: a task file mdcron cannot write (chattr +i, a read-only mount) can still be
suspended: the suspension is held in the state, said once, honoured by every tick, shown by
list/show/doctor, and lifted by `enable`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faultlib import NOW, doctor, run_cli

TICKS = ["2026-11-23T10:01:00+00:00", "2026-11-23T10:02:00+00:00", "2026-11-23T10:03:00+00:00"]


@contextmanager
def immutable(home: Path, path: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


@contextmanager
def read_only_mount(home: Path, path: Path) -> Iterator[None]:
    folder = str(path.parent)
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    if subprocess.run(["mount", "--bind", folder, folder], capture_output=True).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        done = subprocess.run(["mount", "-o", "remount,ro,bind", folder], capture_output=True)
        if done.returncode:
            pytest.skip(f"cannot remount read-only here: {done.stderr.decode()[:200]}")
        yield
    finally:
        subprocess.run(["umount", "-l", folder], check=False)


def ran(home: Path) -> int:
    marks = home / "ran"
    return len(marks.read_text().split()) if marks.exists() else 0


@pytest.mark.parametrize("lock", [immutable, read_only_mount], ids=["chattr", "ro-mount"])
def test_a_task_file_that_cannot_take_the_suspension_is_held_in_the_state(home, write_task,
                                                                          http_sink, lock):
    (home / "scheduler.yaml").write_text(
        "max_consecutive_failures: 1\n"
        f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/hook')}\"\n"
        "  collapse_window: 0\n")
    path = write_task("flaky", schedule="* * * * *", command=f"echo x >> {home}/ran; false")
    with lock(home, path):
        first = run_cli(home, "tick", "--now", NOW)
        assert first.returncode == 1 and "Traceback" not in first.stderr, first.stderr
        assert ran(home) == 1
        for when in TICKS:  # suspended: not run again, not alerted again
            out = run_cli(home, "tick", "--now", when)
            assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
        assert ran(home) == 1
        sent = [r.json for r in http_sink.requests if r.path == "/hook"]
        assert len(sent) == 1, sent
        assert "SUSPENDED" in sent[0]["title"]
        why = {immutable: "read-only: immutable", read_only_mount: "read-only filesystem"}[lock]
        assert (f"could not write tasks/flaky.md ({why})" in sent[0]["message"]
                and "recorded in the state" in sent[0]["message"]
                and "`scheduler.py enable flaky` lifts it" in sent[0]["message"]), sent[0]
        listed = json.loads(run_cli(home, "list", "--json").stdout)
        [row] = [r for r in listed if r["id"] == "flaky"]
        assert row["enabled"] is False and "held in the state" in row["disabled_reason"]
        shown = run_cli(home, "show", "flaky").stdout
        assert ("suspended since 2026-11-23 10:00 UTC, held in the state: tasks/flaky.md could"
                f" not be written ({why}); `scheduler.py enable flaky` lifts it") in " ".join(
                    shown.split()), shown
        assert any(line.startswith("warn task flaky") and "held in the state" in line
                   for line in doctor(home).stdout.splitlines())
        enabled = run_cli(home, "enable", "flaky")
        assert enabled.returncode == 0, enabled.stdout + enabled.stderr
        run_cli(home, "tick", "--now", "2026-11-23T10:05:00+00:00")
        assert ran(home) == 2  # enable lifted it
