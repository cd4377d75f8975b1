"""Issue 22.4: a FIFO in place of a task file cannot hang `tick` or `validate`.

A FIFO that is there when the folder is listed is reported as an invalid task file while the
other tasks run. A FIFO swapped in between the loader's look at the file and its open (a
same-user process renaming it over the file in a tight loop) must not hang the loader either:
the file is opened O_NONBLOCK|O_NOFOLLOW and fstat'ed, never read through a blocking open.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from faultlib import BEFORE, NOW, REPO, render_task, run_cli, runs

FIFO_ERROR = "not a regular file (a FIFO); fix: replace it with a task file"


def test_a_fifo_task_file_is_invalid_and_the_other_task_runs(home: Path) -> None:
    (home / "tasks" / "good.md").write_text(render_task("good", schedule="0 10 * * *",
                                                        command="echo ok"))
    os.mkfifo(home / "tasks" / "x.md")
    first = run_cli(home, "tick", "--now", BEFORE, timeout=60)  # a hang: TimeoutExpired
    errors = [line for line in first.stderr.splitlines() if "tasks/x.md" in line]
    assert len(errors) == 1 and f"tasks/x.md: error: {FIFO_ERROR}" in errors[0], errors
    out = run_cli(home, "tick", "--now", NOW, timeout=60)  # (a known error is not repeated)
    assert "Traceback" not in first.stderr + out.stderr
    assert [r[3] for r in runs(home, "good")] == ["success"]
    check = run_cli(home, "validate", timeout=60)
    assert check.returncode != 0 and "Traceback" not in check.stderr
    said = check.stdout + check.stderr
    assert f"tasks/x.md: error: {FIFO_ERROR}" in said, said


SWAP_AND_LOAD = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from mdcron.settings.config import load_config
    from mdcron.tasks.taskfile import load_task_file

    home = Path(sys.argv[2])
    tasks = home / "tasks"
    target, fifo, text = tasks / "x.md", home / "x.fifo", home / "x.text"
    config, _ = load_config(home)
    stop = threading.Event()

    def swap():  # rename(2) is atomic: x.md is always there, a file or a FIFO
        while not stop.is_set():
            os.link(fifo, tasks / ".f")
            os.rename(tasks / ".f", target)
            os.link(text, tasks / ".t")
            os.rename(tasks / ".t", target)

    threading.Thread(target=swap, daemon=True).start()
    seen = set()
    for _ in range(3000):
        task, problems = load_task_file(target, config)
        seen.add("task" if task is not None else problems[0].message)
    stop.set()
    print(sorted(seen))
""")


def test_a_fifo_swapped_in_under_the_loader_cannot_hang_it(home: Path) -> None:
    (home / "x.text").write_text(render_task("x", schedule="0 10 * * *", command="true"))
    os.mkfifo(home / "x.fifo")
    (home / "tasks" / "x.md").write_text((home / "x.text").read_text())
    try:
        out = subprocess.run([sys.executable, "-c", SWAP_AND_LOAD, str(REPO), str(home)],
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the loader hung on a FIFO swapped in for a task file") from None
    assert out.returncode == 0, out.stderr[-2000:]
    seen = eval(out.stdout)  # a list of strings printed by the child
    assert set(seen) <= {"task", FIFO_ERROR}, seen
    assert "task" in seen


CONFIG_FIFO = ("scheduler.yaml: error: not a regular file (a FIFO); fix: replace it with the"
               " config file")


def _cli_within(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return run_cli(home, *args, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"`{' '.join(args)}` hung on a FIFO") from None


def test_a_fifo_in_place_of_the_config_stops_tick_and_validate_in_one_line(home: Path) -> None:
    (home / "tasks" / "good.md").write_text(render_task("good", schedule="0 10 * * *",
                                                        command="echo ok"))
    (home / "scheduler.yaml").write_text("max_parallel: 2\n")
    first = _cli_within(home, "tick", "--now", BEFORE)  # a state and an idle cache to test
    assert first.returncode == 0, first.stderr
    (home / "scheduler.yaml").unlink()
    os.mkfifo(home / "scheduler.yaml")
    for args in (("tick", "--now", BEFORE), ("tick", "--now", NOW), ("validate",)):
        out = _cli_within(home, *args)
        said = out.stdout + out.stderr
        assert out.returncode == 2 and "Traceback" not in said, said
        assert [line for line in said.splitlines() if CONFIG_FIFO in line], said
    assert runs(home, "good") == []  # nothing was run


def test_a_symlinked_config_is_still_followed(home: Path) -> None:
    (home / "tasks" / "good.md").write_text(render_task("good", schedule="0 10 * * *",
                                                        command="echo ok"))
    (home / "real.yaml").write_text("max_parallel: 2\n")
    (home / "scheduler.yaml").symlink_to(home / "real.yaml")
    for now in (BEFORE, NOW, NOW):  # the full tick, the run, then the idle path
        out = _cli_within(home, "tick", "--now", now)
        assert out.returncode == 0, out.stderr
    assert [r[3] for r in runs(home, "good")] == ["success"]
    (home / "real.yaml").write_text("max_parallel: [\n")  # the link's target is what is read
    out = _cli_within(home, "validate")
    assert out.returncode == 2 and "scheduler.yaml" in out.stderr, out.stderr


def test_a_fifo_prompt_template_is_reported_not_waited_on(home: Path) -> None:
    (home / "tasks" / "good.md").write_text(render_task("good", schedule="0 10 * * *",
                                                        command="echo ok"))
    (home / "prompts").mkdir()
    os.mkfifo(home / "prompts" / "self-heal.txt")
    out = _cli_within(home, "validate")
    said = out.stdout + out.stderr
    assert "Traceback" not in said, said
    assert [line for line in said.splitlines() if "prompts/self-heal.txt" in line
            and "not a regular file (a FIFO)" in line], said
