"""What a task's process sees: the scheduler's environment without its secrets, the task's own
variables, the MDCRON_* facts of the run, and an isolated CLAUDE_CONFIG_DIR."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..settings.config import is_secret
from ..tasks.task import Task

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from ..state.protocol import State

RESERVED_PREFIX = "MDCRON_"  # the scheduler's namespace: a task's env cannot set these


def task_environment(
    base: Mapping[str, str],
    task: Task,
    *,
    secret_names: Sequence[str],
    run_id: int,
    attempt: int,
    claude_config_dir: Path,
    account: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for one run of a task.

    ``base`` minus every secret (exact names or globs; ANTHROPIC_API_KEY always) except those
    the task names in ``secrets``, then the task's ``env`` taken literally (no ${VAR} expansion,
    so a task file cannot pull a secret in by reference), then MDCRON_TASK_ID, MDCRON_RUN_ID,
    MDCRON_ATTEMPT and MDCRON_NOTIFY_DEST, then CLAUDE_CONFIG_DIR (the task's ``claude_config``
    or the scheduler's folder). Task env keys starting with MDCRON_ are ignored. ``account``
    (HOME, USER, LOGNAME of a task's `user:`) comes before the task's ``env``, as in a crontab."""
    asked = set(task.secrets)
    if asked:
        env = {k: v for k, v in base.items() if k in asked or not is_secret(k, secret_names)}
    else:
        env = dict(_without_secrets(base, secret_names))
    env.update(account or {})
    for key, value in task.env.items():
        if not str(key).startswith(RESERVED_PREFIX):
            env[str(key)] = str(value)
    env["MDCRON_TASK_ID"] = task.id
    env["MDCRON_RUN_ID"] = str(run_id)
    env["MDCRON_ATTEMPT"] = str(attempt)
    env["MDCRON_NOTIFY_DEST"] = task.notify_to or ""
    env["CLAUDE_CONFIG_DIR"] = task.claude_config or str(claude_config_dir)
    return env


_PLAIN: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], dict[str, str]] = {}


def filter_ahead(base: Mapping[str, str], secret_names: Sequence[str]) -> None:
    """Issue 27, the daemon's held tick (cli/warm.py): `base` minus its secrets worked out
    before the minute (~0.45 ms, once, on the first run's path at the go). Kept by the
    environment's items: the runs of an environment changed meanwhile work it out again."""
    _without_secrets(base, secret_names)


def _without_secrets(base: Mapping[str, str], secret_names: Sequence[str]) -> dict[str, str]:
    """`base` minus every secret, worked out once per (environment, secret names) for the
    tick's runs (issue 27: ~35 name checks against the globs per run, 100 runs at once); the
    key is the environment's items themselves, so a changed one is worked out again."""
    key = (tuple(base.items()), tuple(secret_names))
    plain = _PLAIN.get(key)
    if plain is None:
        plain = {k: v for k, v in base.items() if not is_secret(k, secret_names)}
        if len(_PLAIN) >= 8:  # a tick has one environment; tests and `run` a few
            _PLAIN.clear()
        _PLAIN[key] = plain
    return plain


# --- commands that would run claude outside CLAUDE_CONFIG_DIR ------------------------------------

# a plain string, compiled by `re` on first use (issue 27: `validate` and `show` ask, no tick)
_CLAUDE_WORD = r"(?<![\w.-])claude(?![\w.-])"
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish"}
_OPERATORS = {";", "&", "&&", "|", "||", "|&", ";;", "(", ")", "\n"}


def _words(command: str) -> list[str]:
    import shlex  # lazy: only for a command that names claude (issue 27: off a task's start)

    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: a rough split still finds the words
        return command.replace("\n", " ; ").split()


def _simple_commands(words: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _OPERATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _mentions_claude(words: Sequence[str]) -> bool:
    return any(re.search(_CLAUDE_WORD, w) for w in words)


def _env_clears(args: Sequence[str]) -> bool:
    """Whether `env args...` starts its command without the inherited CLAUDE_CONFIG_DIR."""
    for i, arg in enumerate(args):
        if arg.startswith("CLAUDE_CONFIG_DIR=") or arg in ("-", "-i", "--ignore-environment"):
            return True
        if arg.startswith("--unset="):
            if arg == "--unset=CLAUDE_CONFIG_DIR":
                return True
        elif arg.startswith("-") and not arg.startswith("--"):
            if "i" in arg[1:]:
                return True
            unset = arg.split("u", 1)[1] if "u" in arg else None
            if unset is not None and (unset or (args[i + 1 : i + 2] or [""])[0]) == (
                "CLAUDE_CONFIG_DIR"
            ):
                return True
        elif "=" not in arg:
            return False  # the command itself: what follows are its arguments
    return False


def _shell_script(args: Sequence[str]) -> str | None:
    """The script of `sh -c SCRIPT` (also -lc, -ec ...), else None."""
    for i, arg in enumerate(args):
        if not arg.startswith("-") or arg.startswith("--"):
            return None
        if "c" in arg[1:]:
            return args[i + 1] if i + 1 < len(args) else None
    return None


def bypasses_claude_isolation(command: str) -> str | None:
    """A warning when the command would run claude outside the CLAUDE_CONFIG_DIR the scheduler
    sets (sudo, doas, su, ssh, env -i, a nested sh -c / bash -c), else None."""
    for words in _simple_commands(_words(command)):
        for i, word in enumerate(words):
            name = os.path.basename(word)
            rest = words[i + 1 :]
            if not _mentions_claude(rest):
                continue
            if name in ("sudo", "doas", "su", "runuser"):
                return (
                    f"`{name} … claude`: {name} resets the environment and switches user, so "
                    "claude would not use the scheduler's CLAUDE_CONFIG_DIR"
                )
            if name == "ssh":
                return "`ssh … claude`: claude would run on another machine, with its own config"
            if name == "env" and _env_clears(rest):
                return (
                    "`env -i … claude` (or -u / a new CLAUDE_CONFIG_DIR): claude would not use "
                    "the scheduler's CLAUDE_CONFIG_DIR"
                )
            if name in _SHELLS:
                script = _shell_script(rest)
                if script is not None and _mentions_claude([script]):
                    inner = bypasses_claude_isolation(script)
                    return inner or (
                        f"`{name} -c '… claude …'`: a nested shell hides claude from this check "
                        "and may reset CLAUDE_CONFIG_DIR (login profiles); call claude directly"
                    )
    return None


TICK_ENV = "tick_env"  # meta key: the secret NAMES the tick saw set (never a value)


def seen_secrets(environ: Mapping[str, str], secret_names: Sequence[str]) -> dict[str, bool]:
    """Which secret names the tick's environment sets (non-empty): every concrete name the
    config lists or refers to, and every variable a glob ("*_TOKEN") matches. Names only."""
    seen = {n: bool((environ.get(n) or "").strip()) for n in secret_names
            if not any(c in n for c in "*?[")}
    for name, value in environ.items():
        if name not in seen and is_secret(name, secret_names) and value.strip():
            seen[name] = True
    return dict(sorted(seen.items()))


def record_seen_secrets(store: State, environ: Mapping[str, str], secret_names: Sequence[str],
                        now: float) -> None:
    """Keep what the tick saw for the dashboard's Health page (issue 24): a read, and a write
    only when the names changed ("since" is when the tick first saw them so)."""
    import json  # lazy: only when the tick records its environment

    names = seen_secrets(environ, secret_names)
    old = store.get_meta(TICK_ENV)
    try:
        if old is not None and json.loads(old).get("names") == names:
            return
    except (ValueError, AttributeError):
        pass
    store.set_meta(TICK_ENV, json.dumps({"names": names, "since": now}))
