"""Settings: scheduler.yaml in the home folder (optional) over built-in defaults."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.envref import env_refs
from ..core.problems import Problem, unknown_key
from ..core.records import dataclass, field, replace
from ..core.units import DurationError, duration_between, parse_duration, whole_number
from .claude import ClaudeConfig, parse_claude_config
from .notify import NotifyConfig, parse_notify_config

CONFIG_NAME = "scheduler.yaml"
ALWAYS_SECRET = ("ANTHROPIC_API_KEY",)
STATE_URL_ENV = "MDCRON_STATE_URL"  # state_url.ENV_NAME; overrides scheduler.yaml's state_url
ID_LIKE = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"  # resource names become file names (`re` caches it)
# Every number has a range (README, "Configuration"): past it a value is surely a typo, and
# would overflow date maths, wait for ever or loop per unit.
_DAY = 86400.0
COUNT_MAX = {"max_parallel": 1000, "log_max_bytes": 2**40, "output_tail_bytes": 16 * 2**20,
             "retention_days": 36600, "max_consecutive_failures": 1000}
DURATION_RANGE = {"catchup": (0.0, 366 * _DAY), "kill_grace": (0.0, 3600.0),
                  "probation": (0.0, 366 * _DAY), "stop_grace": (0.0, _DAY),
                  "max_clock_skew": (0.0, 3600.0), "lease_seconds": (1.0, _DAY)}
MAX_CAPACITY = 10_000  # units of one resource (each is a lock file)


@dataclass(frozen=True)
class Config:
    home: Path
    path: Path | None = None  # the config file, when there is one
    timezone: str | None = None  # IANA zone for schedules; None = the system's
    max_parallel: int = 4
    catchup: float = 3600.0  # default allowance for a late fire, seconds
    log_max_bytes: int = 10 * 1024 * 1024  # per run log
    output_tail_bytes: int = 4096  # kept in the database per run
    retention_days: int = 90
    kill_grace: float = 5.0  # TERM → KILL grace on timeout, seconds
    stop_grace: float = 30.0  # `daemon`: how long running tasks may finish after SIGTERM
    secret_env: tuple[str, ...] = ()  # env names or globs (e.g. "*_TOKEN") never passed to tasks
    claude_config_dir: Path | None = None  # CLAUDE_CONFIG_DIR for every child; default state/claude
    cwd_policies: dict[str, str] = field(default_factory=dict)  # name -> folder
    allow_outside_home: tuple[str, ...] = ()  # folders outside home a task may use (cwd, script)
    max_consecutive_failures: int = 3  # unhealed failed ticks in a row before suspension
    probation: float = 7 * 86400.0  # after a heal that worked, seconds of no second chance
    resources: dict[str, int] = field(default_factory=dict)  # name -> capacity (resources.py)
    notify: NotifyConfig = NotifyConfig()  # notify: and heartbeat_url (settings/notify.py)
    claude: ClaudeConfig = ClaudeConfig()  # claude: and max_heals_per_tick (settings/claude.py)
    incident_command: str | None = None  # gets each new incident as JSON on stdin
    env_refs: tuple[str, ...] = ()  # every ${VAR} the file names (they are secrets)
    # issue 11: PostgreSQL state shared by several hosts; None = SQLite in state/mdcron.db.
    # Expanded (it may hold a password): kept out of repr, shown only through state_url.mask.
    state_url: str | None = field(default=None, repr=False)
    host: str = ""  # this host's name in runs rows; "" = default_host()
    max_clock_skew: float = 30.0  # seconds a host's clock may be off the database's (issue 11)
    lease_seconds: float = 90.0  # a run's lease across hosts, renewed every third (lease.py)
    # issue 21: the account shell/script tasks run as when they name none (run/identity.py)
    run_user: str | None = None
    run_group: str | None = None
    # issue 26: the Prometheus textfile each tick writes (state/metrics_file.py); None = none
    metrics_file: Path | None = None

    @property
    def heartbeat_url(self) -> str | None:
        return self.notify.heartbeat_url

    @property
    def tasks_dir(self) -> Path:
        return self.home / "tasks"

    @property
    def state_dir(self) -> Path:
        return self.home / "state"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def prompts_dir(self) -> Path:
        return self.home / "prompts"

    @property
    def db_path(self) -> Path:
        return self.state_dir / "mdcron.db"

    @property
    def state_exists(self) -> bool:
        """Whether there is state to read (a PostgreSQL state always is: it is created there)."""
        return bool(self.state_url) or self.db_path.exists()

    @property
    def host_name(self) -> str:
        if self.host:
            return self.host
        return default_host()

    @property
    def locks_dir(self) -> Path:
        return self.state_dir / "locks"

    @property
    def claude_dir(self) -> Path:
        return self.claude_config_dir or (self.state_dir / "claude")

    def secret_names(self) -> tuple[str, ...]:
        """Names (or globs) of environment variables that never reach a task unasked: the
        configured ones, the Anthropic key, and every ${VAR} the config itself refers to."""
        # the state URL may carry a password, directly or through libpq's own variable
        state = (STATE_URL_ENV, "PGPASSWORD") if self.state_url else (STATE_URL_ENV,)
        return tuple(dict.fromkeys((*ALWAYS_SECRET, *self.secret_env, *self.env_refs, *state)))


def is_secret(name: str, secret_names: Sequence[str]) -> bool:
    """Whether an environment variable name matches a secret name or glob ("*_TOKEN"). A name
    without `*`, `?` or `[` is matched by equality, as fnmatchcase matches it (issue 27:
    fnmatch and a regular expression per name cost a task's start ~0.3 ms)."""
    patterns = (*ALWAYS_SECRET, *secret_names)
    if name in patterns:
        return True
    globs = [p for p in patterns if "*" in p or "?" in p or "[" in p]
    if not globs:
        return False
    from fnmatch import fnmatchcase  # lazy: fnmatch, only with a glob among the names

    return any(fnmatchcase(name, pattern) for pattern in globs)


class ConfigError(Exception):
    """The config file cannot be used; problems says where and why."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


_KNOWN = {
    "timezone", "max_parallel", "catchup", "log_max_bytes", "output_tail_bytes",
    "retention_days", "kill_grace", "secret_env", "claude_config_dir", "cwd_policies",
    "allow_outside_home", "stop_grace",
    "max_consecutive_failures", "notify", "incident_command", "heartbeat_url", "claude",
    "max_heals_per_tick", "probation", "resources",
    "state_url", "host", "max_clock_skew", "lease_seconds",  # issue 11 (state_url.py)
    "run_user", "run_group",  # issue 21 (core/accounts.py, run/identity.py)
    "metrics_file",  # issue 26 (state/metrics_file.py)
}


def load_config(home: Path, environ: Mapping[str, str] | None = None, *, data: dict | None = None,
                zone_checked: bool = False) -> tuple[Config, list[Problem]]:
    """Read home/scheduler.yaml if it exists and build every section into typed values, once:
    nothing else parses the file. Errors raise ConfigError (the tick must stop rather than
    guess); unknown keys, and ${VAR}s unset in `environ` (default os.environ), come back as
    warnings. `data`: the file's YAML as parse_config returned it for the very text the caller
    read (the tick's cache, cli/config_data.py): built without reading or parsing again.
    `zone_checked`: the caller vouches that data's `timezone` resolves (cli/config_data.py:
    ZoneInfo read this very file for this name before), so zoneinfo is not imported for it."""
    home = home.resolve()
    path = home / CONFIG_NAME
    env = os.environ if environ is None else environ
    if data is not None:
        return _build(home, path, data, env, zone_checked=zone_checked)
    if not path.exists():
        if env.get(STATE_URL_ENV):  # a state URL without a config file (issue 11)
            return _build(home, path, {}, env, exists=False)
        return Config(home=home), []
    return _build(home, path, parse_config(path), env)


def parse_config(path: Path, text: str | None = None) -> dict:
    """The config file's YAML mapping (of `text`, the file's text as the caller read it, when
    given); ConfigError when it cannot be read or is not one."""
    import yaml  # lazy: yaml (~10 ms) only when there is a config file

    from ..core.safe_fs import NotRegular  # lazy: as yaml
    from ..core.safe_yaml import YamlLimitError, load_yaml  # lazy: as yaml

    try:
        data = load_yaml(_read_text(path) if text is None else text) or {}
    except NotRegular as exc:  # a FIFO, a folder, a device: refused, never waited on
        raise ConfigError([Problem(
            path, f"not a regular file ({exc.kind}); fix: replace it with the config file (a "
            "symlink to one is fine) or remove it")]) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(path, f"cannot read the config: {exc}")]) from exc
    except YamlLimitError as exc:
        mark = exc.problem_mark
        raise ConfigError([Problem(
            path, f"refused unread: {exc.problem}; flatten it or drop the aliases "
            "(&name, *name)",
            line=mark.line + 1 if mark is not None else None)]) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(
            [Problem(path, f"the YAML does not parse: {getattr(exc, 'problem', exc)}", line=line)]
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError([Problem(path, "the config must be a mapping of key: value")])
    return data


def _read_text(path: Path) -> str:
    """The file's text, read no further than the YAML limit (a huge file is refused unread)."""
    from ..core.safe_fs import read_followed  # lazy: as in load_config
    from ..core.safe_yaml import MAX_BYTES  # lazy: as in load_config

    data = read_followed(path, MAX_BYTES)
    if len(data) > MAX_BYTES:
        raise OSError(f"larger than {MAX_BYTES // 1024 // 1024} MiB; a config is a few lines")
    return data.decode("utf-8")


def _build(home: Path, path: Path, data: dict, environ: Mapping[str, str],
           exists: bool = True, zone_checked: bool = False) -> tuple[Config, list[Problem]]:
    errors: list[Problem] = []
    warnings: list[Problem] = []
    values: dict[str, object] = {}

    def err(key: str, message: str) -> None:
        errors.append(Problem(path, message, key=key))

    for key in data:
        if key not in _KNOWN:
            warnings.append(Problem(path, unknown_key(key, _KNOWN), key=str(key),
                                    severity="warning"))
    if "timezone" in data:
        tz = data["timezone"]
        known = zone_checked
        if not known:
            from ..core.wall_time import ScheduleError, resolve_zone  # lazy: zoneinfo

            try:
                resolve_zone(str(tz))
                known = True
            except ScheduleError:
                from ..core.zones import unknown_zone  # lazy: only for a name that is no zone

                err("timezone", unknown_zone(tz))
        if known:
            values["timezone"] = str(tz)
        if known and str(tz) != "UTC":  # UTC is never an abbreviation (zones._FINE)
            from ..core.zones import abbreviation_warning  # lazy: a `timezone:` but UTC

            if warning := abbreviation_warning(str(tz)):  # issue 25: EST means New York
                warnings.append(Problem(path, f"timezone: {warning}", key="timezone",
                                        severity="warning"))
    for key, high in COUNT_MAX.items():
        if key in data:
            try:
                values[key] = whole_number(data[key], 1, high)
            except ValueError as exc:
                err(key, str(exc))
    for key in ("catchup", "kill_grace", "probation", "stop_grace"):
        if key in data:
            try:
                values[key] = duration_between(data[key], *DURATION_RANGE[key])
            except DurationError as exc:
                err(key, str(exc))
    if "secret_env" in data:
        v = data["secret_env"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            err("secret_env", "expected a list of environment variable names, e.g. [GITHUB_TOKEN]")
        else:
            values["secret_env"] = tuple(v)
    if "claude_config_dir" in data:
        values["claude_config_dir"] = (home / os.path.expanduser(str(data["claude_config_dir"])))
    if "cwd_policies" in data:
        v = data["cwd_policies"]
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            err("cwd_policies", "expected a mapping of policy name: folder")
        else:
            values["cwd_policies"] = {str(k): os.path.expanduser(x) for k, x in v.items()}
    if "allow_outside_home" in data:
        v = data["allow_outside_home"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            err("allow_outside_home", "expected a list of folders, e.g. [/srv/backups]")
        else:
            values["allow_outside_home"] = tuple(os.path.expanduser(x) for x in v)
    if "resources" in data:
        v = data["resources"]
        ok = isinstance(v, dict) and all(
            isinstance(k, str) and re.fullmatch(ID_LIKE, k) and isinstance(n, int)
            and not isinstance(n, bool) and 1 <= n <= MAX_CAPACITY for k, n in v.items())
        if not ok:
            bad = next((f" ({k}: {n})" for k, n in v.items() if isinstance(k, str)
                        and isinstance(n, int) and n > MAX_CAPACITY), "") if isinstance(
                            v, dict) else ""
            err("resources", f"expected a mapping of name: capacity (a whole number from 1 to "
                f"{MAX_CAPACITY:,}){bad}, e.g. resources: {{ollama: 1, gpu: 2}}")
        else:
            values["resources"] = dict(v)
    if data.get("incident_command") is not None:
        v = data["incident_command"]
        if isinstance(v, str):
            values["incident_command"] = v.strip() or None
        else:
            warnings.append(Problem(path, "expected a shell command (a string), e.g."
                                    " incident_command: /usr/local/bin/page-me; ignored",
                                    key="incident_command", severity="warning"))
    for key in ("run_user", "run_group"):
        if data.get(key) is not None:
            # lazy: pwd, grp and the account records, only for a config naming an account
            from ..core.accounts import AccountError, check_group, check_user

            check = check_user if key == "run_user" else check_group
            try:
                values[key] = check(data[key])
            except AccountError as exc:
                err(key, f"{key}: {exc}")
    if data.get("metrics_file") is not None:  # issue 26
        v = data["metrics_file"]
        if not isinstance(v, str) or not v.strip() or "\0" in v:
            err("metrics_file", "expected a file path, e.g. metrics_file:"
                " /var/lib/node_exporter/textfile_collector/mdcron.prom")
        else:
            values["metrics_file"] = home / os.path.expanduser(v.strip())
            if not values["metrics_file"].parent.is_dir():  # type: ignore[attr-defined]
                warnings.append(Problem(path, f"metrics_file: the folder of {v.strip()} does not"
                                        " exist (yet); create it, or the tick cannot write it",
                                        key="metrics_file", severity="warning"))
    errors += _state(path, data, values, environ)
    # The notification and Claude sections have their own parsers (cheap, pure modules).
    notify, notify_problems = parse_notify_config(data, path, environ)
    claude, claude_problems = parse_claude_config(data, path)
    for problem in (*notify_problems, *claude_problems):
        (errors if problem.severity == "error" else warnings).append(problem)
    if errors:
        raise ConfigError(errors)
    values["notify"] = replace(notify, timezone=values.get("timezone"))
    values["env_refs"] = tuple(sorted(set(env_refs(repr(data)))))
    # type: ignore[arg-type]
    return (Config(home=home, path=path if exists else None, claude=claude,
                   **values), warnings)


def _state(path: Path, data: dict, values: dict[str, object],
           environ: Mapping[str, str]) -> list[Problem]:
    """state_url (the environment's MDCRON_STATE_URL wins), host, max_clock_skew: issue 11."""
    errors = []
    url = environ.get(STATE_URL_ENV) or data.get("state_url")
    where = f"${STATE_URL_ENV}" if environ.get(STATE_URL_ENV) else "state_url"
    if url is not None or "host" in data:
        from .state_url import StateUrlError, check_host, parse  # lazy: only when named
    if url is not None:
        try:
            values["state_url"] = parse(url, environ)
        except StateUrlError as exc:
            errors.append(Problem(path, f"{where}: {exc}", key="state_url"))
    if "host" in data:
        try:
            values["host"] = check_host(data["host"])
        except StateUrlError as exc:
            errors.append(Problem(path, f"{exc}; e.g. host: web1", key="host"))
    if "max_clock_skew" in data:
        try:
            values["max_clock_skew"] = duration_between(data["max_clock_skew"],
                                                        *DURATION_RANGE["max_clock_skew"])
        except DurationError as exc:
            errors.append(Problem(path, str(exc), key="max_clock_skew"))
    if "lease_seconds" in data:
        try:
            if not parse_duration(data["lease_seconds"]):
                raise DurationError("lease_seconds must be more than 0, e.g. lease_seconds: 90s")
            values["lease_seconds"] = duration_between(data["lease_seconds"],
                                                       *DURATION_RANGE["lease_seconds"])
        except DurationError as exc:
            errors.append(Problem(path, str(exc), key="lease_seconds"))
    return errors


def default_host() -> str:
    """The machine's host name, first label, made id-like (dots and odd characters -> '-')."""
    return host_like(os.uname().nodename)  # gethostname's answer, without socket (~3 ms)


def host_like(nodename: str) -> str:
    """Pure: `nodename`'s first label as a host id (state_url.HOST_LIKE), else "localhost".
    Made so without a pattern (issue 27: state_url.py and its patterns load only for a shared
    state or a `host:`): what is left after the cleaning is ASCII letters, digits, '-' and
    '_', starting with a letter or digit, at most 64 long: HOST_LIKE, unless it is empty."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "-"
                   for c in nodename.split(".")[0]).strip("-_")[:64]
    return name or "localhost"
