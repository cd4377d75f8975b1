"""Lazy heavy imports: a tick with nothing for Claude never loads anthropic, nor rich; a tick on
SQLite never loads the leases of a shared state (hosts/lease.py)."""

import subprocess
import sys

from conftest import REPO

PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", "2026-11-23T10:00:00+00:00"])
heavy = sorted(m for m in ("anthropic", "rich", "apprise", "httpx", "starlette", "uvicorn",
                            "jinja2", "markdown_it", "playwright", "mdcron.web", "psycopg",
                            "mdcron.state.pgstate", "mdcron.hosts.lease")
               if m in sys.modules)
print("HEAVY", heavy)
"""


def test_tick_imports_no_heavy_modules(home, write_task):
    write_task("plain", command="true")
    out = subprocess.run([sys.executable, "-c", PROBE, str(home)], cwd=REPO,
                         capture_output=True, text=True)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
