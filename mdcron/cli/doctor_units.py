"""doctor's check of installed systemd units (issue 25): the interpreter their ExecStart=
starts must be able to import mdcron's packages, as the crontab line's must (doctor.py).
A home without units installed gets no line."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from .install import unit_dir, unit_name
from .requirements import interpreter_problem


def unit_checks(home: Path, environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(status, detail, fix) per installed service unit of this home (system and user units);
    doctor.py makes them its `systemd` lines."""
    checks = []
    name = unit_name(home)
    for user in (False, True):
        for kind in ("daemon", "tick"):
            path = unit_dir(user, environ) / f"{name}-{kind}.service"
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            program = exec_program(text)
            if program is None:
                checks.append(("warn", f"{path}: no ExecStart= line",
                               "`scheduler.py install --systemd` writes it again"))
                continue
            problem = interpreter_problem(program, program, str(home), dict(environ))
            if problem:
                checks.append(("fail", f"{path}: {problem}",
                               "`scheduler.py install --systemd` (run with the virtual"
                               " environment's Python) writes it with that interpreter"))
            else:
                checks.append(("ok", f"{path}: {program}", ""))
    return checks


def exec_program(text: str) -> str | None:
    """The program of the unit's ExecStart= (install.py quotes it; %% and $$ unescaped)."""
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            try:
                words = shlex.split(line.removeprefix("ExecStart="))
            except ValueError:
                return None
            return words[0].replace("%%", "%").replace("$$", "$") if words else None
    return None
