"""The checks of a task file that look at several keys at once: a schedule in its zone, what the
task's kind needs (a command for shell and script, a prompt for Claude), the paths a task may
use, the keys of issues 12 and 26. Each adds its problems to the file's report (taskfile.py);
none raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.cron import ScheduleError, parse_schedule, resolve_zone
from ..core.zones import abbreviation_warning, unknown_zone
from ..settings.config import Config
from . import lenient
from .key_checks import Bad, task_id
from .paths import PathError, script_path, script_problem, script_word, task_cwd
from .task import Task

if TYPE_CHECKING:
    from .taskfile import _Report as Report


def check_schedule(values: dict[str, object], report: Report, config: Config) -> None:
    zone = None
    if "timezone" in values:
        try:
            zone = resolve_zone(values["timezone"])  # type: ignore[arg-type]
        except ScheduleError:
            report.error(f"timezone: {unknown_zone(values['timezone'])}", key="timezone")
        else:
            if warning := abbreviation_warning(values["timezone"]):  # type: ignore[arg-type]
                report.warn(f"timezone: {warning}", key="timezone")
    if zone is None:
        zone = resolve_zone(config.timezone)  # checked when the config was loaded
    # type: ignore[arg-type]
    if "schedule" not in values or _after_words(values["schedule"]) is not None:
        return  # a chain: checked by check_issue12_keys
    try:
        parse_schedule(values["schedule"], zone)  # type: ignore[arg-type]
    except ScheduleError as exc:
        report.error(f"schedule: {exc}", key="schedule")


def check_kind(values: dict[str, object], body: str, report: Report) -> None:
    run_as = values.get("run_as", "shell")
    reported = any(p.key == "command" for p in report.problems)
    if run_as in ("shell", "script") and "command" not in values and not reported:
        example = "./backup.sh" if run_as == "script" else "echo hello"
        if report.raw.get("command", "").partition(":")[2].strip().startswith("#"):
            report.error(  # issue 25: `command: #!/bin/sh …` or `command: # …` reads as empty
                "command: empty, because YAML reads ' #' and what follows as a comment"
                + lenient.quote_command(report.raw.get("command", ""), why=False),
                key="command")
            return
        report.error(
            f"command: missing; run_as: {run_as} needs a command, e.g. command: {example}",
            key="command",
            line=report.lines.get("run_as", report.close_line),
        )
    prompt = values.get("prompt")
    if run_as == "claude" and not (isinstance(prompt, str) and prompt.strip()) and not body:
        report.error(
            "prompt: missing; run_as: claude needs a prompt: a prompt key or the text below "
            "the closing '---'",
            key="prompt",
            line=report.lines.get("run_as"),
        )
    for key in ("user", "group"):
        if run_as == "claude" and key in values:
            report.error(
                f"{key}: a Claude prompt task runs inside the tick, as the tick's user, so "
                f"{key}: cannot apply; remove it, or run claude as a shell task "
                "(run_as: shell, command: claude -p ...) to give it its own user",
                key=key,
            )
    for key in ("memory_max", "nice", "io_class"):  # issue 26: limits of a process
        if run_as == "claude" and key in values:
            report.error(f"{key}: a Claude prompt task runs inside the tick, so no limit of its "
                         "own can apply; remove it, or run claude as a shell task", key=key)


def check_paths(task: Task, report: Report, config: Config) -> None:
    key = "cwd" if task.cwd is not None else "cwd_policy"
    try:
        cwd = task_cwd(task, config)
    except PathError as exc:
        report.error(f"{key}: {exc}", key=key)
        return
    if key == "cwd" and not cwd.is_dir():
        state = "is not a folder" if cwd.exists() else "does not exist (yet)"
        report.warn(f"cwd: {cwd} {state}; runs will fail until it is a folder", key="cwd")
    if task.run_as == "script":
        try:
            script = script_path(task, config)
        except PathError as exc:
            report.error(f"command: {exc}", key="command")
            return
        if problem := script_problem(script, script_word(task.command or "")):
            report.warn(f"command: {problem}", key="command")


def _after_words(schedule: str) -> list[str] | None:
    """`schedule: after extract, fetch` -> ["extract", "fetch"]; None when not a chain."""
    words = schedule.replace(",", " ").split()
    if not words or words[0] != "after":
        return None
    return words[1:]


def check_issue26_keys(values: dict[str, object], report: Report) -> None:
    """A jitter on a chain (it starts when its upstream succeeds), a delay without retries."""
    if values.get("jitter") and values.get("after"):
        report.error("jitter: a chain starts when its upstream succeeds, not at a slot; remove "
                     "jitter (or put it on the upstream)", key="jitter")
    if "retry_delay" in values and not values.get("retry"):
        report.warn("retry_delay: has no effect without retries; add retry: 3 (or remove it)",
                    key="retry_delay")


def check_issue12_keys(values: dict[str, object], report: Report, config: Config) -> None:
    """Chains (`schedule: after x` / `after:`) and `uses:` against the config's resources.
    Cross-file checks (unknown upstream, cycles) are in chains.check_graph."""
    # type: ignore[arg-type]
    words = _after_words(values["schedule"]) if "schedule" in values else None
    listed = values.get("after", ())
    if words is not None:
        try:
            names = tuple(dict.fromkeys([*(task_id(w) for w in words), *listed]))  # type: ignore[misc]
        except Bad as exc:
            report.error(f"schedule: after: {exc}", key="schedule")
            return
        if not names:
            report.error('schedule: "after" needs the upstream task, e.g. schedule: after '
                         "extract, or after: [extract, fetch] with schedule: after", key="schedule")
        values["after"] = names
    elif listed:
        report.error("after: only works with schedule: after (the upstream decides when this "
                     "runs); write schedule: after", key="after")
    if values.get("id") in values.get("after", ()):  # type: ignore[operator]
        report.error("after: a task cannot run after itself", key="after")
    resources = config.resources
    for name in values.get("uses", ()):  # type: ignore[attr-defined]
        if name not in resources:
            import difflib  # lazy: only for a misspelt resource

            near = difflib.get_close_matches(name, sorted(resources), n=1, cutoff=0.6)
            hint = (f"did you mean {near[0]!r}?" if near else
                    f"add it to scheduler.yaml, e.g. resources: {{{name}: 1}}")
            report.error(f"uses: unknown resource {name!r}; {hint}", key="uses")
