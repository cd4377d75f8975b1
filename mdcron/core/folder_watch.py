"""Whether anything in some folders may have changed since a moment: inotify, for the held tick.

The daemon's held tick (cli/warm.py) loads the task files' view ahead of its minute; at the
minute it must see every change made since (issue 27: a change in the last second before the
minute is seen). Stat'ing every task file again did that: ~7 ms at 1,100 files, the largest
part of the first task's start. A watch started before the load answers the same question with
one read() at the minute: no event since, and every file is as the load saw it.

What is watched: each folder (files created, removed, renamed in or out, written, their
attributes changed; the folder itself moved or removed), and with `files=` each such file's
own inode too (a write through a hard link in another folder is reported to the inode, not to
this folder). The caller also compares the path to the folder it watched (a folder put in its
place is not the one watched). What a watch cannot vouch for, listed in `links`: files that
are symbolic links (the target's path can change out of its sight), on another filesystem
(a file mounted over one) or unreadable (the kernel watches only what the user can read); the
caller stats them as before.

No watch (start() gives None: the caller stats everything, as before) where inotify cannot
see every change: a filesystem another machine can write to (NFS, SMB, FUSE, 9p, ...: only
the local types below are trusted), a kernel refusing a watch (max_user_watches,
max_user_instances), /proc not mounted, not Linux. One gap remains, documented in the README:
a write through a shared memory map raises no event; such an edit is seen by the next
minute's tick, which loads afresh.

Lazy imports: ctypes (libc's inotify and statfs), only in the held tick, ahead of its minute.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from errno import EACCES, ENOENT

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
IN_ONLYDIR, IN_DONT_FOLLOW = 0x01000000, 0x02000000
FILE_EVENTS = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF
FOLDER_EVENTS = FILE_EVENTS | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE

# statfs(2) f_type of the filesystems whose every change goes through this kernel (linux/magic.h)
LOCAL_FS = {
    0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
    0x2FC12FC1: "zfs", 0xF2F52010: "f2fs", 0xCA451A4E: "bcachefs", 0x3153464A: "jfs",
    0x52654973: "reiserfs",
    0x794C7630: "overlayfs",  # changes made through it; its layers edited beneath it are not
}


class FolderWatch:
    """One inotify instance over some folders (start); quiet() until anything in them stirs."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.folders: dict[str, tuple[int, int]] = {}  # path -> (st_dev, st_ino) watched
        self.links: list[str] = []  # files not vouched for: symbolic links, unreadable files
        self.stirred = False
        self._lock = threading.Lock()  # close_later's thread and quiet()

    @classmethod
    def start(cls, folders: dict[str, str | None]) -> FolderWatch | None:
        """A watch over each folder, and over each of its files named `*<suffix>` (not hidden;
        suffix None: the folder only); None where a watch could miss a change (see the
        module's docstring)."""
        libc = _libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        watch = cls(fd)
        try:
            for folder, files in folders.items():
                watch._add(libc, folder, files)
        except OSError:
            watch.close()
            return None
        return watch

    def _add(self, libc, folder: str, files: str | None) -> None:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            st = os.fstat(dfd)
            if _fs_type(libc, folder) not in LOCAL_FS:
                raise OSError(f"{folder}: not a local filesystem")
            here = f"/proc/self/fd/{dfd}"  # exactly the folder opened, whatever its path says now
            if libc.inotify_add_watch(self.fd, os.fsencode(here), FOLDER_EVENTS | IN_ONLYDIR) < 0:
                raise OSError(f"{folder}: no watch")
            self.folders[folder] = (st.st_dev, st.st_ino)
            if files is None:
                return
            with os.scandir(dfd) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.endswith(files) or name.startswith("."):
                        continue
                    if entry.is_symlink() or entry.stat(follow_symlinks=False).st_dev != st.st_dev:
                        self.links.append(os.path.join(folder, name))  # a file mounted here too
                    elif libc.inotify_add_watch(self.fd, os.fsencode(f"{here}/{name}"),
                                                FILE_EVENTS | IN_DONT_FOLLOW) < 0:
                        self._unwatched(os.path.join(folder, name), _errno())
        finally:
            os.close(dfd)

    def _unwatched(self, path: str, errno: int) -> None:
        """A file the kernel would not watch: left to a stat when it is unreadable (the
        folder's watch still sees it replaced), none needed when it is gone (the folder's watch
        saw that); any other refusal (the limits) and there is no watch."""
        if errno == EACCES:
            self.links.append(path)
        elif errno != ENOENT:
            raise OSError(errno, f"{path}: no watch")

    def quiet(self) -> bool:
        """Nothing stirred since start: no event (nor the kernel's queue overflowing), and each
        path still names the folder watched. Once False, False for good (closed: False)."""
        with self._lock:  # never a read of a descriptor number close() has given back
            if self.stirred or self.fd is None:
                return False
            try:
                self.stirred = bool(os.read(self.fd, 4096))
            except BlockingIOError:
                pass
            except OSError:
                self.stirred = True
        for folder, ident in self.folders.items():
            try:
                st = os.stat(folder)
            except OSError:
                self.stirred = True
                break
            if (st.st_dev, st.st_ino) != ident:
                self.stirred = True
                break
        return not self.stirred

    def close(self) -> None:
        with self._lock:
            fd, self.fd = self.fd, None
            if fd is not None:
                os.close(fd)

    def close_later(self, seconds: float) -> None:
        """close() in `seconds` by a thread of its own: the kernel drops a mark per file with
        waits (1-13 ms at 1,100 files, ~0.1-1 ms of it CPU), and a thread woken to do it takes
        the GIL from the tick once (~0.8 ms measured at the go): both left to a moment after
        the runs have started. quiet() is False once it is closed."""

        def close_then() -> None:
            time.sleep(seconds)
            self.close()

        threading.Thread(target=close_then, name="folder-watch-close", daemon=True).start()


_LIBC: list = []  # _libc's answer, once found


def _libc():  # -> ctypes.CDLL of the C library, None off Linux or without inotify
    if not _LIBC:
        _LIBC.append(_find_libc())
    return _LIBC[0]


def _find_libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # lazy: the held tick only, ahead of its minute

        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch, libc.statfs  # noqa: B018  # all or none
    except (ImportError, OSError, AttributeError):
        return None
    return libc


def _errno() -> int:
    import ctypes  # lazy: loaded already by _libc

    return ctypes.get_errno()


def _fs_type(libc, path: str) -> int | None:
    """statfs(2)'s f_type for `path` (None when it fails): the first word of struct statfs."""
    import ctypes  # lazy: loaded already by _libc

    buf = (ctypes.c_long * 64)()  # larger than struct statfs on every Linux ABI
    if libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return buf[0] & 0xFFFFFFFF
