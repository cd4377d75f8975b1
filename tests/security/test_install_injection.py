"""`install` writes only what it means: a home path that carries a newline (or any character the
crontab or a unit file cannot hold as written) is refused before anything changes; every other
character class goes in quoted, checked against the real `crontab`, the real `/bin/sh` that cron
runs the line with, and `systemd-analyze verify`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SCHEDULER
from crontab_spool import OTHER, _env

from mdcron.cli import crontab_line
from mdcron.cli.install import MARKER

REFUSED = {  # class: a character of it
    "newline": "\n", "carriage return": "\r", "tab": "\t", "escape": "\x1b", "DEL": "\x7f",
    "C1 next line": "\x85", "line separator": "\u2028", "bidi override": "\u202e",
    "a byte that is not UTF-8": os.fsdecode(b"\xff"),
}
QUOTED = {  # characters a shell or cron gives a meaning to, and plain non-ASCII
    "space": " ", "percent": "%", "dollar": "$", "single quote": "'", "double quote": '"',
    "semicolon": ";", "ampersand": "&", "pipe": "|", "backtick": "`", "hash": "#",
    "asterisk": "*", "tilde": "~", "non-ASCII": "é", "backslash": "\\",
}
INJECTION = "x\n* * * * * touch /tmp/pwned-by-mdcron-home\n"


def _home(tmp_path: Path, char: str, end: str = "x") -> Path:
    home = tmp_path / f"h{char}me{char}{end}"
    (home / "tasks").mkdir(parents=True)
    return home


def _cli(home: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), *args],
                          capture_output=True, text=True, env=env or _env(), timeout=60)


@pytest.mark.parametrize("char", REFUSED.values(), ids=REFUSED.keys())
def test_a_home_the_crontab_cannot_carry_is_refused_and_nothing_changes(tmp_path, crontab_ns,
                                                                        char):
    run, _ = crontab_ns
    assert run("sh", "-c", f"printf '{OTHER}' | crontab -").returncode == 0
    home = _home(tmp_path, char)
    out = run(sys.executable, str(SCHEDULER), "--home", str(home), "install", "--cron")
    assert out.returncode == 1, out
    assert "cannot carry" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert run("crontab", "-l").stdout == OTHER


def test_the_newline_attack_adds_no_entry_and_no_exec_line(tmp_path, crontab_ns):
    run, _ = crontab_ns
    home = tmp_path / INJECTION
    (home / "tasks").mkdir(parents=True)
    out = run(sys.executable, str(SCHEDULER), "--home", str(home), "install", "--cron")
    assert out.returncode == 1 and "a newline at position" in out.stderr, out
    assert "touch" not in run("crontab", "-l").stdout
    env = {**_env(), "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    unit = _cli(home, "install", "--systemd", "--user", env=env)
    assert unit.returncode == 1 and "a newline" in unit.stderr, unit
    assert not (tmp_path / "cfg").exists()


@pytest.mark.parametrize("char", QUOTED.values(), ids=QUOTED.keys())
def test_a_quoted_home_is_one_entry_that_cron_runs_as_written(tmp_path, crontab_ns, char):
    run, _ = crontab_ns
    assert run("sh", "-c", f"printf '{OTHER}' | crontab -").returncode == 0
    home = _home(tmp_path, char)
    out = run(sys.executable, str(SCHEDULER), "--home", str(home), "install", "--cron")
    assert out.returncode == 0, out.stderr
    listing = run("crontab", "-l").stdout
    added = listing[len(OTHER):].splitlines()
    assert listing.startswith(OTHER) and len(added) == 2, listing
    assert added[0] == MARKER.format(home=home)
    tick = crontab_line.parse(added[1])
    assert tick is not None and tick.home == str(home)
    # what cron does with the line: `%` unescaped, the rest given to /bin/sh -c
    command = crontab_line._unescape_percent(crontab_line.command_part(added[1]) or "")
    ran = subprocess.run(["/bin/sh", "-c", command], env=_env(), timeout=60,
                         capture_output=True, text=True)
    assert ran.returncode == 0, (command, ran.stderr)
    assert (home / "logs" / "tick.log").is_file() and (home / "state").is_dir(), ran.stdout
    gone = run(sys.executable, str(SCHEDULER), "--home", str(home), "uninstall", "--cron")
    assert gone.returncode == 0 and run("crontab", "-l").stdout == OTHER, gone


def _directives(text: str) -> list[tuple[str, str]]:
    """A unit file read as systemd reads it: a trailing backslash joins lines."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            out.append((key.strip(), value))
    return out


SYSTEMD_REFUSED = {**REFUSED, "backslash": "\\", "trailing space": " "}
SYSTEMD_QUOTED = {k: v for k, v in QUOTED.items() if v != "\\"}


@pytest.mark.parametrize("char", SYSTEMD_REFUSED.values(), ids=SYSTEMD_REFUSED.keys())
def test_a_home_a_unit_file_cannot_carry_is_refused(tmp_path, char):
    home = _home(tmp_path, char, end="")
    env = {**_env(), "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    out = _cli(home, "install", "--systemd", "--user", env=env)
    assert out.returncode == 1 and ("cannot carry" in out.stderr
                                    or "white space" in out.stderr), out
    assert not (tmp_path / "cfg").exists()


@pytest.mark.parametrize("timer", [False, True], ids=["daemon", "timer"])
@pytest.mark.parametrize("char", SYSTEMD_QUOTED.values(), ids=SYSTEMD_QUOTED.keys())
def test_a_quoted_home_gives_units_with_exactly_their_directives(tmp_path, char, timer):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze (Debian: apt-get install systemd)")
    home = _home(tmp_path, char)
    env = {**_env(), "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    out = _cli(home, "install", "--systemd", "--user", *(["--timer"] if timer else []), env=env)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "cfg" / "systemd" / "user"
    units = sorted(folder.iterdir())
    check = subprocess.run([analyze, "verify", *map(str, units)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and check.stderr.strip() == "", check.stderr
    service = next(p for p in units if p.name.endswith(".service")).read_text(encoding="utf-8")
    keys = [k for k, _ in _directives(service)]
    expected = ["Description", "Type", "WorkingDirectory", "Environment", "Environment",
                "ExecStart", "KillMode"]
    if not timer:
        expected += ["TimeoutStopSec", "Restart", "RestartSec", "WantedBy"]
    assert keys == expected, service
    assert dict(_directives(service))["WorkingDirectory"].replace("%%", "%") == str(home)
