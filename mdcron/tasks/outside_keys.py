"""Issue 26's task keys from other schedulers: `ping_url` (healthchecks.io), `memory_max`,
`nice` and `io_class` (systemd's MemoryMax=, Nice=, IOSchedulingClass=). Each check returns the
value the Task keeps, or raises ValueError with what would be right (taskfile.py adds the file,
the line and the key)."""

from __future__ import annotations

import re

KEYS = ("ping_url", "memory_max", "nice", "io_class")
IO_CLASSES = ("idle", "best-effort", "realtime")
NICE_RANGE = (-20, 19)
MEMORY_MIN = 1024 * 1024  # below a MiB nothing starts (not even /bin/sh)
MEMORY_MAX = 2**50  # 1 PiB: past it surely a typo
MAX_URL = 2048
_SIZE = r"(?i)^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*$"  # re caches it (see units.py)
_FACTOR = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_URL_HOST = r"^https?://[A-Za-z0-9._~%!$&'()*+,;=:@\[\]-]+(?:[/?#]\S*)?$"


def ping_url(value: object) -> str:
    """An http(s) URL, as healthchecks.io gives one: https://hc-ping.com/<uuid>."""
    example = "e.g. ping_url: https://hc-ping.com/5d1c1f2a-…"
    if not isinstance(value, str):
        raise ValueError(f"expected an http or https URL, {example}")
    url = value.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in ("http", "https"):
        shown = f"{scheme}://" if scheme else "no scheme"
        raise ValueError(f"only http:// and https:// URLs can be pinged (got {shown}); {example}")
    if len(url) > MAX_URL:
        raise ValueError(f"the URL is {len(url)} characters long (at most {MAX_URL})")
    if not re.match(_URL_HOST, url) or any(ord(c) < 33 or c == "\x7f" for c in url):
        raise ValueError(f"not a URL with a host and no spaces; {example}")
    if "${" in url:
        raise ValueError("${VAR} is not expanded in ping_url (it could send a secret to any "
                         f"host); write the URL itself, {example}")
    return url


def memory_max(value: object) -> int:
    """Bytes from `512M`, `2G`, `1.5GiB`, `1048576` (K, M, G, T are powers of 1024, as
    systemd's MemoryMax=)."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    match = re.match(_SIZE, text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("expected a size like 512M, 2G or 1.5G (K, M, G, T: powers of 1024)")
    size = int(float(match[1]) * _FACTOR[match[2].lower()])
    if not MEMORY_MIN <= size <= MEMORY_MAX:
        raise ValueError(f"expected from 1M to 1024T, got {format_size(size)}")
    return size


def nice(value: object) -> int:
    low, high = NICE_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"expected a whole number from {low} (first) to {high} (last), e.g. "
                         "nice: 10; below 0 needs a root tick")
    return value


def io_class(value: object) -> str:
    if isinstance(value, str) and value.strip().lower().replace("_", "-") in IO_CLASSES:
        return value.strip().lower().replace("_", "-")
    raise ValueError(f"expected one of {', '.join(IO_CLASSES)}, e.g. io_class: idle")


def format_size(size: int) -> str:
    """512 MiB, 1.5 GiB, 800 KiB: as the run's reason and `show` say it."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:.4g} {unit}"
    return f"{size} B"


def describe_limits(memory: int | None, niceness: int | None, io: str | None) -> str:
    """'memory_max 512 MiB, nice 10, io_class idle', or '' without limits."""
    parts = []
    if memory is not None:
        parts.append(f"memory_max {format_size(memory)}")
    if niceness is not None:
        parts.append(f"nice {niceness}")
    if io is not None:
        parts.append(f"io_class {io}")
    return ", ".join(parts)
