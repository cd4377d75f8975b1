"""A clear stop on a Python without mdcron's packages (issue 25): `python3 scheduler.py list`
with the system's python3 says, in one line, which interpreter to use, and exits 2; never a
traceback or an "internal error, please report" from deep inside a command.

Checked once the idle tick has declined (the idle tick is stdlib only and works anywhere), by
looking the modules up on sys.path without importing them: the path caches it fills are the
ones the real imports use next, so it costs next to nothing. Standard library only.
"""

from __future__ import annotations

import os
import sys

try:  # importlib.machinery's PathFinder, as the interpreter loaded it at start: importing
    # importlib.machinery (importlib, warnings) cost every tick with work ~0.8 ms (issue 27)
    from _frozen_importlib_external import PathFinder
except ImportError:  # pragma: no cover  (not CPython)
    from importlib.machinery import PathFinder

# what every command may load (requirements.txt); the optional ones (anthropic, apprise,
# psycopg, the web's) are imported where needed and say so themselves
REQUIRED = {"croniter": "croniter", "frontmatter": "python-frontmatter", "yaml": "PyYAML",
            "portalocker": "portalocker", "rich": "rich"}
# what doctor runs the crontab's (or systemd unit's) interpreter with: the tick's own needs
IMPORT_CHECK = "import croniter, frontmatter, yaml, portalocker"
MIN_PYTHON = (3, 11)


def missing() -> list[str]:
    """The required modules this interpreter cannot find, in requirements order."""
    return [name for name in REQUIRED if PathFinder.find_spec(name) is None
            and name not in sys.modules]


def stop_line(names: list[str], code_dir: str, python: str = sys.executable) -> str:
    """One line: what is missing, and the interpreter (or the install) that fixes it."""
    venv = os.path.join(code_dir, ".venv", "bin", "python")
    what = (f"mdcron: {python} cannot import {', '.join(names)} (see requirements.txt)")
    # a venv's python is a link to the base one: compare the environments, not the binaries
    inside = os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(code_dir, ".venv"))
    if os.path.exists(venv) and not inside:
        script = os.path.join(code_dir, "scheduler.py")
        return f"{what}; run mdcron with the virtual environment's Python: {venv} {script} …"
    requirements = os.path.join(code_dir, "requirements.txt")
    return (f"{what}; install them: {python} -m venv {os.path.join(code_dir, '.venv')} && "
            f"{os.path.join(code_dir, '.venv', 'bin', 'pip')} install -r {requirements}")


def interpreter_problem(program: str, shown: str, cwd: str | None,
                        environ: dict[str, str]) -> str | None:
    """What is wrong with the interpreter cron or systemd would start (`shown` as written):
    cannot start, too old, or cannot import the packages. One child, 20 s at most."""
    import subprocess  # lazy: only for doctor

    code = f"import sys; print(*sys.version_info[:2], flush=True); {IMPORT_CHECK}"
    try:
        out = subprocess.run([program, "-c", code], capture_output=True, text=True, timeout=20,
                             cwd=cwd if cwd and os.path.isdir(cwd) else None, env=environ)
        major, minor = (int(x) for x in out.stdout.split())
    except (OSError, ValueError, subprocess.SubprocessError):
        return f"{shown} cannot be started"
    if (major, minor) < MIN_PYTHON:
        return f"{shown} is Python {major}.{minor}; mdcron needs 3.11 or newer"
    if out.returncode != 0:
        said = (out.stderr.strip().splitlines() or ["it failed"])[-1]
        return f"{shown} cannot import mdcron's packages ({said})"
    return None
