"""Issue 25 item 6: a Python without mdcron's packages is a clear stop, and `doctor` checks
what cron will really start (the line's interpreter can import the packages, its log folder
exists, it runs every minute). Real interpreters: a bare venv made here without pip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from mdcron.cli.doctor import judge_crontab


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A real Python 3.11+ with none of the requirements (a venv without pip or packages)."""
    folder = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    python = folder / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import croniter"], capture_output=True)
    assert probe.returncode != 0  # really bare
    return python


def _run(python: Path, script: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(script), "--home", str(home), *args],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"})


@pytest.mark.parametrize("command", [["list"], ["tick"], ["validate"], ["why", "t"]])
def test_a_python_without_the_packages_names_the_venv_and_exits_2(bare_python, home,
                                                                   write_task, command):
    write_task("t", command="true")
    out = _run(bare_python, REPO / "scheduler.py", home, *command)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and out.stdout == "", out.stderr
    assert f"{bare_python} cannot import croniter" in lines[0]
    assert f"{REPO / '.venv' / 'bin' / 'python'} {REPO / 'scheduler.py'}" in lines[0]


def test_without_a_venv_it_says_how_to_install(bare_python, home, tmp_path):
    code = tmp_path / "code"  # a checkout with no .venv yet
    shutil.copytree(REPO / "mdcron", code / "mdcron",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "scheduler.py", code / "scheduler.py")
    out = _run(bare_python, code / "scheduler.py", home, "list")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert (f"install them: {bare_python} -m venv {code / '.venv'} && "
            f"{code / '.venv' / 'bin' / 'pip'} install -r {code / 'requirements.txt'}"
            in out.stderr), out.stderr


def _line(home: Path, python: Path | str, when: str = "* * * * *",
          log: str = "logs/tick.log") -> str:
    return (f"{when} cd {home} && MDCRON_HOME={home} exec {python} {REPO / 'scheduler.py'}"
            f" tick >> {log} 2>&1\n")


def test_doctor_fails_a_crontab_python_that_cannot_import_the_packages(bare_python, home):
    (home / "logs").mkdir()
    check = judge_crontab(_line(home, bare_python), home, {"PATH": "/usr/bin:/bin"}, "FIX")
    assert check.status == "fail", check
    assert "cannot import mdcron's packages" in check.detail and "croniter" in check.detail
    assert check.fix.endswith("FIX")
    good = judge_crontab(_line(home, sys.executable), home, {"PATH": "/usr/bin:/bin"}, "FIX")
    assert good.status == "ok", good


def test_doctor_fails_a_log_redirect_into_a_missing_folder(home):
    check = judge_crontab(_line(home, sys.executable), home, {}, "FIX")  # no logs/ yet
    assert check.status == "fail", check
    assert f"the folder of its log, {home / 'logs'}, does not exist" in check.detail
    assert check.fix == f"mkdir -p {home / 'logs'}"


def test_doctor_warns_about_a_tick_line_that_is_not_every_minute(home):
    (home / "logs").mkdir()
    check = judge_crontab(_line(home, sys.executable, "*/5 * * * *"), home, {}, "FIX")
    assert check.status == "warn" and "'*/5 * * * *', not every minute" in check.detail, check


def test_doctor_checks_the_interpreter_of_an_installed_systemd_unit(bare_python, home,
                                                                     tmp_path):
    import json

    from conftest import run_cli

    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}
    installed = run_cli(home, "install", "--systemd", "--user", env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    units = list((tmp_path / "config" / "systemd" / "user").glob("*-daemon.service"))
    assert len(units) == 1

    def systemd_checks() -> list[dict]:
        out = run_cli(home, "doctor", "--json", env=env)
        return [c for c in json.loads(out.stdout) if c["check"] == "systemd"]

    assert [c["status"] for c in systemd_checks()] == ["ok"]
    text = units[0].read_text()
    units[0].write_text(text.replace(f'ExecStart="{sys.executable}"',
                                     f'ExecStart="{bare_python}"'))
    found = systemd_checks()
    assert [c["status"] for c in found] == ["fail"], found
    assert "cannot import mdcron's packages" in found[0]["detail"]
    assert "install --systemd" in found[0]["fix"]
