"""The crontab line: one renderer for the README, doctor and `install --cron`; lines read back
as the shell runs them (`cd` first)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import REPO

from mdcron.cli import crontab_line
from mdcron.cli.doctor import judge_crontab

README_LINE = crontab_line.render("/path/to/mdcron", ".venv/bin/python")


def test_the_readme_shows_the_rendered_line():
    assert README_LINE in (REPO / "README.md").read_text(encoding="utf-8")


def test_doctor_suggests_what_install_writes_and_both_parse_back(tmp_path: Path):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    line = crontab_line.line_for(str(tmp_path), env)
    check = judge_crontab("", tmp_path, env, line)
    assert check.status == "fail" and check.fix.endswith(line)
    tick = crontab_line.parse(line)
    assert tick is not None and tick.home == str(tmp_path) and tick.python == sys.executable
    assert tick.env["PATH"] == env["PATH"]


def test_readme_line_with_home_added_is_resolved_after_cd():
    """Issue 16 (3): `.venv/bin/python` is relative to the folder the line cd's into."""
    line = ("* * * * * cd /path/mdcron && .venv/bin/python scheduler.py tick --home /srv/h"
            " >> logs/tick.log 2>&1")
    tick = crontab_line.parse(line)
    assert tick is not None
    assert tick.python_path == "/path/mdcron/.venv/bin/python"
    assert tick.home == "/srv/h"
    assert tick.script == "/path/mdcron/scheduler.py"


def test_doctor_accepts_the_readme_line_with_home_added(tmp_path: Path):
    code = tmp_path / "code"
    (code / ".venv" / "bin").mkdir(parents=True)
    python = code / ".venv" / "bin" / "python"  # the test's venv, packages and all (a bare
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # symlink would find none)
    python.chmod(0o755)
    (code / "logs").mkdir()  # issue 25: the redirect's folder must exist (doctor checks it)
    home = tmp_path / "home"
    home.mkdir()
    listing = (f"MAILTO=me\n# a comment\n* * * * * cd {code} && .venv/bin/python scheduler.py"
               f" tick --home {home} >> logs/tick.log 2>&1\n")
    check = judge_crontab(listing, home, {"PATH": "/usr/bin:/bin"}, "unused")
    assert check.status == "ok", check


def test_doctor_rejects_a_line_whose_interpreter_is_missing_after_cd(tmp_path: Path):
    listing = (f"* * * * * cd {tmp_path} && .venv/bin/python scheduler.py tick"
               " >> logs/tick.log 2>&1\n")
    check = judge_crontab(listing, tmp_path, {}, "the fix")
    assert check.status == "fail" and "cannot be started" in check.detail


def test_other_homes_and_non_tick_lines():
    assert crontab_line.parse("MAILTO=me") is None
    assert crontab_line.parse("# * * * * * scheduler.py tick") is None
    assert crontab_line.parse("0 6 * * * /usr/bin/backup") is None
    assert crontab_line.parse("* * * * * python3 scheduler.py list") is None
    tick = crontab_line.parse("@reboot MDCRON_HOME=/h python3 /c/scheduler.py tick")
    assert tick is not None and tick.home == "/h" and tick.python_path is None
    tick = crontab_line.parse("*/1 * * * * /usr/bin/python3 /opt/m/scheduler.py --home=/x/ tick")
    assert tick is not None and tick.home == "/x"
    tick = crontab_line.parse("* * * * * /usr/bin/python3 /opt/m/scheduler.py tick")
    assert tick is not None and tick.home == "/opt/m"  # the folder holding scheduler.py


def test_percent_signs_are_escaped_and_read_back():
    line = crontab_line.render("/srv/100%", "/usr/bin/python3", "/c/scheduler.py")
    assert "100\\%" in line
    tick = crontab_line.parse(line)
    assert tick is not None and tick.home == "/srv/100%"
    # an unescaped % ends the command for cron: what follows is stdin, not arguments
    tick = crontab_line.parse("* * * * * cd /a && python3 scheduler.py tick %--home /b")
    assert tick is not None and tick.home == "/a"
