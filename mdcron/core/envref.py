"""The two patterns every reader of a configured URL needs: `${VAR}` references and the scheme.

Kept apart from heartbeat.py so that the idle tick, which pings through heartbeat.py, does not
pay for `re` (~4 ms) on a plain URL; config, notify_config and doctor import them from here.
Each is compiled by `re` on its first use (issue 27: a config without `${` and without
notification URLs, read by every tick, needs neither; their compiles cost ~0.35 ms).
"""

from __future__ import annotations

import re


class _Pattern:
    """A pattern's findall, sub and match, compiled by `re` (and kept in its cache) when first
    asked."""

    __slots__ = ("pattern",)

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def findall(self, text: str) -> list:
        return re.compile(self.pattern).findall(text)

    def sub(self, repl, text: str) -> str:  # repl: a string or a function of the match
        return re.compile(self.pattern).sub(repl, text)

    def match(self, text: str) -> re.Match | None:
        return re.compile(self.pattern).match(text)


ENV_REF = _Pattern(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SCHEME = _Pattern(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def env_refs(text: str) -> list[str]:
    """ENV_REF.findall(text); no pattern compiled for a text without `${`."""
    return ENV_REF.findall(text) if "${" in text else []
