"""File I/O under a trusted folder that never follows a symlink and cannot be raced or hung.

A path is checked and then used; between the two a same-user process can swap a folder for a
symlink (the write lands outside the home) or a file for a FIFO (the open blocks for ever). So
the check and the use are one step here: from the trusted `root` (the home, opened as given),
every folder on the way is opened with O_DIRECTORY|O_NOFOLLOW relative to the one before
(openat), owned by this user, root or the root folder's owner; the file itself is opened with
O_NOFOLLOW (and O_NONBLOCK, then fstat: only a regular file is used) relative to the folder's
descriptor, and an atomic replace writes its temporary file and renames it inside that same
descriptor. Whatever is swapped after the walk cannot redirect it: the descriptors stay.

`root=None` means "/": for a path already resolved (os.path.realpath) by a check, every
component must still be a real folder at the moment of the write.

Stdlib only (os, stat, errno): this module is on the idle tick's path.
"""

from __future__ import annotations

import errno
import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {stat.S_IFREG: "a file", stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a folder",
          stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFLNK: "a symlink"}


class UnsafePath(OSError):
    """A path mdcron will not use: a symlink or a foreign folder on the way, a `..`, a path
    outside its root, or something that is not a regular file. str() is one line naming the
    path and the fix."""


class NotRegular(UnsafePath):
    """The path is there but is not a regular file (a FIFO, a folder, a device, a symlink)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def kind_of(mode: int) -> str:
    """'a FIFO', 'a folder', 'a file', ... for a st_mode."""
    return _KINDS.get(stat.S_IFMT(mode), "something else")


def split_under(root: str | os.PathLike[str] | None, path: str | os.PathLike[str]
                ) -> tuple[str, list[str]]:
    """(root, the names from root to path). UnsafePath for `..` or a path outside root.
    A relative path is taken relative to root."""
    base = os.fspath(root) if root is not None else "/"
    full = os.fspath(path)
    if not os.path.isabs(full):
        full = os.path.join(base, full)
    if not os.path.isabs(base):
        base, full = os.path.abspath(base), os.path.abspath(full)  # both from the same cwd
    prefix = base if base.endswith("/") else base + "/"
    if full.rstrip("/") != base.rstrip("/") and not full.startswith(prefix):
        raise UnsafePath(f"{full} is outside {base}; mdcron writes only inside it")
    names = [n for n in full[len(prefix):].split("/") if n and n != "."]
    if ".." in names:
        raise UnsafePath(f"{full} contains '..'; give the path without it")
    return base, names


def _owners(fd: int) -> tuple[int, ...]:
    return (os.geteuid(), 0, os.fstat(fd).st_uid)


def _refuse_dir(parent_fd: int, name: str, shown: str) -> UnsafePath:
    """Why `name` could not be opened as a folder with O_NOFOLLOW: the message for it."""
    try:
        mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return UnsafePath(f"{shown} is a symlink; mdcron does not write or read through "
                          "symlinks inside the home: replace it with a real folder")
    return UnsafePath(f"{shown} is {kind_of(mode)}, not a folder: move it away")


def open_dir(root: str | os.PathLike[str] | None, path: str | os.PathLike[str], *,
             create: bool = False, mode: int = 0o700) -> int:
    """A descriptor of the folder `path` under `root`, walked one name at a time without
    following a symlink; missing folders are made (`mode`) when `create`. The caller closes it.
    UnsafePath when a name on the way is a symlink, not a folder, or not ours;
    FileNotFoundError when one is missing and not `create`."""
    base, names = split_under(root, path)
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        owners = _owners(fd)
        shown = base
        for name in names:
            shown = os.path.join(shown, name)
            fd = _step(fd, name, shown, owners, create, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(fd: int, name: str, shown: str, owners: tuple[int, ...], create: bool,
          mode: int) -> int:
    """Open `name` (a folder) in `fd` and close `fd`; on failure `fd` stays open."""
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, mode, dir_fd=fd)
        except FileExistsError:
            pass  # made by someone else meanwhile: opened (and checked) below
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse_dir(fd, name, shown) from None
            raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse_dir(fd, name, shown) from None
        raise
    owner = os.fstat(child).st_uid
    if owner not in owners:
        os.close(child)
        raise UnsafePath(f"{shown} belongs to uid {owner}, not to this user ({os.geteuid()}) "
                         "or the home's owner: mdcron does not write into it")
    os.close(fd)
    return child


def open_parent(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None,
                create: bool = False, mode: int = 0o700) -> tuple[int, str]:
    """(a descriptor of path's folder, opened as open_dir does, path's last name)."""
    base, names = split_under(root, path)
    if not names:
        raise UnsafePath(f"{os.fspath(path)} is the root folder itself, not a file in it")
    parent = os.path.join(base, *names[:-1])
    return open_dir(base, parent, create=create, mode=mode), names[-1]


def open_at(dir_fd: int | None, name: str, flags: int, mode: int = 0o600, *,
            shown: str = "") -> int:
    """open(name, flags) in dir_fd (None: the path as given) without following a symlink in
    its last name or blocking on a FIFO; only a regular file is kept (NotRegular otherwise,
    the descriptor closed)."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode,
                     dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(f"{shown or name} is a symlink; mdcron does not follow symlinks "
                             "here: replace it with a regular file", "a symlink") from None
        if exc.errno == errno.EISDIR:
            raise NotRegular(f"{shown or name} is a folder, not a file: move it away",
                             "a folder") from None
        if exc.errno == errno.ENXIO:  # a FIFO without a reader, opened for writing
            raise NotRegular(f"{shown or name} is not a regular file (a FIFO): move it away",
                             "a FIFO") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = kind_of(info.st_mode)
            raise NotRegular(f"{shown or name} is not a regular file ({what}): move it away",
                             what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: str | os.PathLike[str], flags: int, mode: int = 0o600, *,
              root: str | os.PathLike[str] | None, create_dirs: bool = False,
              dir_mode: int = 0o700) -> int:
    """open_at for `path` under `root`: the folders on the way walked as open_dir does."""
    dir_fd, name = open_parent(path, root=root, create=create_dirs, mode=dir_mode)
    try:
        return open_at(dir_fd, name, flags, mode, shown=os.fspath(path))
    finally:
        os.close(dir_fd)


def read_regular(path: str | os.PathLike[str], limit: int, *,
                 root: str | os.PathLike[str] | None = None) -> bytes:
    """At most limit + 1 bytes of the regular file `path` (so a caller can tell a file over
    the bound). Opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW, then fstat'ed: a FIFO, a device, a folder
    or a symlink put in its place is refused (NotRegular), never waited on. With `root`, the
    folders on the way are walked too; without, only the last name is not followed."""
    if root is None:
        fd = open_at(None, os.fspath(path), os.O_RDONLY)
    else:
        fd = open_file(path, os.O_RDONLY, root=root)
    try:
        return _read_bounded(fd, limit)
    finally:
        os.close(fd)


def _read_bounded(fd: int, limit: int) -> bytes:
    """At most limit + 1 bytes from a regular file's descriptor."""
    chunks, left = [], limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_followed(path: str | os.PathLike[str], limit: int) -> bytes:
    """read_regular for a file the person may link (scheduler.yaml, prompts/*): a symlink is
    followed, but what it leads to must be a regular file. Opened O_NONBLOCK, then fstat'ed: a
    FIFO, a device or a folder is refused (NotRegular, its message without the fix), never
    waited on. FileNotFoundError when there is nothing."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = kind_of(info.st_mode)
            raise NotRegular(f"{os.fspath(path)} is not a regular file ({what})", what)
        os.set_blocking(fd, True)
        return _read_bounded(fd, limit)
    finally:
        os.close(fd)


def fsync_dir(dir_fd: int) -> None:
    try:
        os.fsync(dir_fd)
    except OSError:
        pass  # the rename is done; only its durability could not be asked for


def temp_name(name: str) -> str:
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def write_temp(dir_fd: int, name: str, data: bytes, mode: int,
               owner: tuple[int, int] | None = None) -> str:
    """A new temporary file (O_CREAT|O_EXCL|O_NOFOLLOW) beside `name` in dir_fd holding
    `data`, fsync'ed, with `mode` (and `owner` (uid, gid) where allowed); its name."""
    tmp = temp_name(name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        if owner is not None and owner != (os.getuid(), os.getgid()):
            try:
                os.fchown(fd, *owner)
            except PermissionError:
                pass  # not root: the file becomes ours, as any editor's save would
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        unlink_quietly(dir_fd, tmp)
        raise
    os.close(fd)
    return tmp


def unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def replace_file(path: str | os.PathLike[str], data: bytes, *,
                 root: str | os.PathLike[str] | None, mode: int = 0o600,
                 create_dirs: bool = False, dir_mode: int = 0o700) -> None:
    """Replace `path` with `data` atomically (temp + fsync + rename + fsync of the folder), all
    inside one folder descriptor walked from `root`: a symlink in `path`'s place is replaced,
    never followed."""
    dir_fd, name = open_parent(path, root=root, create=create_dirs, mode=dir_mode)
    try:
        tmp = write_temp(dir_fd, name, data, mode)
        try:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            unlink_quietly(dir_fd, tmp)
            raise
        fsync_dir(dir_fd)
    finally:
        os.close(dir_fd)


def remove_file(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None,
                folder_too: bool = False) -> None:
    """Unlink `path` under root (the folders on the way walked, never followed); with
    `folder_too`, its folder as well when that is left empty. Nothing there: nothing done."""
    try:
        dir_fd, name = open_parent(path, root=root)
    except OSError:
        return  # gone, or behind a symlink: not ours to delete
    try:
        unlink_quietly(dir_fd, name)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    if folder_too:
        parent = os.path.dirname(os.fspath(path))
        try:
            grand_fd, folder = open_parent(parent, root=root)
        except OSError:
            return
        try:
            os.rmdir(folder, dir_fd=grand_fd)  # only when empty
        except OSError:
            pass
        finally:
            os.close(grand_fd)


def ensure_dir(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None,
               mode: int = 0o700) -> None:
    """Make the folder `path` (and those on the way) under root, refusing symlinks."""
    os.close(open_dir(root, path, create=True, mode=mode))
