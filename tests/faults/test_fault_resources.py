"""Resources: a task that prints a gigabyte, a disk that fills up under the logs, and a state
database that is missing, read-only or damaged."""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from faultlib import (
    BEFORE,
    NOW,
    SCHEDULER,
    db_path,
    doctor,
    integrity,
    peak_rss_of_tick,
    query,
    run_cli,
)

from mdcron.cli.emergency import store_error_alert
from mdcron.settings.config import load_config

GIB = 1 << 30


def test_a_gigabyte_of_output_is_capped_in_the_log_memory_and_database(home, write_task):
    write_task("small", schedule="0 10 * * *", command="echo hi")
    run_cli(home, "tick", "--now", BEFORE)
    rc, out, err, baseline = peak_rss_of_tick(home, NOW)
    assert rc == 0, out + err
    line = "0123456789abcdef" * 4 + "\n"
    write_task("lines", schedule="0 11 * * *", timeout=300,
               command=f"yes {line.strip()} | head -c {GIB}")
    write_task("oneline", schedule="0 11 * * *", timeout=300, command=f"head -c {GIB} /dev/zero")
    run_cli(home, "tick", "--now", "2026-11-23T10:30:00+00:00")
    rc, out, err, peak = peak_rss_of_tick(home, "2026-11-23T11:00:00+00:00")
    print(f"peak RSS: {peak:.1f} MiB printing 2 GiB, {baseline:.1f} MiB printing 'hi'")
    assert rc == 0, out + err
    assert peak < baseline + 24, (peak, baseline)  # bounded: nowhere near a gigabyte
    for task_id in ("lines", "oneline"):
        [(status, tail_bytes, error, log)] = query(
            home, "SELECT status, length(CAST(output_tail AS BLOB)), error, log_path FROM runs"
            " WHERE task_id = ?", (task_id,))
        assert status == "success" and error is None
        assert tail_bytes <= 4096 + 200  # the database keeps the last 4 KiB
        size = Path(log).stat().st_size
        assert 10 * 2**20 <= size < 10 * 2**20 + 500  # log_max_bytes (10 MiB) plus the note
        with open(log, "rb") as f:
            f.seek(-300, os.SEEK_END)
            assert b"output truncated" in f.read()
    row_bytes = query(home, "SELECT max(length(CAST(output_tail AS BLOB)) + length(coalesce("
                      "error, '')) + length(coalesce(extra, ''))) FROM runs")[0][0]
    assert row_bytes < 8192


@pytest.fixture
def small_filesystem(tmp_path: Path):
    """A 1 MiB tmpfs made by the test (needs root, or a kernel that lets us mount)."""
    mounted: list[Path] = []

    def make(where: Path, size: str = "1m") -> Path:
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700",
                               "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small filesystem here: {done.stderr.decode()[:200]}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_full_disk_under_the_logs_still_records_the_run(home, write_task, small_filesystem):
    small_filesystem(home / "logs")
    write_task("filler", schedule="0 10 * * *", command="head -c 3000000 /dev/zero | tr '\\0' x")
    write_task("after", schedule="0 10 * * *", command="echo still here")
    run_cli(home, "tick", "--now", BEFORE)
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    rows = {r[0]: r for r in query(home, "SELECT task_id, status, output_tail FROM runs")}
    assert rows["filler"][1] == "success" and "No space left" in rows["filler"][2]
    assert rows["after"][1] == "success"
    assert integrity(home) == "ok"


def test_file_size_limit_on_the_tick_still_records_the_run(home, write_task):
    write_task("big", schedule="0 10 * * *", command="head -c 3000000 /dev/zero | tr '\\0' x")
    run_cli(home, "tick", "--now", BEFORE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    out = subprocess.run(
        [sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now", NOW],
        capture_output=True, text=True, env=env, timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20)))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    [(status, tail)] = query(home, "SELECT status, output_tail FROM runs")
    assert status == "success" and "File too large" in tail
    assert integrity(home) == "ok"


# --------------------------------------------------------------------------- the database


def seeded(home: Path, write_task) -> Path:
    """A home whose daily tasks already ran; `catchup: always`, so a tick that forgot them
    would run every one at once."""
    marks = home / "marks"
    marks.mkdir()
    for i in range(3):
        write_task(f"d{i}", schedule="0 6 * * *", catchup="always",
                   command=f"echo x >> {marks}/d{i}")
    run_cli(home, "tick", "--now", "2026-11-23T05:59:00+00:00")
    assert run_cli(home, "tick", "--now", "2026-11-23T06:00:00+00:00").returncode == 0
    return marks


def ran(marks: Path) -> int:
    return sum(len(p.read_text().split()) for p in marks.iterdir())


def test_a_missing_database_never_runs_everything(home, write_task):
    marks = seeded(home, write_task)
    assert ran(marks) == 3
    for p in (home / "state").glob("mdcron.db*"):
        p.unlink()
    report = doctor(home)
    assert "does not exist yet" in report.stdout
    out = run_cli(home, "tick", "--now", "2026-11-23T10:00:00+00:00")
    assert out.returncode == 0
    assert ran(marks) == 3  # first seen again: past fires are not run
    assert integrity(home) == "ok"


def make_immutable(paths: list[Path]) -> bool:
    """Read-only for real, even for root: chattr +i (root), else chmod a-w."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True)
        return done.returncode == 0
    for p in paths:
        p.chmod(0o500 if p.is_dir() else 0o400)
    return True


def undo_immutable(paths: list[Path]) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)
    for p in paths:
        p.chmod(0o700 if p.is_dir() else 0o600)


def sink_yaml(sink) -> str:
    return f"notify:\n  destinations:\n    ops: \"{sink.json_url()}\"\n"


@pytest.mark.parametrize("damage", ["read-only", "garbage header", "damaged page"])
def test_an_unusable_database_stops_the_tick_alerts_and_doctor_explains(home, write_task,
                                                                      http_sink, damage):
    (home / "scheduler.yaml").write_text(sink_yaml(http_sink))
    marks = seeded(home, write_task)
    db = sqlite3.connect(db_path(home))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    db.close()
    locked: list[Path] = []
    if damage == "read-only":
        locked = [db_path(home), *[p for p in (home / "state").glob("mdcron.db-*")],
                  home / "state"]
        if not make_immutable(locked):
            pytest.skip("cannot make the database read-only here")
    else:
        with open(db_path(home), "r+b") as f:  # page 1 (the header) or page 2 (runs' root)
            f.seek(0 if damage == "garbage header" else 4096)
            f.write(b"\xde\xad\xbe\xef" * 256)
    try:
        out = run_cli(home, "tick", "--now", "2026-11-24T06:00:00+00:00")
        assert out.returncode in (1, 2), out.stdout + out.stderr
        assert ran(marks) == 3  # nothing ran: never a silent run of everything
        said = out.stdout + out.stderr
        assert "database" in said and ("doctor" in said or "fix:" in said), said
        report = doctor(home)
        assert report.returncode == 1, report.stdout
        [line] = [s for s in report.stdout.splitlines() if s.startswith("fail database")]
        fix = report.stdout.split(line, 1)[1].splitlines()[1]
        assert fix.strip().startswith("fix:")
        assert ("chattr -i" in fix or "chmod" in fix) if damage == "read-only" else (
            ".recover" in fix and "mv " in fix)
        if damage == "damaged page":  # the tick crashed inside: its alert went out directly
            titles = [b["title"] for b in http_sink.bodies()]
            assert any("tasks are not running" in t for t in titles), (titles, said)
    finally:
        undo_immutable(locked)


@pytest.mark.parametrize("damage", ["read-only", "garbage header", "no folder"])
def test_a_database_that_cannot_be_opened_alerts_from_the_tick(home, write_task, http_sink,
                                                               damage):
    (home / "scheduler.yaml").write_text(sink_yaml(http_sink))
    write_task("t", command="true")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    locked: list[Path] = []
    if damage == "read-only":
        locked = [*(home / "state").glob("mdcron.db*"), home / "state"]
        if not make_immutable(locked):
            pytest.skip("cannot make the database read-only here")
    elif damage == "garbage header":
        db_path(home).write_bytes(b"this is not a database" * 100)
    else:
        shutil.rmtree(home / "state")
        (home / "state").write_text("a file where the state folder should be")
    try:
        out = run_cli(home, "tick", "--now", NOW)
        assert out.returncode == 2
        assert any("database" in b["title"] for b in http_sink.bodies()), out.stderr
    finally:
        undo_immutable(locked)


def test_store_error_alert_goes_out_directly_once_an_hour(home, http_sink):
    (home / "scheduler.yaml").write_text(sink_yaml(http_sink))
    config, _ = load_config(home)
    assert store_error_alert(config, "the state database is damaged", {}, now=1000.0) == [
        "alert sent to 'ops' (json://…)"]
    assert store_error_alert(config, "the state database is damaged", {}, now=2000.0) == [
        "alert already sent within the hour"]
    assert store_error_alert(config, "the state database is damaged", {}, now=5000.0) == [
        "alert sent to 'ops' (json://…)"]
    assert len(http_sink.bodies()) == 2
    shutil.rmtree(home / "state")
    (home / "state").write_text("not a folder")  # issue 22: the marker goes to logs/ then
    assert store_error_alert(config, "x", {}, now=5001.0)[0].startswith("alert sent")
    assert store_error_alert(config, "x", {}, now=5002.0) == [
        "alert already sent within the hour"]
    shutil.rmtree(home / "logs")
    (home / "logs").write_text("not a folder")  # no marker can be written: send anyway
    assert store_error_alert(config, "y", {}, now=5003.0)[0].startswith("alert sent")
    assert store_error_alert(config, "y", {}, now=5004.0)[0].startswith("alert sent")


def test_a_state_folder_that_cannot_exist_is_a_clear_error(home, write_task):
    write_task("t", command=f"touch {home}/ran")
    (home / "state").write_text("a file where the state folder should be")
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "state database" in out.stderr and not (home / "ran").exists()
