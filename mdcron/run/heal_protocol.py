"""The healer interface the escalation ladder calls, and what the tick asks of the self-heal layer
(`SelfHeal`). The real ones (Claude) live in selfheal/, above this layer: the command that starts
a tick or a run (cli/) hands them down, so run/ only knows these contracts and can be tested with
any stand-in."""

from __future__ import annotations

from pathlib import Path

from ..core.outcome import RunResult
from ..core.records import dataclass, field
from ..tasks.task import Task

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from typing import Protocol

    from ..core.clock import Clock
    from ..settings.config import Config
    from ..state.store import Store
else:
    Protocol = object  # a protocol is for the type checker: at run time a plain base class

# Heals under way keep a journal here (in logs/, out of the model's reach; selfheal/journal.py):
# the tick looks in it first and, only when something is left behind, loads self-heal to undo it.
JOURNAL_DIR = "heal-journal"


def journal_dir(logs_dir: Path) -> Path:
    return logs_dir / JOURNAL_DIR


@dataclass(frozen=True)
class HealRecord:
    """What one heal attempt did."""

    outcome: str  # "changed" (files edited), "no_change", "refused", "error"
    diagnosis: str  # the healer's explanation, in words
    diff: str = ""  # unified diff of every file it changed
    changed: tuple[Path, ...] = ()
    backup_dir: Path | None = None
    extra: dict[str, object] = field(default_factory=dict)  # tokens, tool calls, ...


class Healer(Protocol):
    def unavailable_reason(self, task: Task) -> str | None:
        """None when this healer can heal the task now; else why not (no API key,
        self_heal: false, budget used up) in words."""
        ...

    def heal(
        self,
        task: Task,  # as loaded when the ladder started, for every heal of the ladder
        *,
        attempt: int,  # 1 for the first heal, 2 for the second
        failure: RunResult,  # the failure being healed
        previous: HealRecord | None,  # the first heal, when this is the second
        deadline: float,  # monotonic time by which the heal must return
        run_id: int,
    ) -> HealRecord:
        """Diagnose and (maybe) fix the task's files. Must not raise for the task's fault.
        What the heal may write is decided from `task`, never from what an earlier heal left
        in the file: one heal cannot prepare the next."""
        ...


class Settled(Protocol):
    """A heal that a dead process left half-done, as the self-heal layer settled it."""

    task_id: str
    run_id: int
    outcome: str  # rolled_back | interrupted | closed | unreadable
    note: str  # for the run row, the tick's log and the crash alert


class SelfHeal(Protocol):
    """The self-heal layer as the tick uses it (cli/commands.ClaudeSelfHeal is the real one)."""

    def healer(self, config: Config, environ: dict[str, str], store: Store,
               clock: Clock) -> Healer | None:
        """The ladders' healer for this tick; None when there is none (no API key): then the
        consecutive-failure rule alone decides."""
        ...

    def settle_unfinished(self, config: Config, store: Store, now: float) -> list[Settled]:
        """Settle every heal journal a dead process left (rolled back, or left as found)."""
        ...
