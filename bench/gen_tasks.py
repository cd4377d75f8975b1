"""Fallback task generator: `gen_tasks.py HOME N` writes the same N task files as the shared
make_tasks.py (same seed, same text). bench/run.py uses it only when ../shared/bench is missing."""

from __future__ import annotations

import os
import random
import sys

TEMPLATE = """---
id: task-{i:05d}
title: Task number {i}
schedule: "{m} {h} * * 1-5"   # weekdays
timeout: 300
retry: true
enabled: true
self_heal: false
notify_on: failure
run_as: shell
command: "echo task {i} && true"
tags: [bench, group-{g}]
---

# Task {i}

Generated for benchmarking. This body is a paragraph of ordinary description text that a
person might write to explain what the task does and why it exists.
"""


def write_tasks(home: str, n: int) -> None:
    tasks = os.path.join(home, "tasks")
    os.makedirs(tasks, exist_ok=True)
    rnd = random.Random(1)
    for i in range(n):
        m = rnd.randint(0, 59)
        h = rnd.randint(0, 23)
        with open(os.path.join(tasks, f"task-{i:05d}.md"), "w") as f:
            f.write(TEMPLATE.format(i=i, m=m, h=h, g=i % 10))


if __name__ == "__main__":
    write_tasks(sys.argv[1], int(sys.argv[2]))
