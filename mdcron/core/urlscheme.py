"""The part of a configured URL that may be shown (its scheme): the rest may carry a secret.

Standard library only and no `re`, so the idle tick's heartbeat can use it for free; the
settings (notify_config) and the alerts share it from here.
"""

from __future__ import annotations


def scheme_of(url: str) -> str:
    """The part of a URL that may be shown: its scheme, e.g. `tgram://…`."""
    scheme, sep, _ = url.strip().partition("://")
    ok = sep and scheme[:1].isascii() and scheme[:1].isalpha() and _SCHEME_CHARS.issuperset(scheme)
    return f"{scheme}://…" if ok else "(not a URL)"


_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
