"""Replace a file so that a crash leaves either the old or the new one, and, when asked, only if
it still holds what the new text was made from: the check and the write are one step (a person's
save between our read and our rename is never overwritten).

Used for task files (tasks/frontmatter_edit.py), a heal's edits and their roll-back
(selfheal/tools.py, selfheal/unfinished.py). Every step happens inside one folder descriptor
(safe_fs.py), so a folder swapped for a symlink cannot redirect the write.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
from pathlib import Path

from . import safe_fs


def write_atomic(path: Path, text: str | bytes, *, unless_changed: bytes | None = None,
                 root: Path | None = None) -> bool:
    """Replace `path` with `text` (str as UTF-8, or bytes) so a crash leaves either the old
    or the new file: temp file in the same folder, fsync, rename, fsync the folder. The file's
    mode and owner are kept.

    The folder is opened once and every step (the temporary file, O_CREAT|O_EXCL|O_NOFOLLOW,
    the rename, the compare) happens inside that descriptor, so a folder swapped for a symlink
    after a check cannot redirect the write. With `root` (the home), the folders from root to
    `path` are walked without following a symlink (safe_fs.open_parent) and a symlink in the
    file's own place is replaced, never followed. Without it, `path` is resolved first (a
    symlinked file is written through: the target is replaced, the link stays).

    With `unless_changed` (the bytes the new text was made from), the file is replaced only if
    it still holds them at the moment of the rename; else it is left as it is (a person saved
    it meanwhile) and False comes back. See _swap_in for how that moment is made atomic."""
    if root is None:
        target = os.path.realpath(path)
        dir_fd = os.open(os.path.dirname(target), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        name = os.path.basename(target)
    else:
        dir_fd, name = safe_fs.open_parent(path, root=root)
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
        tmp = safe_fs.write_temp(dir_fd, name, data, *_mode_for(dir_fd, name))
        try:
            if unless_changed is None:
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            elif not _swap_in(dir_fd, tmp, name, unless_changed, data):
                return False
        except BaseException:
            safe_fs.unlink_quietly(dir_fd, tmp)
            raise
        safe_fs.fsync_dir(dir_fd)
        return True
    finally:
        os.close(dir_fd)


def _mode_for(dir_fd: int, name: str) -> tuple[int, tuple[int, int] | None]:
    """The mode and owner the new file gets: the old file's, or 0644 and ours for a new one
    (or for a symlink in its place, which is replaced, not followed)."""
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0o644, None
    if not stat.S_ISREG(old.st_mode):
        return 0o644, None
    return stat.S_IMODE(old.st_mode), (old.st_uid, old.st_gid)


def _read_or_none(dir_fd: int, name: str) -> bytes | None:
    """The file `name` in dir_fd, or None when it is gone or not a regular file (never
    followed, never waited on)."""
    try:
        fd = safe_fs.open_at(dir_fd, name, os.O_RDONLY)
    except (FileNotFoundError, safe_fs.NotRegular):
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def _swap_in(dir_fd: int, tmp: str, target: str, expected: bytes, ours: bytes) -> bool:
    """Move `tmp` (holding `ours`) onto `target`, both in dir_fd, only if `target` still holds
    `expected`.

    A compare followed by a rename leaves a window in which a person's save is overwritten. So
    the two files are swapped atomically (renameat2 RENAME_EXCHANGE) and what was swapped out is
    compared afterwards: if it is not what the edit was made from, the person saved meanwhile
    and their file is swapped back. On a system or filesystem without the exchange, compare and
    rename (a save in the microseconds between them would be lost). `tmp` is gone afterwards."""
    if not _exchange(dir_fd, tmp, target):
        if _read_or_none(dir_fd, target) != expected:
            os.unlink(tmp, dir_fd=dir_fd)
            return False
        os.rename(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return True
    if _read_or_none(dir_fd, tmp) == expected:
        os.unlink(tmp, dir_fd=dir_fd)
        return True
    _exchange(dir_fd, tmp, target)  # theirs back in place; tmp holds ours again ...
    if _read_or_none(dir_fd, tmp) != ours:  # ... unless they saved once more: that's theirs
        _exchange(dir_fd, tmp, target)
    os.unlink(tmp, dir_fd=dir_fd)
    return False


_RENAME_EXCHANGE = 2


def _exchange(dir_fd: int, a: str, b: str) -> bool:
    """Swap two names in dir_fd atomically. False (nothing done) when the system cannot."""
    function = _renameat2()
    if function is None:
        return False
    if function(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
        return False  # no renameat2, or a filesystem without RENAME_EXCHANGE
    raise OSError(error, os.strerror(error), b)


@functools.lru_cache(maxsize=1)
def _renameat2():  # -> the libc function, or None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function
