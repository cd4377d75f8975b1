"""Chains that follow at once (issue 27): a downstream starts when its upstream's ladder ends,
not once the tick's whole batch has ended (a 75 s sibling used to delay it 75 s).

The tick hands `Follower.ended` to dispatch.run_all; when a ladder of an upstream ends, a
thread runs the chain rounds (chain_rounds.run_rounds: eligibility from the recorded rows,
claims by unique slot) on its own database connection, one round at a time. The tick still
runs its rounds after the batch, as before: whatever a round here did not claim (an upstream
still running, a round that failed) is claimed there, and a claim is won once. A downstream
started here runs on its own threads, beside the tick's pool (a chain may use one more worker
than max_parallel while its upstream's siblings still run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..state.store import state_store
from ..tasks.task import Task
from .attempt import RunContext
from .chain_rounds import run_rounds
from .dispatch import run_all
from .heal_protocol import Healer
from .ladder import LadderOutcome


class Follower:
    """Starts the downstreams of each upstream whose ladder ends; join() gives their runs."""

    def __init__(self, ctx: RunContext, tasks: list[Task], skip_ids: set[str],
                 say: Callable[[str], None], healer: Healer | None) -> None:
        self.ctx, self.tasks, self.skip_ids, self.say, self.healer = (ctx, tasks, skip_ids, say,
                                                                     healer)
        self.upstreams = {u for t in tasks if t.after and t.enabled and t.id not in skip_ids
                          for u in t.after}
        self.done: list[tuple[Task, int, LadderOutcome]] = []
        self._round_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()

    def ended(self, outcome: LadderOutcome) -> None:
        """In the worker whose ladder just ended: start the rounds for its downstreams."""
        if outcome.task.id not in self.upstreams or outcome.released:
            return
        thread = threading.Thread(target=self._round, name="chain", daemon=False)
        with self._threads_lock:
            self._threads.append(thread)
        thread.start()

    def _round(self) -> None:
        with self._round_lock:  # one at a time: rounds read the rows the last one wrote
            try:
                with state_store(self.ctx.config) as store:  # this thread's own connection
                    got = run_rounds(self.ctx, store, self.tasks, self.skip_ids,
                                     lambda items: run_all(self.ctx, items, self.say,
                                                           self.healer, on_end=self.ended),
                                     self.say, self.healer)
            except Exception as exc:  # the tick's rounds after the batch claim it instead
                self.say(f"mdcron: a chain could not start at once ({exc!r}); the tick's"
                         " chain rounds after its runs take it")
                return
            self.done.extend(got)  # type: ignore[arg-type]

    def join(self) -> list[tuple[Task, int, LadderOutcome]]:
        """Wait for every round started (rounds may start more); their runs."""
        while True:
            with self._threads_lock:
                pending = [t for t in self._threads if t.is_alive()]
            if not pending:
                return self.done
            for thread in pending:
                thread.join()
