"""Prompt templates: which file is used, and rendering it.

The shipped defaults live in the package (`mdcron/prompts/<name>`), so self-heal and comment
reading work in any home, also one made with `--home ~/jobs` that has no `prompts/` folder. A
home's own `prompts/<name>` overrides the default. The repository's top-level `prompts/` is the
example a person copies into a home to edit; a test keeps it identical to the package copy,
which is the one source of truth.

A template is `string.Template` text (`$name`, `$$` for a dollar sign) plus optional sections:
a line `{{#name}}` ... a line `{{/name}}` keeps the lines between only when the value `name` is
not empty, so the prompt says nothing where there is nothing to say.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from pathlib import Path

from ..core.problems import Problem
from ..core.records import dataclass
from ..core.safe_fs import NotRegular, read_followed
from ..settings.config import Config

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "prompts"

# The placeholders each template may use (a test renders every shipped template with them).
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "self-heal.txt": (
        "task_id", "title", "task_file", "task_text", "run_as", "command", "cwd", "exit_code",
        "outcome", "error", "output_tail", "attempt", "previous_diagnosis", "previous_diff",
        "previous_error", "home", "writable", "max_tool_calls", "now",
    ),
    "check-comments.txt": ("task_id", "task_file", "task_text", "comments", "now"),
}

MAX_TEMPLATE_BYTES = 1 << 20  # read no further: a prompt is a few KiB
_SECTION = re.compile(r"^\{\{([#/])([A-Za-z_][A-Za-z0-9_]*)\}\}[ \t]*$")


class TemplateError(Exception):
    """A prompt template is missing or broken; the message names the file."""


@dataclass(frozen=True, slots=True)
class TemplateSource:
    path: Path
    overridden: bool  # the home's own prompts/<name>, not the shipped default

    def describe(self) -> str:
        return f"{self.path} ({'the home’s own' if self.overridden else 'shipped default'})"


def template_source(config: Config, name: str) -> TemplateSource:
    """The home's prompts/<name> when it exists (even if broken: the person meant it), else the
    shipped one."""
    own = config.prompts_dir / name
    if own.exists() or own.is_symlink():
        return TemplateSource(own, True)
    return TemplateSource(SHIPPED_DIR / name, False)


def render_template(config: Config, name: str, values: Mapping[str, str]) -> str:
    """The template `name` (see template_source) with its sections and $placeholders filled. An
    unknown placeholder or section, a lone `$` or an unreadable file is a TemplateError naming
    the file and the fix."""
    source = template_source(config, name)
    path = source.path
    try:  # O_NONBLOCK, then fstat: a FIFO in its place is refused, never waited on
        data = read_followed(path, MAX_TEMPLATE_BYTES)
        if len(data) > MAX_TEMPLATE_BYTES:
            raise TemplateError(f"prompt template {path} is larger than "
                                f"{MAX_TEMPLATE_BYTES // 1024} KiB; a prompt is a page or two")
        text = data.decode("utf-8")
    except NotRegular as exc:
        raise TemplateError(f"prompt template {path} is not a regular file ({exc.kind}); replace"
                            " it with a template file or delete it") from None
    except FileNotFoundError:
        raise TemplateError(f"prompt template {path} is missing; restore it from the mdcron"
                            " repository") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"prompt template {path} cannot be read: {exc}") from exc
    return render_text(text, values, str(path), source.overridden)


def render_text(text: str, values: Mapping[str, str], where: str = "<template>",
                overridden: bool = False) -> str:
    fix = "; fix it or delete it to use the shipped default" if overridden else ""
    known = ", ".join("$" + k for k in sorted(values))
    try:
        kept = _sections(text, values)
    except ValueError as exc:
        raise TemplateError(f"prompt template {where}: {exc}{fix}") from None
    try:
        return string.Template(kept).substitute(values)
    except KeyError as exc:
        raise TemplateError(f"prompt template {where}: unknown placeholder ${exc.args[0]};"
                            f" known: {known}{fix}") from None
    except ValueError as exc:
        raise TemplateError(f"prompt template {where}: {exc}; write $$ for a literal dollar"
                            f" sign{fix}") from None


def _sections(text: str, values: Mapping[str, str]) -> str:
    out: list[str] = []
    open_name: str | None = None
    keep = True
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        match = _SECTION.match(line.rstrip("\r\n"))
        if match is None:
            if keep:
                out.append(line)
            continue
        mark, name = match.groups()
        if name not in values:
            raise ValueError(f"line {number}: unknown section {{{{{mark}{name}}}}}")
        if mark == "#":
            if open_name is not None:
                raise ValueError(f"line {number}: section {name} opened inside {open_name}")
            open_name, keep = name, bool(str(values[name]).strip())
        else:
            if open_name != name:
                raise ValueError(f"line {number}: {{{{/{name}}}}} closes no open section")
            open_name, keep = None, True
    if open_name is not None:
        raise ValueError(f"section {open_name} is never closed with {{{{/{open_name}}}}}")
    return "".join(out)


def check_template(config: Config, name: str) -> tuple[TemplateSource, str | None]:
    """Which file `name` comes from and, when it cannot be used, why (for validate, doctor and
    the ladder). Rendered with every known placeholder empty and then non-empty, so every
    section is looked into."""
    source = template_source(config, name)
    keys = PLACEHOLDERS[name]
    try:
        render_template(config, name, {k: "" for k in keys})
        render_template(config, name, {k: "x" for k in keys})
    except TemplateError as exc:
        return source, str(exc)
    return source, None


def template_problems(config: Config) -> list[Problem]:
    """For `validate`: every prompt template that cannot be used (self-heal or comment reading
    would be skipped, and each skipped failure would say so)."""
    problems = []
    for name in PLACEHOLDERS:
        source, broken = check_template(config, name)
        if broken is not None:
            what = "self-heal" if name == "self-heal.txt" else "comment reading"
            problems.append(Problem(source.path, f"{broken} ({what} is off until then)"))
    return problems
