"""Faults, load and hostile input: how many cases were tried, how many held, how many were lost.

Run from the repo root:  .venv/bin/python bench/faults.py [--quick] [--scale N] [--only WORDS]

Every case uses real processes (ticks, tasks, an editor saving files), real signals, real
SQLite files and real file locks, in a temporary folder removed afterwards. The scenarios are
the ones tests/faults runs (tests/faults/faultlib.py), with more cases each. A case is "held"
when the property holds for it and "lost" otherwise; the first failures of a row are printed
below the table. Exit status 1 when anything was lost.

  ticks     20 ticks started together over 200 due tasks; a case is one (task, slot)
  kill      a tick SIGKILLed at a random moment (0-1.2 s) of a 14-task tick
  write     a tick SIGKILLed inside its retention transaction (45,000 of 450,000 rows)
  group     a grandchild ignoring SIGTERM (leader waiting for the timeout / exiting first)
  stale     a hung holder of a stale lock (orphaned task / stopped tick)
  edit      `enabled: false` written while a person saves (rename / in place)
  read      a task file read while a person saves (rename / in place)
  fuzz      hypothesis-generated task files through load_task_file
  ids       ids that try to escape, in task files and on the command line
  output    2 GiB printed by two tasks: log capped, row small, tick memory bounded
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "faults")]

import faultlib as f  # noqa: E402
import scenarios as s  # noqa: E402

ALL = ("ticks", "kill", "write", "group", "stale", "edit", "read", "fuzz", "ids", "output")


def fuzz(count: int) -> f.Tally:
    from hypothesis import HealthCheck, given, settings
    from test_fault_input import check_one, task_files

    from mdcron.settings.config import Config

    tally = f.Tally("fuzzed task files (hypothesis)")
    folder = Path(tempfile.mkdtemp(prefix="mdcron-fuzz-"))
    config = Config(home=folder)
    path = folder / "t.md"

    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(task_files())
    def one(data: bytes) -> None:
        path.write_bytes(data)
        try:
            tally.note("valid" if check_one(path, config) else "refused with an error")
            tally.case(True)
        except Exception as exc:  # an escaped exception or a broken rule: lost, go on
            tally.case(False, f"{type(exc).__name__}: {exc} for {data[:120]!r}")

    one()
    shutil.rmtree(folder, ignore_errors=True)
    return tally


def escaping_ids(home: Path) -> f.Tally:
    from test_fault_input import ESCAPING_IDS

    tally = f.Tally("ids that try to escape")
    (home / "tasks").mkdir(parents=True)
    for n, bad in enumerate(ESCAPING_IDS):
        (home / "tasks" / f"bad{n}.md").write_text(f.render_task(bad, command="true"))
    f.write_tasks(home, 1, prefix="good", command="true")
    out = f.run_cli(home, "tick", "--now", f.NOW)
    for n, bad in enumerate(ESCAPING_IDS):
        refused = any(f"/bad{n}.md:" in line and ": error" in line
                      for line in out.stderr.splitlines())
        tally.case(refused, f"id {bad[:40]!r} was not refused")
    locks = sorted(p.name for p in (home / "state" / "locks").iterdir())
    tally.case(locks == ["good000.lock"], f"lock files: {locks}")
    for bad in ("../x", "/etc/passwd", "a/b", "."):
        for command in ("run", "show", "disable", "logs", "why", "comment"):
            extra = ["hello"] if command == "comment" else []
            res = f.run_cli(home, command, bad, *extra)
            tally.case(res.returncode in (1, 2) and "Traceback" not in res.stderr,
                       f"{command} {bad!r}: exit {res.returncode} {res.stderr[-200:]}")
    outside = [p for p in home.parent.rglob("*") if not str(p).startswith(str(home))]
    tally.case(outside == [], f"files created outside the home: {outside}")
    return tally


def output(home: Path) -> f.Tally:
    tally = f.Tally("a gigabyte of output (x2)")
    (home / "tasks").mkdir(parents=True)
    f.write_tasks(home, 1, prefix="small", schedule="0 10 * * *", command="echo hi")
    f.run_cli(home, "tick", "--now", f.BEFORE)
    _, _, _, baseline = f.peak_rss_of_tick(home, f.NOW)
    gib = 1 << 30
    (home / "tasks" / "lines.md").write_text(f.render_task(
        "lines", schedule="0 11 * * *", timeout=300, command=f"yes {'0123456789' * 6} | head -c"
        f" {gib}"))
    (home / "tasks" / "oneline.md").write_text(f.render_task(
        "oneline", schedule="0 11 * * *", timeout=300, command=f"head -c {gib} /dev/zero"))
    f.run_cli(home, "tick", "--now", "2026-11-23T10:30:00+00:00")
    rc, out, err, peak = f.peak_rss_of_tick(home, "2026-11-23T11:00:00+00:00")
    tally.note(f"peak RSS {peak:.0f} MiB (idle tick {baseline:.0f} MiB)")
    tally.case(rc == 0 and peak < baseline + 24, f"exit {rc}, peak {peak:.0f} MiB: {err[-300:]}")
    for task_id in ("lines", "oneline"):
        [(status, tail, log)] = f.query(
            home, "SELECT status, length(CAST(output_tail AS BLOB)), log_path FROM runs"
            " WHERE task_id = ?", (task_id,))
        size = Path(log).stat().st_size
        tally.note(f"{task_id}: log {size / 2**20:.1f} MiB, tail {tail} B")
        tally.case(status == "success" and tail <= 4296 and size < 10 * 2**20 + 500,
                   f"{task_id}: {status}, log {size} B, tail {tail} B")
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases per row (~1 min)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the case counts")
    parser.add_argument("--only", default=",".join(ALL), help=f"rows: {','.join(ALL)}")
    args = parser.parse_args()
    scale = args.scale * (0.25 if args.quick else 1.0)

    def n(count: int) -> int:
        return max(2, int(count * scale))

    rows: list[tuple[f.Tally, float]] = []
    root = Path(tempfile.mkdtemp(prefix="mdcron-faults-"))
    try:
        for name in [w for w in args.only.split(",") if w in ALL]:
            start = time.monotonic()
            print(f"running {name} ...", file=sys.stderr, flush=True)
            work = root / name
            work.mkdir()
            if name == "ticks":
                tallies = [s.many_ticks(work / f"round-{i}") for i in range(n(2))]
                total = f.Tally(tallies[0].name + f" ({len(tallies)} rounds)")
                for t in tallies:
                    total.tried, total.held, total.lost = (
                        total.tried + t.tried, total.held + t.held, total.lost + t.lost)
                    total.failures += t.failures
                found = [total]
            elif name == "kill":
                found = [s.kill_at_random(work, n(24))]
            elif name == "write":
                found = [f.Tally("tick SIGKILLed inside a database write")]
                for i in range(n(4)):
                    problems = s.kill_in_write(work / f"w{i}")
                    found[0].case(not problems, f"trial {i}: {problems}")
            elif name == "group":
                found = [s.grandchildren(work, n(6))]
            elif name == "stale":
                found = [s.stale_holders(work, n(6))]
            elif name == "edit":
                found = []
                for mode in ("rename", "inplace"):
                    (work / mode / "tasks").mkdir(parents=True)
                    found.append(s.edit_race(work / mode, n(400), mode))
            elif name == "read":
                found = []
                for mode in ("rename", "inplace"):
                    (work / mode / "tasks").mkdir(parents=True)
                    found.append(s.read_race(work / mode, n(2000), mode))
            elif name == "fuzz":
                found = [fuzz(n(5000))]
            elif name == "ids":
                found = [escaping_ids(work / "home")]
            else:
                found = [output(work / "home")]
            took = time.monotonic() - start
            rows.extend((t, took / len(found)) for t in found)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        f.subprocess.run(["chattr", "-R", "-i", str(root)], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    width = max(len(t.name) for t, _ in rows)
    print(f"{'property':{width}}  {'tried':>7} {'held':>7} {'lost':>5} {'time':>7}  notes")
    for t, took in rows:
        notes = ", ".join(f"{k}: {v}" for k, v in sorted(t.notes.items()))
        print(f"{t.name:{width}}  {t.tried:7d} {t.held:7d} {t.lost:5d} {took:6.1f}s  {notes}")
    lost = [t for t, _ in rows if t.lost]
    for t in lost:
        print(f"\nLOST in {t.name}:")
        for failure in t.failures:
            print(f"  {failure[:400]}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
