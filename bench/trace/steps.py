"""Each traced step's median time after the go (ms) over the runs of a `held.py --trace`
output: `steps.py FILE` (the first two runs, warm-ups, left out when there are more than 4)."""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"\s*(-?[\d.]+) ms (\S+) (\S+)$")


def main(path: str) -> None:
    runs: list[list[tuple[float, str, str]]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if (m := LINE.match(line.rstrip())) is None:
                continue
            if m.group(3) == "wait>":
                runs.append([])
            if runs:
                runs[-1].append((float(m.group(1)), m.group(2), m.group(3)))
    steps: dict[str, list[float]] = defaultdict(list)
    for run in runs[2:] if len(runs) > 4 else runs:
        seen = set()
        for at, thread, label in run:
            key = f"{'main' if thread == 'MainThread' else 'worker'} {label}"
            if key not in seen and at >= -1.0:
                seen.add(key)
                steps[key].append(at)
    for key in sorted(steps, key=lambda k: statistics.median(steps[k])):
        at = steps[key]
        print(f"{statistics.median(at):8.2f} ms (min {min(at):7.2f}, {len(at)} runs) {key}")


if __name__ == "__main__":
    main(sys.argv[1])
