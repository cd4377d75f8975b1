"""The dead man's switch: one GET of `heartbeat_url` at the end of every tick.

Standard library only, so the idle tick (fastpath.py) can ping without loading the notification
code. `${VAR}` in the URL comes from the scheduler's environment; the expanded URL is a secret,
so errors show the scheme only and mask every substituted value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
TIMEOUT = 5.0
STALE_TICK = 300.0  # seconds without a tick before `list` and `doctor` say cron has stopped
MAX_REASON = 300


def scheme_of(url: str) -> str:
    """The part of a URL that may be shown: its scheme, e.g. `tgram://…`."""
    match = SCHEME.match(url.strip())
    return f"{match.group(1)}://…" if match else "(not a URL)"


def missing_vars(template: str, environ: Mapping[str, str]) -> list[str]:
    return [n for n in dict.fromkeys(ENV_REF.findall(template)) if n not in environ]


def expand_vars(template: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """The text with ${VAR} replaced (every VAR must be set) and the values substituted."""
    values = [environ[n] for n in ENV_REF.findall(template)]
    return ENV_REF.sub(lambda m: environ[m.group(1)], template), values


def mask(text: str, url: str, values: list[str]) -> str:
    """`text` without the URL, the substituted values, or any long piece of the URL."""
    pieces = [url, *values]
    rest = url.split("://", 1)[-1]
    pieces += [p for p in re.split(r"[/:@?&=#,;+]+", rest) if len(p) >= 8]
    for piece in sorted({p for p in pieces if len(p) >= 4}, key=len, reverse=True):
        text = text.replace(piece, "…")
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def ping(template: str, failed: bool, environ: Mapping[str, str]) -> str | None:
    """GET the URL (with /fail appended when the tick failed). Returns an error line with the
    URL masked, or None. Never raises."""
    import urllib.error
    import urllib.parse
    import urllib.request

    where = f"heartbeat ({scheme_of(template)})"
    try:
        missing = missing_vars(template, environ)
        if missing:
            names = ", ".join(f"${{{n}}}" for n in missing)
            return f"{where}: {names} not set in the scheduler's environment"
        url, values = expand_vars(template, environ)
        if failed:
            parts = urllib.parse.urlsplit(url)
            url = parts._replace(path=parts.path.rstrip("/") + "/fail").geturl()
        request = urllib.request.Request(url, headers={"User-Agent": "mdcron"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                response.read(4096)
            return None
        except urllib.error.HTTPError as exc:
            return f"{where}: HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"{where}: {mask(str(reason), url, values)}"
    except Exception as exc:
        return f"{where}: {type(exc).__name__}"
