"""The dashboard's permanent access token, in a file only its owner can read (issue 24).

A missing file is created (0600, a fresh random token). An existing one is used only when it is
a regular file owned by this user, with no group or other permission bits, holding one token of
the expected shape: a file anyone else can read or write, or one whose token is short or odd,
is refused with the fix rather than trusted.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from ..core import safe_fs
from ..core.private_files import open_private

# secrets.token_urlsafe(32) gives 43 characters; hex or base64url of 32+ random bytes fits too
SHAPE = re.compile(r"[A-Za-z0-9_-]{32,256}")
NEW = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


class TokenFileError(ValueError):
    """The token file cannot be trusted; the message names it and the fix."""


def load_token(path: Path, root: Path | None = None) -> str:
    """The token in `path`, created (mode 0600, owner only) when missing. With `root` (the
    home, for the default state/web-token) the folders are walked from it without following a
    symlink; a --token-file of the person's own choosing is taken where it resolves."""
    if root is None:
        path = Path(os.path.realpath(path))
    try:
        fd = (safe_fs.open_file(path, os.O_RDONLY, root=root) if root is not None
              else safe_fs.open_at(None, str(path), os.O_RDONLY))
    except FileNotFoundError:
        return _create(path, root)
    except OSError as exc:
        raise TokenFileError(f"the token file {path} cannot be read ({exc}): give a regular"
                             " file of your own (--token-file), or delete it to get a new one"
                             ) from None
    try:
        _check_owner_and_mode(path, os.fstat(fd))
        data = os.read(fd, 1025)  # a regular file: one read gives it all
    finally:
        os.close(fd)
    return _check_shape(path, data)


def _check_owner_and_mode(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError(f"the token file {path} is not a regular file"
                             f" ({safe_fs.kind_of(info.st_mode)}): give a file")
    if info.st_uid != os.geteuid():
        raise TokenFileError(f"the token file {path} belongs to uid {info.st_uid}, not to this"
                             f" user (uid {os.geteuid()}): anyone owning it can read or change"
                             f" the token. Fix: `chown {os.geteuid()} {path}` if it is yours,"
                             " or use a new file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise TokenFileError(f"the token file {path} has mode {mode:04o}: others may read or"
                             f" change the token. Fix: `chmod 600 {path}`, and make a new token"
                             f" if others may have read it ({NEW} > {path})")


def _check_shape(path: Path, data: bytes) -> str:
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        token = ""
    if len(data) > 1024 or not SHAPE.fullmatch(token):
        raise TokenFileError(f"the token file {path} does not hold one token of 32 to 256"
                             " letters, digits, '-' or '_' (a short or odd token is guessable)."
                             f" Fix: delete it to get a new one, or `{NEW} > {path}`")
    return token


def _create(path: Path, root: Path | None) -> str:
    token = secrets.token_urlsafe(32)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=root)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode("ascii"))
    finally:
        os.close(fd)
    return token
