"""Issue 21.4 and 21.6: mdcron never writes through a symlink inside the home, and a folder
swapped for a symlink between a check and a write cannot redirect the write.

Each folder mdcron writes into (state/, state/locks, logs/, logs/runs/<id>) is replaced by a
symlink to a folder outside the home holding a victim file; after a real tick the outside
folder is byte for byte as it was, and the tick says in one line what is wrong. The heal's
writer (atomic_write_bytes) is raced by a thread that swaps its target folder for a symlink.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conftest import render_task, run_cli  # noqa: E402

from mdcron.core.safe_fs import UnsafePath  # noqa: E402
from mdcron.selfheal.tools import atomic_write_bytes  # noqa: E402
from mdcron.tasks.frontmatter_edit import write_atomic  # noqa: E402

BEFORE = "2026-11-23T09:59:00+00:00"  # the tasks are first seen here ...
NOW = "2026-11-23T10:00:00+00:00"  # ... and their 10:00 slot is due here
VICTIM = b"precious: not mdcron's\n"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under folder (relative path -> bytes)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out


def outside_with_victims(tmp_path: Path) -> Path:
    """A folder outside the home whose file names are the ones mdcron would write there."""
    outside = tmp_path / "outside"
    (outside / "a").mkdir(parents=True)
    (outside / "runs" / "a").mkdir(parents=True)
    for name in ("a.lock", "b.lock", "victim.txt", "tick.log", "a/victim.log"):
        (outside / name).write_bytes(VICTIM)
    return outside


def two_tasks(home: Path) -> None:
    for task_id in ("a", "b"):
        (home / "tasks" / f"{task_id}.md").write_text(
            render_task(task_id, schedule="0 10 * * *", command=f"echo {task_id}-ran"))


def swap_for_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize("folder", ["state/locks", "logs", "logs/runs/a", "state"])
def test_a_symlinked_folder_is_never_written_through(home: Path, tmp_path: Path, folder: str):
    outside = outside_with_victims(tmp_path)
    two_tasks(home)
    first = run_cli(home, "tick", "--now", BEFORE)
    assert first.returncode == 0, first.stderr
    before = snapshot(outside)
    link = home / folder
    swap_for_link(link, outside)

    out = run_cli(home, "tick", "--now", NOW)
    said = out.stdout + out.stderr
    assert snapshot(outside) == before, f"written outside the home through {folder}: {said}"
    assert "Traceback" not in said
    complaints = [line for line in said.splitlines() if f"{link} is a symlink" in line]
    assert complaints, said
    # one line each (paths aside: they are as long as the machine's temporary folders)
    assert all(len(line.replace(str(home), "~")) < 400 for line in complaints), complaints
    if folder == "logs/runs/a":  # only a's own log folder: b runs as usual
        assert any(line.startswith("a: ") or " a: " in line for line in complaints), said
        assert (home / "logs" / "runs" / "b").is_dir()
        logs = list((home / "logs" / "runs" / "b").iterdir())
        assert len(logs) == 1 and logs[0].read_text() == "b-ran\n"
    assert out.returncode != 0
    doctor = run_cli(home, "doctor")
    assert f"fail symlinks: {link}" in doctor.stdout, doctor.stdout
    assert snapshot(outside) == before


def test_the_heal_writer_refuses_a_folder_swapped_after_the_check(home: Path, tmp_path: Path):
    """Deterministic 21.4: the check resolved home/scripts/job.sh; the folder was swapped for a
    symlink before the write: the write is refused and nothing lands outside."""
    outside = outside_with_victims(tmp_path)
    scripts = home / "scripts"
    scripts.mkdir()
    (scripts / "job.sh").write_text("echo old\n")
    checked = Path(os.path.realpath(scripts / "job.sh"))  # what the sandbox's check returns
    before = snapshot(outside)
    scripts.rename(home / "scripts.moved")
    scripts.symlink_to(outside)
    with pytest.raises(UnsafePath, match="is a symlink"):
        atomic_write_bytes(checked, b"echo new\n")
    with pytest.raises(UnsafePath, match="is a symlink"):
        atomic_write_bytes(checked, b"echo new\n", root=Path(os.path.realpath(home)))
    with pytest.raises(UnsafePath, match="is a symlink"):
        write_atomic(checked, "echo new\n", root=Path(os.path.realpath(home)))
    assert snapshot(outside) == before
    assert not (outside / "job.sh").exists()
    assert (home / "scripts.moved" / "job.sh").read_text() == "echo old\n"


def test_the_heal_writer_raced_by_a_folder_swap_never_writes_outside(home: Path,
                                                                    tmp_path: Path):
    """21.4 as reported: a same-user process swaps the heal's target folder for a symlink in a
    tight loop while the heal writes 200 times."""
    outside = outside_with_victims(tmp_path)
    scripts = home / "scripts"
    scripts.mkdir()
    (scripts / "job.sh").write_text("echo old\n")
    checked = Path(os.path.realpath(scripts / "job.sh"))
    real_dir = home / "scripts.real"
    before = snapshot(outside)
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        while not stop.is_set():
            os.rename(scripts, real_dir)
            os.symlink(outside, scripts)
            stop.wait(0.0005)  # each state lasts long enough for writes to meet it
            os.unlink(scripts)
            os.rename(real_dir, scripts)
            stop.wait(0.0005)
            swaps += 1

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    written = refused = 0
    try:
        for i in range(200):
            try:
                atomic_write_bytes(checked, f"echo {i}\n".encode())
                written += 1
            except (UnsafePath, FileNotFoundError):
                refused += 1  # the folder was away or a link at that instant
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert swaps > 0 and written + refused == 200
    assert snapshot(outside) == before, "a heal write landed outside the home"
    atomic_write_bytes(checked, b"echo after\n")  # the folder back in place: writes go through
    assert (scripts / "job.sh").read_bytes() == b"echo after\n"
    leftovers = [p.name for p in scripts.iterdir() if p.name != "job.sh"]
    assert leftovers == []  # no temporary file left behind either
