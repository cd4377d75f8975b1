"""Where the state lives (issue 11): `state_url`, the host's name, the clock-skew allowance.

Pure parsing and masking; no driver is imported here. The URL's password is a secret: every
message built from a URL goes through `mask`, and the Config keeps the URL out of its repr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlsplit

from ..core.envref import ENV_REF

SCHEMES = ("postgresql", "postgres")
ENV_NAME = "MDCRON_STATE_URL"
HOST_LIKE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # as config.ID_LIKE: goes into rows
_PASSWORD_PARAM = r"(?i)(password=)[^&]*"  # compiled when a URL is masked (re caches it)


class StateUrlError(ValueError):
    """A state_url that cannot be used; the message says why and what would be right (masked)."""


def mask(url: str) -> str:
    """The URL with its password (user-info or `password=` parameter) replaced by ***."""
    head, sep, rest = url.partition("://")
    if sep:  # the last '@' before any '?': a password with a raw '/' or '@' is masked too
        query = rest.find("?")
        at = rest.rfind("@", 0, query if query >= 0 else len(rest))
        user, colon, _ = rest[:max(at, 0)].partition(":")
        if at >= 0 and colon:
            rest = f"{user}:***{rest[at:]}"
        url = head + sep + rest
    return re.sub(_PASSWORD_PARAM, r"\1***", url)


def literal_password(value: str) -> bool:
    """Whether the URL as written carries a password itself (not only `${VAR}`s)."""
    rest = value.partition("://")[2]
    query = rest.find("?")
    at = rest.rfind("@", 0, query if query >= 0 else len(rest))
    password = rest[:max(at, 0)].partition(":")[2]
    params = [v for k, v in parse_qsl(rest[query + 1:] if query >= 0 else "")
              if k.lower() == "password"]
    return any(ENV_REF.sub("", p).strip() for p in [password, *params])


def expand(value: str, environ: Mapping[str, str]) -> str:
    """${VAR} from the environment; an unset one is an error naming it (never its value)."""
    missing = [name for name in ENV_REF.findall(value) if name not in environ]
    if missing:
        raise StateUrlError(f"${{{missing[0]}}} is not set in the environment; set it, or write"
                            " the value into the URL")
    return ENV_REF.sub(lambda m: environ[m.group(1)], value)


def parse(value: object, environ: Mapping[str, str]) -> str:
    """A usable postgresql:// URL (expanded) or StateUrlError. Messages show it masked."""
    if not isinstance(value, str) or not value.strip():
        raise StateUrlError("expected a URL like postgresql://user:${PGPASSWORD}@db.example/mdcron;"
                            " leave the key out for the embedded SQLite state")
    url = expand(value.strip(), environ)
    shown = mask(value.strip())
    raw = _raw_in_userinfo(url)
    if raw:  # urlsplit would cut the URL there, and errors would echo a piece of the password
        head, _, rest = url.partition("://")
        shown = f"{head}://***{rest[rest.rfind('@'):]}"  # mask() cannot know where it ends
        raise StateUrlError(f"{shown}: the user name or password holds a raw {raw}, which ends"
                            " that part of a URL; percent-encode it (@ as %40, / as %2F, # as"
                            " %23, ? as %3F) and try again")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        raise StateUrlError(f"{shown} is not a valid URL ({exc}); expected"
                            " postgresql://user:password@host:5432/dbname") from None
    if parts.scheme.lower() not in SCHEMES:
        raise StateUrlError(f"{shown}: only postgresql:// URLs are supported; leave state_url out"
                            " for the embedded SQLite state in state/mdcron.db")
    dbname = parts.path.lstrip("/") or dict(parse_qsl(parts.query)).get("dbname", "")
    if not dbname:
        raise StateUrlError(f"{shown} names no database; add it after the host, e.g."
                            " postgresql://user@host:5432/mdcron")
    return url


def _raw_in_userinfo(url: str) -> str | None:
    """The raw '@', '/', '#' or '?' that cuts a URL's user-info short, if any."""
    rest = url.partition("://")[2]
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0),
              default=len(rest))
    authority = rest[:end]
    if authority.count("@") > 1:
        return "'@'"
    if "@" in authority or end == len(rest):
        return None
    # `u:pa/ss@host/db`: the authority stops at a '/' inside the password, so it holds a
    # colon followed by no port, and an '@' follows before any query parameter
    at = rest.find("@", end)
    port = authority.partition(":")[2]
    if at >= 0 and ":" in authority and not port.isdigit() and "=" not in rest[end:at]:
        return f"'{rest[end]}'"
    return None


def check_host(value: object) -> str:
    if not isinstance(value, str) or not HOST_LIKE.fullmatch(value):
        raise StateUrlError(f"expected a host name of letters, digits, '-' and '_' (at most 64,"
                            f" starting with a letter or digit), got {value!r}")
    return value


def runs_here(hosts: tuple[str, ...], host: str) -> bool:
    """A task's `hosts:` list: empty means any host; else this host must be named in it."""
    return not hosts or host in hosts
