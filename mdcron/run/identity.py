"""The account a task's process runs as (issue 21), and whether the tick can give it that.

A shell or script task runs as its `user:` (with its `group:`), else as the config's
`run_user:` (with `run_group:`, or the task's `group:`), else as the tick's own user, as before.
Switching follows cronie for a user's crontab: supplementary groups (initgroups), the group,
then the user, then exec with HOME, USER and LOGNAME set. subprocess.Popen does the first
three in the child between fork and exec (`user=`, `group=`, `extra_groups=`: setgroups,
setregid, setreuid), so no Python runs there. The kernel marks the child non-dumpable when its
uid changes, until exec: the copy of the tick's memory it holds in between (environment
included) is closed to the new user's other processes.

Only root can switch. When the tick is not root and the account differs from its own, the run
is refused with a reason (a failed run, not a crash); naming the tick's own user is fine.

The child enters its working folder before it drops root, so a folder the user cannot read
would still be entered: `access_problem` checks the folder (and a script) against the
account's ids first, from the permission bits of every component of the path, and says which
folder stops it. A path with an ACL is left to the kernel (the bits do not tell the whole story).

Lazy imports: core/accounts.py (with grp and pwd, ~0.7 ms) loads only for a task that names
an account (or doctor's questions about them): a tick whose task names none starts it without.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..core.records import dataclass
from ..settings.config import Config
from ..tasks.task import Task

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.accounts import Account

ACL_XATTR = "system.posix_acl_access"


class IdentityError(Exception):
    """The task cannot run as the account it asks for; the message is the run's fail_reason."""


@dataclass(frozen=True)
class Switch:
    """What the child becomes before exec (Popen's user=, group=, extra_groups=)."""

    uid: int
    gid: int
    groups: tuple[int, ...]


@dataclass(frozen=True)
class TickIds:
    """The tick's own effective ids."""

    uid: int
    gid: int

    @classmethod
    def current(cls) -> TickIds:
        return cls(uid=os.geteuid(), gid=os.getegid())


@dataclass(frozen=True)
class RunAccount:
    """A task's account: None when it names none (runs as the tick, environment unchanged),
    with the Switch the child needs (None: it already is that account)."""

    account: Account | None
    switch: Switch | None


def wanted(task: Task, config: Config) -> tuple[str | None, str | None, str]:
    """(user, group, where from): the task's `user:` keeps its own `group:`; without it the
    config's run_user applies, with the task's `group:` or else the config's run_group."""
    if task.user is not None:
        return task.user, task.group, "user:"
    if config.run_user is not None:
        source = "run_user: from scheduler.yaml"
    else:
        source = "group:" if task.group is not None else "run_group: from scheduler.yaml"
    return config.run_user, task.group or config.run_group, source


def run_account(task: Task, config: Config, tick: TickIds) -> RunAccount:
    """The account for a run of task, or IdentityError (unknown name, or not root)."""
    user, group, source = wanted(task, config)
    if user is None and group is None:
        return RunAccount(None, None)
    from ..core.accounts import AccountError, resolve

    try:
        account = resolve(user, group, own_uid=tick.uid)
    except AccountError as exc:
        raise IdentityError(f"{source.split(':')[0]}: {exc}") from None
    if account.uid == tick.uid and account.gid == tick.gid:
        return RunAccount(account, None)
    if tick.uid != 0:
        what = f"user {account.name}"
        if account.uid == tick.uid:  # only the group differs
            what = f"group {group or account.gid} (gid {account.gid})"
            source = "group:" if task.group is not None else source
        raise IdentityError(f"cannot switch to {what}: the tick runs as uid {tick.uid} (not "
                            f"root); run the tick as root or remove {source}")
    return RunAccount(account, Switch(account.uid, account.gid, account.groups))


# --- can the account use a path ---------------------------------------------------------------


def _allows(info: os.stat_result, account: Account, need: int) -> bool:
    """The classic owner / group / other rule (one class applies, no fall-through)."""
    mode = info.st_mode
    if info.st_uid == account.uid:
        bits = (mode >> 6) & 7
    elif info.st_gid == account.gid or info.st_gid in account.groups:
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return bits & need == need


def _has_acl(path: Path) -> bool:
    try:
        return ACL_XATTR in os.listxattr(path)
    except OSError:
        return False


def _chain(path: Path) -> list[Path]:
    """Every folder the kernel walks to reach path: those of the path as written and of the
    path its symlinks lead to, in order, without repeats; path itself (resolved) last."""
    written = Path(os.path.abspath(path))
    real = Path(os.path.realpath(written))
    seen = dict.fromkeys([*reversed(written.parents), *reversed(real.parents)])
    seen.pop(real, None)
    return [*seen, real]


def access_problem(path: Path, account: Account, *, what: str, need: int) -> str | None:
    """Why `account` cannot use path (`need`: os.R_OK | os.X_OK ...), else None. `what` names
    the path in the message ("the working folder", "the script")."""
    if account.uid == 0:
        return None
    chain = _chain(path)
    for step in chain:
        want = need if step == chain[-1] else os.X_OK
        try:
            info = os.stat(step)
        except OSError:
            return None  # missing paths are reported by the start itself
        if _allows(info, account, want) or _has_acl(step):
            continue
        from ..core.accounts import owner_name

        mode = f"mode {stat.S_IMODE(info.st_mode):04o}, owner {owner_name(info.st_uid)}"
        if step == chain[-1]:
            folder = stat.S_ISDIR(info.st_mode)
            rights, bits = ("read and enter", "rx") if folder else ("execute", "x")
            return (f"user {account.name} cannot {rights} {what} {step} ({mode}); give it "
                    f"access (e.g. chmod o+{bits} {step}) or change the task's cwd or user")
        return (f"user {account.name} cannot reach {what} {path}: {step} is closed to it "
                f"({mode}); give it search permission (e.g. chmod o+x {step}), or use a "
                "folder it can reach")
    return None


# --- what doctor says ---------------------------------------------------------------------------


def implicit_root(tasks: list[Task], config: Config, tick_uid: int) -> list[str]:
    """Ids of the shell and script tasks that run as root only because the tick does (no
    `user:` and no run_user; an explicit `user: root` is a choice and not listed)."""
    if tick_uid != 0:
        return []
    return [t.id for t in tasks if t.run_as != "claude" and wanted(t, config)[0] is None]


def other_users(tasks: list[Task], config: Config, owner_uid: int) -> list[str]:
    """Ids of the shell and script tasks that run as a user other than owner_uid's."""
    from ..core.accounts import AccountError, resolve

    found = []
    for task in tasks:
        user, group, _ = wanted(task, config)
        if task.run_as == "claude" or (user, group) == (None, None):
            continue
        try:
            if resolve(user, group, own_uid=owner_uid).uid != owner_uid:
                found.append(task.id)
        except AccountError:
            continue
    return found
