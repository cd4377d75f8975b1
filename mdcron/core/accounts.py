"""Users and groups of this host, by name or numeric id, as a task's `user:` / `group:` and the
config's `run_user:` / `run_group:` name them.

A name is looked up in the user (group) database; a number, or text of digits only, is an id
that must also be there, as `chown` reads them. Each lookup failure is an AccountError whose
message says what is wrong and what would fix it, so the task file's or the config's checks can
report it with their file and line. Nothing here changes the process's identity
(run/identity.py does that, for a task's process only).
"""

from __future__ import annotations

import grp
import os
import pwd
import re

from .records import dataclass

# What useradd/groupadd accept (a portable subset), or a numeric id.
NAME = r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?"  # re compiles it on first use and caches it
MAX_ID = 2**32 - 2  # (uid_t)-1 means "no change" to setuid


class AccountError(ValueError):
    """A user or group that cannot be used; the message names it and the fix."""


@dataclass(frozen=True, slots=True)
class Account:
    """A user as a task's process becomes it: ids, supplementary groups, HOME."""

    name: str
    uid: int
    gid: int  # the primary group, or the one `group:` names
    groups: tuple[int, ...]  # supplementary groups (initgroups: the user's, plus gid)
    home: str

    def env(self) -> dict[str, str]:
        """HOME, USER and LOGNAME, as cron sets them for a user's crontab."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}


def _as_text(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise AccountError(f"expected a {what} name or numeric id, e.g. backup or 1001")
    text = str(value).strip()
    if text.isdigit():
        if int(text) > MAX_ID:
            raise AccountError(f"{text} is not a valid {what} id")
        return text
    if not re.fullmatch(NAME, text):
        raise AccountError(f"{text!r} is not a {what} name (letters, digits, '_', '-', '.'"
                           " starting with a letter or '_'), nor a numeric id")
    return text


def user_entry(value: object) -> pwd.struct_passwd:
    """The user database entry named by value (a name or a numeric uid)."""
    text = _as_text(value, "user")
    try:
        return pwd.getpwuid(int(text)) if text.isdigit() else pwd.getpwnam(text)
    except KeyError:
        kind = "uid" if text.isdigit() else "user"
        raise AccountError(f"no {kind} {text} on this host; create it (useradd {text}) or "
                           "name an existing user") from None


def group_entry(value: object) -> grp.struct_group:
    """The group database entry named by value (a name or a numeric gid)."""
    text = _as_text(value, "group")
    try:
        return grp.getgrgid(int(text)) if text.isdigit() else grp.getgrnam(text)
    except KeyError:
        kind = "gid" if text.isdigit() else "group"
        raise AccountError(f"no {kind} {text} on this host; create it (groupadd {text}) or "
                           "name an existing group") from None


def check_user(value: object) -> str:
    """value as text, once it names an existing user (for validation)."""
    user_entry(value)
    return str(value).strip()


def check_group(value: object) -> str:
    """value as text, once it names an existing group (for validation)."""
    group_entry(value)
    return str(value).strip()


def resolve(user: str | None, group: str | None, *, own_uid: int) -> Account:
    """The account a process runs as: `user` (default: the user of own_uid) with `group` as its
    group (default: the user's primary group) and the user's supplementary groups."""
    entry = user_entry(user) if user is not None else _own_entry(own_uid)
    gid = group_entry(group).gr_gid if group is not None else entry.pw_gid
    try:
        groups = tuple(os.getgrouplist(entry.pw_name, gid))
    except OSError:
        groups = (gid,)
    return Account(name=entry.pw_name, uid=entry.pw_uid, gid=gid, groups=groups,
                   home=entry.pw_dir or "/")


def _own_entry(uid: int) -> pwd.struct_passwd:
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        raise AccountError(f"the tick's own uid {uid} has no user database entry; name a user"
                           " with user:") from None


def owner_name(uid: int) -> str:
    """A uid as a name for messages (the number when it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
