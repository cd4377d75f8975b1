"""Work started in a thread ahead of its need and waited for where the need is (issue 27: a
tick's first syncs overlap its loading instead of delaying its first task)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Background:
    """One piece of work at a time: start() waits for the one before; join() waits for it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None

    def start(self, target: Callable[..., object], *args: object) -> None:
        self.join()
        self._thread = threading.Thread(target=target, args=args, name=self.name)
        self._thread.start()

    def join(self) -> None:
        """Wait for the work started last (a no-op when none is left)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
