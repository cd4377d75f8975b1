"""A person saves a task file while the tick reads it, and while the scheduler writes
`enabled: false` into it. The saves come from another process (an editor that renames a new file
over the old one, or one that writes in place), landing at random moments of our read or edit."""

from __future__ import annotations

import subprocess
import sys

import pytest
from faultlib import (
    BEFORE,
    query,
    run_cli,
    wait_until,
    write_tasks,
)
from scenarios import Editor, edit_race, flip_version, race_version, read_race

from mdcron.tasks.frontmatter_edit import set_keys


@pytest.mark.parametrize("mode", ["rename", "inplace"])
def test_scheduler_edit_never_overwrites_a_save_it_did_not_read(home, mode):
    tally = edit_race(home, 120, mode)
    print(tally)
    assert tally.lost == 0, tally.failures
    assert tally.notes.get("edited", 0) >= 100  # the edit went through nearly every time


@pytest.mark.parametrize("mode", ["rename", "inplace"])
def test_reading_a_file_mid_save_gives_one_version_never_a_mix(home, mode):
    tally = read_race(home, 300, mode)
    print(tally)
    assert tally.lost == 0, tally.failures
    if mode == "rename":
        assert "error for the file" not in tally.notes


def test_disable_command_during_saves_keeps_the_persons_edit(home):
    """`disable` through the CLI while the person saves at a random moment of it."""
    import random

    rng = random.Random(3)
    path = home / "tasks" / "race.md"
    path.write_text(race_version(0), encoding="utf-8")
    editor = Editor(path)
    try:
        for i in range(1, 7):
            editor.save(race_version(i - 1))
            editor.saved()
            editor.save(race_version(i), delay=rng.uniform(0.2, 0.6))  # CLI start-up ~0.3 s
            out = run_cli(home, "disable", "race")
            editor.saved()
            final = path.read_text(encoding="utf-8")
            mine = set_keys(race_version(i), {"enabled": False, "disabled_reason": "by_choice"})
            assert final in (race_version(i), mine), (out.stdout, out.stderr, final)
    finally:
        editor.close()


FLIPPER = r"""
import os, sys, time
path, stop, mode, a, b = sys.argv[1:]
versions = [open(a, "rb").read(), open(b, "rb").read()]
n = 0
while not os.path.exists(stop):
    data = versions[n % 2]
    if mode == "rename":
        tmp = path + ".tmp~"
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, path)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, data)
        os.close(fd)
    n += 1
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
print(n)
"""


@pytest.mark.parametrize("mode", ["rename", "inplace"])
def test_ticks_while_a_task_file_keeps_being_saved(home, mode):
    """Real ticks while one file flips between two versions hundreds of times a second: every
    run of it is one version or the other; every other task runs every minute."""
    marks = home / "marks"
    marks.mkdir()
    ids = write_tasks(home, 10, command=f"echo x >> {marks}/{{id}}")
    versions = home / "versions"
    versions.mkdir()
    for letter in "AB":
        (versions / letter).write_text(flip_version(letter), encoding="utf-8")
    path = home / "tasks" / "flip.md"
    path.write_text(flip_version("A"), encoding="utf-8")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    stop = home / "stop"
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(path), str(stop), mode, str(versions / "A"),
         str(versions / "B")], stdout=subprocess.PIPE, text=True)
    outs = []
    try:
        wait_until(lambda: path.read_bytes() != (versions / "A").read_bytes(), "flipping")
        for minute in range(5):
            out = run_cli(home, "tick", "--now", f"2026-11-23T10:0{minute}:00+00:00")
            assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr
            if mode == "rename":
                assert out.returncode == 0, out.stdout + out.stderr
            outs.append(out)
    finally:
        stop.touch()
        flips = int(flipper.communicate(timeout=30)[0])
    assert flips > 50
    for task_id in ids:
        assert (marks / task_id).read_text() == "x\n" * 6  # 09:59 (first seen) + five
    tails = [r[0].strip() for r in query(
        home, "SELECT output_tail FROM runs WHERE task_id = 'flip' AND status = 'success'")]
    assert tails and all(t in ("A" * 3000, "B" * 1800) for t in tails)
