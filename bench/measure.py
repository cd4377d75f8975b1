"""The bench's measuring core, shared by run.py and its scenario modules: a fresh process per
sample (through launch.py: its own peak RSS), rows of samples, homes of generated task files."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEDULER = REPO / "scheduler.py"
BENCH = Path(__file__).resolve().parent
LAUNCH = BENCH / "launch.py"  # forks and execs each measured command: its own peak RSS
PY = sys.executable  # the tick, floor.py and naive_tick.py all run with this same interpreter
# make_tasks.py writes weekday-only schedules, so a Saturday instant has nothing due.
SATURDAY = datetime.fromisoformat("2026-11-28T12:00:00+00:00")
SETTLE_S = 2.5  # state/idle.py RACY_NS (2 s) and a margin: files this old are cached for good
TIMEOUT_S = 600.0  # a child that runs longer than this is killed and its row marked FAILED
# Children run as cron runs them: with Python's bytecode cache. PYTHONDONTWRITEBYTECODE in the
# caller's environment would make every tick compile mdcron from source (--keep-env keeps it).
CHILD_ENV: dict[str, str] | None = None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- measurement


@dataclass
class Sample:
    wall_ms: float
    rss_kib: int
    rc: int
    stdout: str
    stderr: str
    epoch: float  # time.time() just before spawn
    metric_ms: float | None = None  # the row's own metric when it is not wall time (latency)


def spawn(argv: list[str], cwd: Path) -> Sample:
    """Run argv once through bench/launch.py: wall time from just before its fork to its exit,
    peak RSS the child's own (ru_maxrss would otherwise include this bench's memory)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        read_end, write_end = os.pipe()
        try:
            launcher = subprocess.Popen([PY, "-S", str(LAUNCH), str(write_end), *argv], cwd=cwd,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        env=CHILD_ENV, pass_fds=(write_end,))
        finally:
            os.close(write_end)
        timer = threading.Timer(TIMEOUT_S, launcher.terminate)
        timer.start()
        report = b""
        while chunk := os.read(read_end, 256):
            report += chunk
        os.close(read_end)
        launcher.wait()
        timer.cancel()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        try:
            epoch, wall_ms, rss_kib, rc = report.split()
        except ValueError:
            return Sample(wall_ms=TIMEOUT_S * 1000.0, rss_kib=0, rc=-9, stdout=stdout,
                          stderr=stderr + f"\nlauncher exit {launcher.returncode}", epoch=0.0)
        return Sample(wall_ms=float(wall_ms), rss_kib=int(rss_kib), rc=int(rc), stdout=stdout,
                      stderr=stderr, epoch=float(epoch))


def failure_of(s: Sample) -> str | None:
    if s.rc < 0:
        return f"killed by signal {-s.rc}" + (" (timeout)" if s.wall_ms >= TIMEOUT_S * 1000 else "")
    if s.rc != 0:
        return f"exit {s.rc}: {first_line(s.stderr) or first_line(s.stdout)}"
    if s.stderr.strip():
        return f"stderr: {first_line(s.stderr)}"
    return None


def first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:160]


@dataclass
class Row:
    scenario: str
    n: int | None
    goal: str = ""
    samples: list[Sample] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    xfloor: float | None = None
    xnaive: float | None = None
    verdict: str = ""
    skipped: str = ""  # why the row was not measured
    rss_only: bool = False  # the memory row: judged on RSS, no time columns
    no_rss: bool = False  # measured in this process (claims): no child's RSS to show

    def values(self) -> list[float]:
        return [s.metric_ms if s.metric_ms is not None else s.wall_ms for s in self.samples]

    @property
    def median(self) -> float | None:
        return statistics.median(self.values()) if self.samples else None

    @property
    def min(self) -> float | None:
        return min(self.values()) if self.samples else None

    @property
    def rss_mib(self) -> float | None:
        if not self.samples:
            return None
        return statistics.median(s.rss_kib for s in self.samples) / 1024.0

    @property
    def rss_max_mib(self) -> float | None:
        return max(s.rss_kib for s in self.samples) / 1024.0 if self.samples else None

    @property
    def failed(self) -> bool:
        return bool(self.failures)


def measure(
    row: Row,
    runs: int,
    argv_for: Callable[[int], list[str]],
    cwd: Path,
    *,
    warmup: bool = True,
    warmups: int = 1,
    before: Callable[[int], None] | None = None,
    after: Callable[[int, Sample], str | None] | None = None,
) -> Row:
    """Warm up `warmups` times (run indices <= 0, not counted), then `runs` timed runs
    (indices 1..runs).

    `before(i)` prepares run i outside the timing; `after(i, sample)` checks it (returns a
    warning) and may set sample.metric_ms. A non-zero exit or any stderr marks the row FAILED."""
    first = 1 - max(1, warmups) if warmup else 1
    for i in range(first, runs + 1):
        if before:
            before(i)
        s = spawn(argv_for(i), cwd)
        problem = failure_of(s)
        label = "warm-up" if i <= 0 else f"run {i}/{runs}"
        if problem:
            row.failures.append(f"{label}: {problem}")
            log(f"  !!! {row.scenario} N={row.n} {label} FAILED: {problem}")
            if s.stderr.strip():
                for line in s.stderr.strip().splitlines()[-5:]:
                    log(f"      | {line}")
        if after:
            warning = after(i, s)
            if warning and i > 0:
                row.warnings.append(f"{label}: {warning}")
                log(f"  ! {row.scenario} N={row.n} {label}: {warning}")
        if i <= 0:
            continue
        row.samples.append(s)
        shown = s.metric_ms if s.metric_ms is not None else s.wall_ms
        log(f"  {row.scenario} N={row.n} {label}: {shown:.1f} ms, {s.rss_kib / 1024:.1f} MiB")
    return row


# --------------------------------------------------------------------------- homes


class Homes:
    def __init__(self, root: Path, shared: Path | None):
        self.root = root
        self.shared = shared
        self.generator = (
            shared / "make_tasks.py" if shared and (shared / "make_tasks.py").exists()
            else BENCH / "gen_tasks.py"
        )

    def make(self, name: str, n: int) -> Path:
        home = self.root / name
        home.mkdir()
        if n:
            subprocess.run([PY, str(self.generator), str(home), str(n)], check=True,
                           stdout=subprocess.DEVNULL)
            count = sum(1 for p in (home / "tasks").iterdir() if p.suffix == ".md")
            if count != n:
                raise SystemExit(f"generator wrote {count} task files into {home}, expected {n}")
        else:
            (home / "tasks").mkdir()
        return home


def write_config(home: Path, extra: str = "") -> None:
    """A home as people run it has a scheduler.yaml (the tick reads and caches it)."""
    (home / "scheduler.yaml").write_text(f"timezone: UTC\nmax_parallel: 4\n{extra}",
                                         encoding="utf-8")


def write_task(home: Path, task_id: str, command: str) -> None:
    quoted = command.replace("'", "''")
    (home / "tasks" / f"{task_id}.md").write_text(
        f"---\nid: {task_id}\nschedule: \"* * * * *\"\ncommand: '{quoted}'\n---\n\n"
        f"# {task_id}\n\nDue every minute (benchmark).\n",
        encoding="utf-8",
    )


def settle(home: Path) -> None:
    """Wait until every file under the home's tasks/ and its scheduler.yaml is older than the
    cache's racy window (state/idle.py RACY_NS, 2 s): before that, every tick re-parses the files
    it cannot trust, a state a home is in for 2 s after an edit, not the steady one measured."""
    newest = max((p.stat().st_mtime for p in [*(home / "tasks").iterdir(), home / "scheduler.yaml"]
                  if p.exists()), default=0.0)
    wait = newest + SETTLE_S - time.time()
    if wait > 0:
        time.sleep(wait)


def iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def tick_argv(home: Path, now: datetime) -> list[str]:
    return [PY, str(SCHEDULER), "--home", str(home), "tick", "--now", iso(now)]


def minute(i: int) -> datetime:
    """Run i of a due scenario happens at SATURDAY + i minutes: a new slot every run."""
    return SATURDAY + timedelta(minutes=i)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def judge_time(row: Row, goal_ms: float, goal_n: int) -> None:
    if row.n != goal_n:
        row.verdict = f"— (goal is for N={goal_n:,})"
        return
    judge_goal(row, goal_ms)


def judge_goal(row: Row, goal_ms: float) -> None:
    """An absolute goal in ms, whatever the row's N."""
    med = row.median
    if med is None:
        row.verdict = "no data"
    elif med <= goal_ms:
        row.verdict = "meets"
    else:
        row.verdict = f"misses by {med - goal_ms:.0f} ms ({med / goal_ms:.1f}× goal)"
