"""Lazy heavy imports: a tick with nothing for Claude never loads anthropic, nor rich; a tick on
SQLite never loads the leases of a shared state (hosts/lease.py), nor, without a task that uses
them, the chains' rounds, the runs waiting for units or once_per."""

import subprocess
import sys

from conftest import REPO, age_cache

PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", "2026-11-23T10:00:00+00:00"])
heavy = sorted(m for m in ("anthropic", "rich", "apprise", "httpx", "starlette", "uvicorn",
                            "jinja2", "markdown_it", "playwright", "mdcron.web", "psycopg",
                            "mdcron.state.pgstate", "mdcron.hosts.lease",
                            "mdcron.run.chain_rounds", "mdcron.run.resource_runs",
                            "mdcron.schedule.once_per")
               if m in sys.modules)
print("HEAVY", heavy)
"""


def test_tick_imports_no_heavy_modules(home, write_task):
    write_task("plain", command="true")
    out = subprocess.run([sys.executable, "-c", PROBE, str(home)], cwd=REPO,
                         capture_output=True, text=True)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


PATTERNS_PROBE = """
import importlib, re
import mdcron.core.records, mdcron.core.wall_time, mdcron.core.due, mdcron.core.problems
names = [("mdcron.core.units", "_DURATION"), ("mdcron.core.units", "_COMPOUND"),
         ("mdcron.core.cron", "_ITEM"), ("mdcron.core.accounts", "NAME"),
         ("mdcron.settings.notify", "_QUIET"), ("mdcron.settings.state_url", "_PASSWORD_PARAM"),
         ("mdcron.tasks.outside_keys", "_SIZE"), ("mdcron.tasks.outside_keys", "_URL_HOST"),
         ("mdcron.tasks.run_keys", "_EXPONENTIAL")]
values = [getattr(importlib.import_module(m), n) for m, n in names]
texts = {v if isinstance(v, str) else v.pattern for v in values}
print("COMPILED", sorted(k[1] for k in re._cache if k[1] in texts))
"""


def test_patterns_off_the_tick_path_compile_on_first_use():
    """Issue 27: importing the modules a tick loads compiles no pattern the tick from the
    cache does not use (durations, cron fields, quiet hours, sizes...): `re` compiles each
    on its first use."""
    out = subprocess.run([sys.executable, "-c", PATTERNS_PROBE], cwd=REPO,
                         capture_output=True, text=True)
    assert "COMPILED []" in out.stdout, out.stdout + out.stderr


CONNECTS_PROBE = """
import sys
from mdcron.cli.main import main
opened = []
sys.addaudithook(lambda e, a: opened.append(str(a[0])) if e == "sqlite3.connect" else None)
for minute in ("10:00", "10:01"):  # the first reads the files, the second has a due row
    opened.clear()
    code = main(["--home", sys.argv[1], "tick", "--now", f"2026-11-23T{minute}:00+00:00"])
print("CONNECTS", code, sorted(set(opened)), len(opened))
"""


def test_due_tick_reads_its_cache_through_the_idle_checks_connection(home, write_task):
    """Issue 27: the idle check that declines because a task is due hands its connection to
    the full tick's cache read (state/idle.take_connection): no read-only one is opened."""
    write_task("every-minute", command="true")
    out = subprocess.run([sys.executable, "-c", CONNECTS_PROBE, str(home)], cwd=REPO,
                         capture_output=True, text=True)
    db = str(home / "state" / "mdcron.db")
    assert f"CONNECTS 0 ['{db}'] 3" in out.stdout, out.stdout + out.stderr


SPAWN_PROBE = """
import sys
OFF = ("typing", "ctypes", "importlib", "mdcron.run.overlap", "mdcron.hosts.replace_marks",
       "mdcron.run.pings", "mdcron.run.exit_time", "mdcron.run.stop", "mdcron.run.retention",
       "mdcron.state.outbox", "mdcron.state.incidents", "mdcron.state.heals",
       "mdcron.state.leases", "mdcron.state.hosts", "mdcron.state.metrics",
       "mdcron.cli.actions", "mdcron.cli.audit", "mdcron.settings.state_url")
loaded = []
def hook(event, args):
    if event == "subprocess.Popen" and not loaded:  # the due task's process, about to start
        loaded.append(sorted(m for m in OFF if m in sys.modules))
sys.addaudithook(hook)
from mdcron.cli.main import main
main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("BEFORE THE TASK", loaded)
"""


def test_a_due_task_starts_before_what_it_does_not_need_is_imported(home, write_task):
    """Issue 27: typing (~2.5 ms) is for the type checker: the modules a due tick loads before
    its task starts import it under TYPE_CHECKING only (a protocol is a plain class at run
    time); prctl is called through _ctypes, without the ctypes package (~1.5 ms); the package
    check finds modules with the interpreter's own PathFinder (no importlib, warnings); what
    only the end of a run needs (overlap, pings, a stopped run, retention) loads after it,
    and so do the tables the store joins on first use (state/tables_later.py); the tick
    loads the commands' actions only for a timed pause that is over, and the audit of
    commands not at all; this host's name is found without state_url.py's patterns."""
    write_task("every-minute", command="true")
    for minute in ("10:00", "10:01", "10:02"):  # the last one as every tick from then on
        out = subprocess.run([sys.executable, "-c", SPAWN_PROBE, str(home),
                              f"2026-11-23T{minute}:00+00:00"], cwd=REPO,
                             capture_output=True, text=True)
        age_cache(home)  # files as old as cron's: the next tick trusts its cache
    assert "BEFORE THE TASK [[]]" in out.stdout, out.stdout + out.stderr


JOIN_PROBE = """
import sys
from mdcron.state.store import Store
made = Store(__import__("pathlib").Path(sys.argv[1]))  # before the later tables joined
print("BEFORE", "mdcron.state.outbox" in sys.modules, len(Store.__mro__))
with made:
    print("WAITING", made.outbox_waiting())  # an outbox operation joins them
print("AFTER", [k.__name__ for k in Store.__mro__])
try:
    made.no_such_operation
except AttributeError as exc:
    print("MISSING", exc)
"""


def test_store_joins_its_later_tables_on_first_use(tmp_path):
    """Issue 27 (state/tables_later.py): outbox, incidents, heals, leases, hosts and metrics
    load on the store's first use of one of them, by a store made before too, and the store's
    method resolution order is then the one it had when it named every table."""
    db = tmp_path / "state" / "mdcron.db"
    db.parent.mkdir()
    out = subprocess.run([sys.executable, "-c", JOIN_PROBE, str(db)], cwd=REPO,
                         capture_output=True, text=True)
    assert "BEFORE False" in out.stdout, out.stdout + out.stderr
    assert "WAITING False" in out.stdout, out.stdout + out.stderr
    order = ["Store", "TaskStateTable", "RunsTable", "MetaTable", "OutboxTable",
             "IncidentsTable", "CommentsTable", "HealsTable", "LeasesTable", "HostsTable",
             "ClockBackTable", "AuditTable", "MetricsTable", "Tables", "JoinsLater", "object"]
    assert f"AFTER {order}" in out.stdout, out.stdout + out.stderr
    assert "MISSING 'Store' object has no attribute 'no_such_operation'" in out.stdout, (
        out.stdout + out.stderr)


RACE_PROBE = """
import threading
from mdcron.state.store import Store
names = ["outbox_waiting", "open_or_bump_incident", "metric_rows", "take_lease"] * 4
start, got = threading.Barrier(len(names)), []
def look(name):
    start.wait()
    got.append(callable(getattr(Store, name, None)))
threads = [threading.Thread(target=look, args=(n,)) for n in names]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("FOUND", got.count(True), "OF", len(got))
"""


def test_threads_that_miss_at_once_all_find_the_later_tables():
    """A thread whose lookup missed while another joined the tables looks again (a tick's
    workers end their runs at once: the first to write an incident joins them)."""
    out = subprocess.run([sys.executable, "-c", RACE_PROBE], cwd=REPO,
                         capture_output=True, text=True)
    assert "FOUND 16 OF 16" in out.stdout, out.stdout + out.stderr
