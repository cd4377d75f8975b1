"""Mutation testing of the core (issue 28): mutmut changes one operator, constant or condition
at a time in the modules listed under [tool.mutmut] in pyproject.toml, runs the tests that reach
it, and counts the mutants the suite kills. Not in CI: it takes a long while.

    .venv/bin/python tools/mutation.py            # run mutmut, then print the score per module
    .venv/bin/python tools/mutation.py --report   # only print the score of the last run

A mutant listed in tools/mutation_equivalent.txt (one name per line, then `#` and why) cannot
change behaviour; it is counted apart, not as a survivor."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.txt"
GOAL = 0.90
KILLED = {"killed", "timeout", "segfault"}  # the suite noticed the change


def module_of(mutant: str) -> str:
    """mdcron.run.locks.x_is_stale__mutmut_3 (or .xǁClassǁmethod__mutmut_3) -> mdcron.run.locks"""
    parts = mutant.split(".")
    for i, part in enumerate(parts):
        if part.startswith(("x_", "xǁ")):
            return ".".join(parts[:i])
    return mutant.rsplit(".", 1)[0]


def equivalent_names() -> set[str]:
    if not EQUIVALENT.exists():
        return set()
    lines = EQUIVALENT.read_text(encoding="utf-8").splitlines()
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


def results(mutmut: Path) -> dict[str, str]:
    out = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+):\s*(.+?)\s*$", line)
        if match and "__mutmut_" in match.group(1):
            found[match.group(1)] = match.group(2)
    return found


def report(statuses: dict[str, str], equivalent: set[str]) -> int:
    per: dict[str, Counter] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    for name, status in statuses.items():
        module = module_of(name)
        if name in equivalent:
            per[module]["equivalent"] += 1
        elif status in KILLED:
            per[module]["killed"] += 1
        elif status in ("skipped", "not checked"):
            per[module][status] += 1  # not judged (yet): a run cut short leaves these
        else:
            per[module]["alive"] += 1
            per[module]["no tests"] += status == "no tests"
            survivors[module].append(f"{name} ({status})")
    print(f"{'module':<34} {'killed':>7} {'alive':>6} {'(none)':>6} {'equiv':>6}"
          f" {'unrun':>6} {'score':>7}")
    below = 0
    for module in sorted(per):
        c = per[module]
        judged = c["killed"] + c["alive"]
        score = c["killed"] / judged if judged else 1.0
        below += score < GOAL
        mark = "" if score >= GOAL else "  < 90 %"
        print(f"{module:<34} {c['killed']:>7} {c['alive']:>6} {c['no tests']:>6}"
              f" {c['equivalent']:>6} {c['not checked'] + c['skipped']:>6} {score:>6.1%}{mark}")
    print("(none): alive because no test reached the function in-process (a subprocess's"
          " calls are not seen by mutmut's stats); unrun: not checked yet")
    total = sum(c["killed"] for c in per.values()), sum(c["alive"] for c in per.values())
    if sum(total):
        print(f"{'all':<34} {total[0]:>7} {total[1]:>6} {'':>6} {total[0] / sum(total):>6.1%}")
    for module in sorted(survivors):
        print(f"\nsurvivors in {module} (`.venv/bin/mutmut show NAME` shows the change):")
        for line in sorted(survivors[module]):
            print(f"  {line}")
    return 1 if below else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true",
                        help="print the score of the last run without running mutmut again")
    args = parser.parse_args(argv)
    mutmut = Path(sys.executable).parent / "mutmut"
    if not mutmut.exists():
        print(f"mutmut is not installed next to {sys.executable}: run"
              f" `{sys.executable} -m pip install -r requirements-dev.txt`", file=sys.stderr)
        return 2
    if not args.report:
        run = subprocess.run([str(mutmut), "run"], cwd=ROOT)
        if run.returncode not in (0, 1):
            return run.returncode
    return report(results(mutmut), equivalent_names())


if __name__ == "__main__":
    sys.exit(main())
