"""A reader that goes away early (`scheduler.py list --json | head -c 300`) ends output, not the
command: no BrokenPipeError traceback, and no tick stopped halfway.

`guard_std_streams` (called first thing by cli.main) wraps stdout and stderr. The first write or
flush that meets a closed pipe points that file descriptor at /dev/null and the command carries
on quietly: a listing finishes (its output is small), a tick or `run` still records its runs and
sends its alerts. The exit status stays the command's own (0 for a listing cut short by `head`),
so `set -o pipefail` scripts that read only the first lines do not fail; the usual alternative
(exit 141, as if killed by SIGPIPE) would turn every `| head` into an error there.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported: every command, the idle tick too, loads this
if TYPE_CHECKING:
    from typing import Any


class QuietOnClosedPipe:
    """A stream (text, or its binary `buffer`) that stops writing, silently, once its reader
    is gone."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.reader_gone = False

    @property
    def buffer(self) -> QuietOnClosedPipe:  # `logs` copies bytes through sys.stdout.buffer
        return QuietOnClosedPipe(self._stream.buffer)

    def write(self, text: Any) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        self.reader_gone = True
        try:  # what is still buffered, and everything after, goes to /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer, ...
        return getattr(self._stream, name)


def guard_std_streams() -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, QuietOnClosedPipe):
            setattr(sys, name, QuietOnClosedPipe(stream))
