"""Mutation testing of the core (issue 28): mutmut changes one operator, constant or condition
at a time in the modules listed under [tool.mutmut] in pyproject.toml, runs the tests that reach
it, and counts the mutants the suite kills. Not in CI: it takes a long while.

    .venv/bin/python tools/mutation.py            # run mutmut, then print the score per module
    .venv/bin/python tools/mutation.py --report   # only print the score of the last run
    .venv/bin/python tools/mutation.py --only mdcron/core/cron.py --tests tests/test_cron.py
        # one module against the tests you name, in a scratch copy (mutants/ of the tree stays)

A mutant listed in tools/mutation_equivalent.txt (one name per line, then `#` and why) cannot
change behaviour; it is counted apart, not as a survivor."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
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


def results(mutmut: Path, where: Path) -> dict[str, str]:
    out = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=where,
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


def scratch_dir(only: list[str]) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", "_".join(only)).strip("-")[:80]
    return Path(tempfile.gettempdir()) / f"mdcron-mutation-{slug}"


def scratch_copy(only: list[str], tests: list[str]) -> Path:
    """A copy of the working tree (tracked and new files) whose pyproject mutates only `only`
    against `tests`, so one module's run neither waits for the others nor edits the tree."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    work = scratch_dir(only)
    shutil.rmtree(work, ignore_errors=True)
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, work / name)
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
    pyproject = (work / "pyproject.toml").read_text(encoding="utf-8")
    pyproject = re.sub(r"(?ms)^only_mutate = \[.*?\]$", "only_mutate = " + json.dumps(only),
                       pyproject)
    pyproject = re.sub(r"(?ms)^pytest_add_cli_args_test_selection = \[.*?\]$",
                       "pytest_add_cli_args_test_selection = " + json.dumps(tests), pyproject)
    (work / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true",
                        help="print the score of the last run without running mutmut again")
    parser.add_argument("--only", nargs="+", metavar="PATH",
                        help="mutate only these files (default: pyproject's only_mutate)")
    parser.add_argument("--tests", nargs="+", metavar="TEST",
                        help="with --only: the test files or node ids to run against them")
    parser.add_argument("--max-children", type=int, metavar="N",
                        help="mutants tested at once (mutmut's default: one per core)")
    args = parser.parse_args(argv)
    if bool(args.only) != bool(args.tests):
        parser.error("--only and --tests go together: name the files to mutate and their tests")
    mutmut = Path(sys.executable).parent / "mutmut"
    if not mutmut.exists():
        print(f"mutmut is not installed next to {sys.executable}: run"
              f" `{sys.executable} -m pip install -r requirements-dev.txt`", file=sys.stderr)
        return 2
    where = ROOT
    if args.only:
        where = scratch_dir(args.only) if args.report else scratch_copy(args.only, args.tests)
        print(f"scratch copy: {where}", file=sys.stderr)
    if not args.report:
        command = [str(mutmut), "run"]
        if args.max_children:
            command += ["--max-children", str(args.max_children)]
        run = subprocess.run(command, cwd=where)
        if run.returncode not in (0, 1):
            return run.returncode
    return report(results(mutmut, where), equivalent_names())


if __name__ == "__main__":
    sys.exit(main())
