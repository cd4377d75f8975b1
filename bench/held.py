"""The daemon's held tick, timed without waiting for real minutes (issue 27).

`held.py [--runs N] [--tree DIR ...] [--home H]`: over a home like the daemon rows' (1,000
generated idle tasks + 100 `* * * * *` tasks writing their start stamps, `max_parallel: 8`),
each run starts `scheduler.py tick --home H --now T --warm-fd N` as the daemon does (T one new
minute per run), waits until it blocks reading its pipe (warm), writes the go byte and reports
go → first task stamp and go → last stamp. With several `--tree`s (source trees, e.g. a
before-worktree and this one) the runs alternate between them over the same home, paired.
`--trace` adds MDCRON_TRACE=1 to the tick's environment and bench/trace/ to its PYTHONPATH: its
sitecustomize.py prints the steps' timestamps (`python bench/trace/steps.py OUTPUT`: medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import measure as core  # noqa: E402
from latency import STAMP, stamp_of  # noqa: E402
from measure import SATURDAY, Homes, iso, settle, write_task  # noqa: E402

WARM_WAIT_S = 30.0  # a tick not warm by then is reported, not waited on


def make_home(root: Path, name: str = "held", n: int = 1000, due: int = 100,
              command: str | None = None) -> Path:
    shared = core.REPO.parent / "shared" / "bench"
    home = Homes(root, shared if shared.is_dir() else None).make(name, n)
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 8\n", encoding="utf-8")
    (home / "stamps").mkdir()
    for k in range(due):
        write_task(home, f"due-{k:03d}",
                   command or STAMP.format(home / "stamps" / f"due-{k:03d}"))
    settle(home)
    return home


def blocked_on(pid: int, fd: int) -> bool:
    """The process sits in read(fd) (the held tick's wait for its go)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == fd


def own_cpu_ms(pid: int) -> float:
    """utime + stime of an exited, not yet reaped process, without its children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def one(tree: Path, home: Path, at: float, env: dict[str, str],
        strace: Path | None = None) -> tuple[float, float, float, int, str]:
    """(go → first stamp ms, go → last stamp ms, CPU ms of the tick and its tasks, stamps,
    tick output)."""
    stamps = home / "stamps"
    for p in stamps.iterdir():
        p.unlink()
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    now = iso(SATURDAY.replace(tzinfo=SATURDAY.tzinfo) + timedelta(seconds=at))
    with tempfile.TemporaryFile() as out:
        tick = subprocess.Popen(
            [core.PY, "-u", str(tree / "scheduler.py"), "tick", "--home", str(home), "--now", now,
             "--warm-fd", str(read_end)], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, pass_fds=(read_end,), process_group=0, env=env)
        os.close(read_end)
        give_up = time.monotonic() + WARM_WAIT_S
        while not blocked_on(tick.pid, read_end) and time.monotonic() < give_up:
            if tick.poll() is not None:
                break
            time.sleep(0.01)
        tracer = None
        if strace is not None:  # attached once warm: only what follows the go is traced
            tracer = subprocess.Popen(["strace", "-f", "-tt", "-o", str(strace), "-p",
                                       str(tick.pid)], stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        time.sleep(0.2)  # settled in its wait (and the machine quiet of its warm-up)
        warm_cpu = own_cpu_ms(tick.pid)
        go = time.time()
        os.write(write_end, b"g")
        os.close(write_end)
        os.waitid(os.P_PID, tick.pid, os.WEXITED | os.WNOWAIT)  # a zombie: its stat says
        own = own_cpu_ms(tick.pid)  # its own CPU apart from its tasks'
        _, status, usage = os.wait4(tick.pid, 0)
        tick.returncode = os.waitstatus_to_exitcode(status)
        cpu = (usage.ru_utime + usage.ru_stime) * 1000.0
        print(f"  the tick's own CPU {own:.0f} ms ({own - warm_cpu:.0f} ms after the go), its"
              f" tasks' {cpu - own:.0f} ms", file=sys.stderr)
        if tracer is not None:
            tracer.wait(30)
        out.seek(0)
        text = out.read().decode(errors="replace")
    got = sorted(v for p in stamps.iterdir() if (v := stamp_of(p)) is not None)
    if env.get("MDCRON_TRACE"):  # the tick's own "@@ label epoch" lines, relative to the go
        text = "\n".join(f"{(float(w[-1]) - go) * 1000.0:8.2f} ms {' '.join(w[1:-1])}"
                         if (w := line.split()) and w[0] == "@@" else line
                         for line in text.splitlines())
    if not got:
        return float("nan"), float("nan"), cpu, 0, text
    return (got[0] - go) * 1000.0, (got[-1] - go) * 1000.0, cpu, len(got), text


def cold(tree: Path, home: Path, at: float,
         env: dict[str, str]) -> tuple[float, float, float]:
    """bench/run.py's row "tick, 100 due (true), max_parallel 8": (wall ms, CPU ms, the
    tick's own CPU ms)."""
    now = iso(SATURDAY + timedelta(seconds=at))
    began = time.perf_counter()
    tick = subprocess.Popen([core.PY, str(tree / "scheduler.py"), "--home", str(home), "tick",
                             "--now", now], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            env=env)
    os.waitid(os.P_PID, tick.pid, os.WEXITED | os.WNOWAIT)
    wall = (time.perf_counter() - began) * 1000.0
    own = own_cpu_ms(tick.pid)
    _, status, usage = os.wait4(tick.pid, 0)
    return wall, (usage.ru_utime + usage.ru_stime) * 1000.0, own


def main_cold(trees: list[Path], runs: int, env: dict[str, str]) -> None:
    root = Path(tempfile.mkdtemp(prefix="cold-"))
    homes = {t: make_home(root, f"cold-{k}", 0, 100, "true") for k, t in enumerate(trees)}
    for home in homes.values():
        (home / "scheduler.yaml").write_text("max_parallel: 8\n", encoding="utf-8")
        settle(home)
    results: dict[Path, list[tuple[float, float, float]]] = {t: [] for t in trees}
    for k in range(-2, runs):
        for tree in trees:
            wall, cpu, own = cold(tree, homes[tree], (k + 3) * 60.0, env)
            if k >= 0:
                results[tree].append((wall, cpu, own))
                print(f"{tree.name} run {k + 1}: {wall:.0f} ms, CPU {cpu:.0f} ms", file=sys.stderr)
    for tree, rows in results.items():
        print(f"{tree}: wall median {statistics.median(r[0] for r in rows):.0f} ms (min "
              f"{min(r[0] for r in rows):.0f}), CPU median "
              f"{statistics.median(r[1] for r in rows):.0f} ms, the tick's own "
              f"{statistics.median(r[2] for r in rows):.0f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tree", type=Path, action="append", help="source tree (default: this one)")
    p.add_argument("--home", type=Path, help="reuse a home made before (else a temporary one"
                   " per tree: the cache is keyed by the code, so trees never share a home)")
    p.add_argument("--trace", action="store_true")
    p.add_argument("--strace", type=Path, help="strace -f -tt the last run's tick into FILE")
    p.add_argument("--cold", action="store_true", help="instead: cron's tick, 100 `true` due")
    p.add_argument("--start", type=int, default=0, help="first minute offset (a reused home)")
    args = p.parse_args()
    trees = args.tree or [core.REPO]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if args.trace:  # bench/trace/sitecustomize.py prints the steps' timestamps
        env["MDCRON_TRACE"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(BENCH / "trace"), env.get("PYTHONPATH")) if p)
    if args.cold:
        main_cold(trees, args.runs, env)
        return
    root = Path(tempfile.mkdtemp(prefix="held-"))
    homes = {t: args.home or make_home(root, f"held-{k}") for k, t in enumerate(trees)}
    print(f"homes {' '.join(map(str, homes.values()))}", file=sys.stderr)
    results: dict[Path, list[tuple[float, float, float]]] = {t: [] for t in trees}
    minute = args.start
    for _ in range(2):  # warm-ups: first sight of the tasks, then one run
        minute += 1
        for tree in trees:
            one(tree, homes[tree], minute * 60.0, env)
    for k in range(args.runs):
        minute += 1
        # ABBA: which tree goes first alternates (under another process's load, the first
        # of each pair measured 20-40 ms slower, whichever tree it was)
        for tree in (trees if k % 2 == 0 else trees[::-1]):
            trace = args.strace if args.strace and k == args.runs - 1 else None
            first, last, cpu, n, text = one(tree, homes[tree], minute * 60.0, env, trace)
            results[tree].append((first, last, cpu))
            print(f"{tree.name} run {k + 1}: first {first:.1f} ms, last {last:.1f} ms, CPU "
                  f"{cpu:.0f} ms, {n} stamps", file=sys.stderr)
            if n != 100 or args.trace:
                print(text if args.trace else text[-3000:], file=sys.stderr)
    for tree, rows in results.items():
        print(f"{tree}: first median {statistics.median(r[0] for r in rows):.1f} ms "
              f"(min {min(r[0] for r in rows):.1f}), last median "
              f"{statistics.median(r[1] for r in rows):.1f} ms (min {min(r[1] for r in rows):.1f}),"
              f" CPU median {statistics.median(r[2] for r in rows):.0f} ms (from the start, warm-up"
              " included)")
    for tree in trees[1:]:  # each run against its pair's run of the first tree
        pairs = list(zip(results[trees[0]], results[tree], strict=True))
        print(f"{tree} - {trees[0]}, paired: first "
              f"{statistics.median(b[0] - a[0] for a, b in pairs):+.1f} ms, last "
              f"{statistics.median(b[1] - a[1] for a, b in pairs):+.1f} ms (medians of the"
              f" {len(pairs)} differences)")
    print(f"minutes used up to {minute} (reuse with --home HOME --start {minute})")


if __name__ == "__main__":
    main()
