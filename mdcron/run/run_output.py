"""A run's output, bounded whatever the child prints: the log file (capped at max_log_bytes; the
rest is drained and counted), the tail of the combined output and the last stdout line (the JSON
envelope, at most MAX_LINE). The runner (process.py) feeds it what the pipes give.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..core.private_files import open_private
from ..core.safe_fs import open_at

MAX_LINE = 64 * 1024  # the last stdout line (the JSON envelope) is kept up to this size


def _last_nonblank_line(data: bytes) -> bytes | None:
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end) + 1
        if data[start:end].strip():
            return data[start:end]
        end = start - 1
    return None


class Output:
    """The log file (capped), the tail of combined output and the last stdout line."""

    def __init__(self, log_path: Path, max_log_bytes: int, tail_bytes: int,
                 log_root: Path | None = None, log_dir: int | None = None):
        """`log_dir`: a descriptor of log_path's folder, walked from `log_root` already (the
        caller's, left open): the file is opened in it (issue 27: the walk once per run)."""
        self.max_log_bytes = max(0, max_log_bytes)
        self.tail_bytes = max(0, tail_bytes)
        self.tail = bytearray()
        self.total = 0  # bytes of output seen
        self.logged = 0  # bytes of output written (or attempted) to the log
        self.dropped = 0  # bytes past the cap
        self.line = bytearray()  # the stdout line being received
        self.line_too_long = False
        self.last_line: bytes | None = None  # the last complete non-blank stdout line
        self.last_line_ok = True  # False when that line was longer than MAX_LINE
        self.error: str | None = None
        self.ends_with_newline = True
        self.fd: int | None = None
        self.opened = False
        try:
            # walked from the home without following a symlink (core/safe_fs.py)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            self.fd = (open_private(log_path, flags, root=log_root) if log_dir is None
                       else open_at(log_dir, log_path.name, flags, 0o600, shown=str(log_path)))
            self.opened = True
            os.fchmod(self.fd, 0o600)
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        if self.error is None:
            self.error = f"[log write failed: {exc}]"
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view and self.fd is not None:
            try:
                n = os.write(self.fd, view)
            except OSError as exc:
                self._fail(exc)
                return
            if n <= 0:
                self._fail(OSError(errno.EIO, "short write"))
                return
            view = view[n:]

    def feed(self, data: bytes, stdout: bool) -> None:
        self.total += len(data)
        room = self.max_log_bytes - self.logged
        if room > 0:
            part = data[:room]
            self.logged += len(part)
            self.ends_with_newline = part.endswith(b"\n")
            self._write(part)
        self.dropped += max(0, len(data) - max(room, 0))
        if self.tail_bytes:
            self.tail += data
            if len(self.tail) > 2 * self.tail_bytes:
                del self.tail[: -self.tail_bytes]
        if stdout:
            self._track_line(data)

    def _track_line(self, data: bytes) -> None:
        last_nl = data.rfind(b"\n")
        if last_nl < 0:
            self._extend_line(data)
            return
        first_nl = data.find(b"\n")
        found = _last_nonblank_line(data[first_nl + 1 : last_nl]) if first_nl < last_nl else None
        if found is not None:
            self.last_line, self.last_line_ok = found[:MAX_LINE], len(found) <= MAX_LINE
        else:  # no whole line inside data: the one in progress ends at its first newline
            self._extend_line(data[:first_nl])
            if self.line.strip():
                self.last_line, self.last_line_ok = bytes(self.line), not self.line_too_long
        self.line.clear()
        self.line_too_long = False
        self._extend_line(data[last_nl + 1 :])

    def _extend_line(self, data: bytes) -> None:
        room = MAX_LINE - len(self.line)
        if len(data) > room:
            self.line_too_long = True
        self.line += data[: max(room, 0)]

    def note(self, text: str) -> None:
        """An [mdcron] line in the log, outside the cap."""
        prefix = b"" if self.ends_with_newline else b"\n"
        self._write(prefix + text.encode() + b"\n")
        self.ends_with_newline = True

    def finish(self) -> None:
        if self.line.strip():  # a last line without a newline
            self.last_line, self.last_line_ok = bytes(self.line), not self.line_too_long
        if self.dropped:
            self.note(
                f"[mdcron] output truncated: {self.dropped} bytes not logged "
                f"(log_max_bytes={self.max_log_bytes})"
            )
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError as exc:
                self._fail(exc)
            self.fd = None

    def tail_text(self) -> str:
        note = f"\n{self.error}\n" if self.error else ""
        keep = max(0, self.tail_bytes - len(note.encode()))
        data = bytes(self.tail[-keep:]) if keep else b""
        if self.total > len(data):  # cut: drop a split UTF-8 sequence at the start
            i = 0
            while i < min(3, len(data)) and 0x80 <= data[i] <= 0xBF:
                i += 1
            data = data[i:]
        text = data.decode("utf-8", errors="replace") + note
        return text[-self.tail_bytes :] if self.tail_bytes else ""
