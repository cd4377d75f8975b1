"""Shared fixtures: a temporary mdcron home, a task-file factory, and the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
SCHEDULER = REPO / "scheduler.py"
# the end of a `python -c` probe that runs scheduler.py (argv[1]) as __main__ under its hooks
RUN_SCHEDULER = """
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
"""

# The suite sets its own terminal width: a COLUMNS exported by the person's shell (80, say)
# would otherwise reach every CLI subprocess and re-wrap the tables the tests read. A test about
# narrow terminals passes its own COLUMNS.
os.environ["COLUMNS"] = "160"
os.environ.pop("LINES", None)

# Property tests draw the same examples on every run (CI's .ci/run included): a red run then
# means a change, not an unlucky draw. HYPOTHESIS_PROFILE=explore draws new ones (and keeps the
# failures it finds in .hypothesis/). No per-example deadline: on a shared, loaded machine it
# times the machine; each test's own settings choose how many examples it tries.
settings.register_profile("fixed", derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))

# Issue 28: while mutmut collects which tests reach which function, the calls made in
# subprocesses (the real CLI) count too (tools/mutmut_site/sitecustomize.py).
_MUTMUT_HITS = None
if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    import tempfile

    _MUTMUT_HITS = tempfile.mkdtemp(prefix="mdcron-mutmut-hits-")
    os.environ["MUTMUT_MDCRON_HITS"] = _MUTMUT_HITS
    _site = str(Path(__file__).resolve().parent.parent / "tools" / "mutmut_site")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [_site, *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """Hand the functions this test's subprocesses called to mutmut's stats (see above)."""
    if _MUTMUT_HITS is None:
        return
    from mutmut.state import state

    for hits in Path(_MUTMUT_HITS).glob("*.hits"):
        state()._stats.update(hits.read_text(encoding="utf-8").split())
        hits.unlink()


if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from crontab_spool import crontab_ns  # noqa: E402, F401  (fixture)
from fake_anthropic import fake_claude  # noqa: E402, F401  (fixture)
from http_sink import http_sink_fixture  # noqa: E402, F401  (fixture `http_sink`)
from pg_server import pg_server, pg_url, state_url, state_url_env  # noqa: E402, F401  (fixtures: issue 11)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    (h / "tasks").mkdir(parents=True)
    return h


def render_task(task_id: str, body: str = "", **fields: object) -> str:
    """A task file with `id` and the given keys (YAML via json for values: always valid)."""
    fields.setdefault("schedule", "* * * * *")
    lines = ["---", f"id: {task_id}"]
    for key, value in fields.items():
        lines.append(f"{key}: {json.dumps(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n\n" + textwrap.dedent(body)


@pytest.fixture
def write_task(home: Path) -> Callable[..., Path]:
    def write(task_id: str, body: str = "", filename: str | None = None, **fields: object) -> Path:
        path = home / "tasks" / (filename or f"{task_id}.md")
        path.write_text(render_task(task_id, body, **fields), encoding="utf-8")
        return path

    return write


def run_cli(home: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh interpreter, as cron would start it."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, str(SCHEDULER), "--home", str(home), *args],
        capture_output=True, text=True, env=full_env, timeout=timeout,
    )


def overdue_lock(home: Path, task_id: str, seconds: float = 600.0) -> None:
    """As if the task had been running `seconds` longer: its lock record's monotonic deadline
    (what decides a stale lock, locks.is_stale) moved back. Waits for the record to name the
    task's process group first (the tick writes it once more when the task starts)."""
    import time

    path = home / "state" / "locks" / f"{task_id}.lock"
    give_up = time.monotonic() + 30
    while True:
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict) and info.get("pgid") and info.get("mono_deadline"):
            break
        assert time.monotonic() < give_up, f"{task_id}'s lock record never named its group"
        time.sleep(0.02)
    info["mono_deadline"] -= seconds
    with open(path, "r+", encoding="utf-8") as handle:  # in place: the holder keeps its flock
        handle.truncate()
        handle.write(json.dumps(info, sort_keys=True))


def age_cache(home: Path) -> None:
    """As if the last tick had read the task files 10 s earlier: the task cache's rows are no
    longer "racy" (the 2 s window in which a file edit could hide from its mtime)."""
    import sqlite3

    if not (home / "state" / "mdcron.db").exists():
        return
    db = sqlite3.connect(home / "state" / "mdcron.db", isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    sealed = db.execute("SELECT value FROM meta WHERE key = 'cache_sealed'").fetchone()
    db.execute("UPDATE task_cache SET read_ns = read_ns + 10000000000")
    if sealed is not None:  # the triggers unseal on any change; only save() may seal
        db.execute("UPDATE meta SET value = ? WHERE key = 'cache_sealed'", sealed)
    db.execute("COMMIT")
    db.close()


@pytest.fixture
def cli(home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def call(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return run_cli(home, *args, **kw)  # type: ignore[arg-type]

    return call
