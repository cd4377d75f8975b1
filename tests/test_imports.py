"""Lazy heavy imports: a tick with nothing for Claude never loads anthropic, nor rich; a tick on
SQLite never loads the leases of a shared state (hosts/lease.py), nor, without a task that uses
them, the chains' rounds, the runs waiting for units or once_per."""

import ast
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
import mdcron.run.ticklog
names = [("mdcron.core.units", "_DURATION"), ("mdcron.core.units", "_COMPOUND"),
         ("mdcron.core.cron", "_ITEM"), ("mdcron.core.accounts", "NAME"),
         ("mdcron.settings.notify", "_QUIET"), ("mdcron.settings.state_url", "_PASSWORD_PARAM"),
         ("mdcron.tasks.outside_keys", "_SIZE"), ("mdcron.tasks.outside_keys", "_URL_HOST"),
         ("mdcron.tasks.run_keys", "_EXPONENTIAL"), ("mdcron.run.ticklog", "_TASK_PREFIX"),
         ("mdcron.core.envref", "ENV_REF"), ("mdcron.core.envref", "SCHEME"),
         ("mdcron.run.environment", "_CLAUDE_WORD")]
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
       "mdcron.cli.actions", "mdcron.cli.audit", "mdcron.settings.state_url",
       "mdcron.core.accounts", "grp", "shlex", "mdcron.schedule.observe",
       "mdcron.tasks.outside_keys", "mdcron.state.audit", "mdcron.state.heals",
       "mdcron.state.hosts", "mdcron.state.incidents", "mdcron.state.leases",
       "mdcron.state.metrics", "mdcron.state.outbox")
loaded = []
def hook(event, args):
    if event == "subprocess.Popen" and not loaded:  # the due task's process, about to start
        loaded.append(sorted(m for m in OFF if m in sys.modules))
        globs = sys.modules["fnmatch"]._compile_pattern.cache_info().currsize  # pathlib's
        print("GLOBS COMPILED", globs)
        import re
        from mdcron.core import envref
        refs = {envref.ENV_REF.pattern, envref.SCHEME.pattern}
        print("ENVREF COMPILED", sorted(k[1] for k in re._cache if k[1] in refs))
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
    only the end of a run needs (overlap, pings, a stopped run, retention) loads after it;
    the tick loads the commands' actions only for a timed pause that is over, and the audit of
    commands not at all; this host's name is found without state_url.py's patterns; secret
    names without a glob are compared, not compiled by fnmatch; user and group names are
    looked up (core/accounts.py, grp) only for a task that names an account; shlex splits
    only a script task's command (or one that names claude); a config without `${` and
    without notification URLs compiles neither of envref's patterns; the first-seen rule
    (schedule/observe.py) loads only for a task without a state row, the size words
    (tasks/outside_keys.py) only to word a kill; the store's seldom-used tables (audit, heals,
    hosts, incidents, leases, metrics, outbox: state/seldom.py) only when one is used."""
    write_task("every-minute", command="true")
    for minute in ("10:00", "10:01", "10:02"):  # the last one as every tick from then on
        out = subprocess.run([sys.executable, "-c", SPAWN_PROBE, str(home),
                              f"2026-11-23T{minute}:00+00:00"], cwd=REPO,
                             capture_output=True, text=True)
        age_cache(home)  # files as old as cron's: the next tick trusts its cache
    assert "BEFORE THE TASK [[]]" in out.stdout, out.stdout + out.stderr
    assert "GLOBS COMPILED 0" in out.stdout, out.stdout + out.stderr
    assert "ENVREF COMPILED []" in out.stdout, out.stdout + out.stderr


WHOLE_TICK_PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("LOADED", code, sorted(m for m in ("zoneinfo", "sysconfig", "struct", "croniter",
                                        "mdcron.state.metrics", "mdcron.state.metrics_file",
                                        "mdcron.core.zones")
                              if m in sys.modules))
"""


def test_a_utc_tick_never_imports_zoneinfo(home, write_task):
    """Issue 27: with `timezone: UTC` a one-due tick computes the fire after its task's next
    (core/wall_steps.py) in datetime's UTC: zoneinfo and the sysconfig it reads its search
    path from (~2 ms) are never imported, nor struct (croniter's probe only)."""
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 4\n", encoding="utf-8")
    write_task("every-minute", command="true")
    for minute in ("10:00", "10:01", "10:02"):  # the last one as every tick from then on
        out = subprocess.run([sys.executable, "-c", WHOLE_TICK_PROBE, str(home),
                              f"2026-11-23T{minute}:00+00:00"], cwd=REPO,
                             capture_output=True, text=True)
        age_cache(home)
    assert "LOADED 0 []" in out.stdout, out.stdout + out.stderr
    assert not (home / "state" / "zone-checked").exists()  # nothing to note for UTC


QUIET_END_PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("AFTER", code, sorted(m for m in ("mdcron.alerts", "mdcron.alerts.after_run",
                                       "mdcron.run.incident_command", "mdcron.state.incidents",
                                       "mdcron.state.outbox") if m in sys.modules))
"""


def test_a_plain_success_imports_no_alerts(home, write_task):
    """Issue 27: a tick whose task succeeds with nothing alerted, no incident open and an
    empty outbox reads that (store.quiet_success, quiet_end) and loads neither the alerts
    nor the incidents' and the outbox's tables (~1 ms of a one-due tick's end)."""
    write_task("every-minute", command="true")
    for minute in ("10:00", "10:01", "10:02"):
        out = subprocess.run([sys.executable, "-c", QUIET_END_PROBE, str(home),
                              f"2026-11-23T{minute}:00+00:00"], cwd=REPO,
                             capture_output=True, text=True)
        age_cache(home)
    assert "AFTER 0 []" in out.stdout, out.stdout + out.stderr


SLOTS_PROBE = """
import sys
import mdcron.cli.commands, mdcron.run.dispatch, mdcron.run.tick, mdcron.schedule.cache
slotted = sorted(f"{v.__module__}.{v.__qualname__}" for name, m in list(sys.modules.items())
                 if name.startswith("mdcron") for v in vars(m).values()
                 if isinstance(v, type) and v.__module__ == name
                 and hasattr(v, "__record_fields__") and "__slots__" in v.__dict__)
print("SLOTTED", slotted)
"""


def test_records_made_once_a_tick_are_built_once():
    """Issue 27: a record class with slots is built twice (core/records.py); the tick's
    records made once a tick or once a run (its config, report, run context, a ladder's
    outcome...) are plain, and only those made per file, row or task keep their slots."""
    out = subprocess.run([sys.executable, "-c", SLOTS_PROBE], cwd=REPO, capture_output=True,
                         text=True)
    names = [n.rsplit(".", 1)[1] for n in ast.literal_eval(out.stdout.partition("SLOTTED ")[2])]
    per_tick = {"Config", "ClaudeConfig", "NotifyConfig", "QuietHours", "TickReport",
                "RunContext", "LadderOutcome", "LadderState", "CommandSpec", "Limits",
                "Switch", "TickIds", "RunAccount", "HealRecord", "Recovered", "TaskSet",
                "RunFilter", "LockInfo"}
    assert not per_tick & set(names), out.stdout + out.stderr
    assert {"Task", "Entry", "TaskState", "Problem", "RunResult", "Planned"} <= set(names)
