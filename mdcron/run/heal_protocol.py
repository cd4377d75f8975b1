"""The healer interface the escalation ladder calls. The real one (Claude) lives in
selfheal/healer.py; the ladder only knows this contract, so it can be tested with any stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..core.outcome import RunResult
from ..core.records import dataclass, field
from ..tasks.task import Task

# Heals under way keep a journal here (in logs/, out of the model's reach; selfheal/journal.py):
# the tick looks in it first and, only when something is left behind, loads self-heal to undo it.
JOURNAL_DIR = "heal-journal"


def journal_dir(logs_dir: Path) -> Path:
    return logs_dir / JOURNAL_DIR


@dataclass(frozen=True, slots=True)
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
