"""The escalation ladder's decisions, as a pure function of what has happened so far.

    1. run
    2. failed and `retry: N` (true = 1)    -> up to N reruns, each after its retry_delay
    3. still failing, a healer available   -> heal 1, then run again
    4. still failing                       -> heal 2 (heal 1's diff + new error), run again
    5. still failing after a heal          -> suspend (enabled: false, auto_suspended)

Without a healer (no API key, `self_heal: false`, budget used up) a failed tick counts towards
`max_consecutive_failures`, and only reaching it suspends. A task on probation after a heal that
fails again is suspended at once, not healed again. The whole ladder shares one deadline; when it
passes, a ladder that involved healing stops and suspends, one that did not counts a failure.
A rerun whose delay would end past the deadline is not attempted (`retry_blocked`): the ladder
goes on to the heals, which keep their place after the reruns (issue 26).
"""

from __future__ import annotations

from enum import StrEnum

from ..core.records import dataclass


class Step(StrEnum):
    DONE = "done"  # succeeded
    RETRY = "retry"
    HEAL = "heal"
    SUSPEND = "suspend"
    GIVE_UP = "give_up"  # failed this tick; the next fire tries again


@dataclass(frozen=True)
class LadderState:
    last_ok: bool
    retry_allowed: int  # task.retry: reruns allowed (issue 26: 0-10; true = 1)
    retried: int = 0  # reruns so far
    retry_blocked: bool = False  # the next rerun's delay ends past the deadline
    heals: int = 0  # heals tried so far in this ladder
    heal_available: bool = False
    on_probation: bool = False
    deadline_passed: bool = False
    failures_in_a_row: int = 1  # counting this tick's failure
    max_consecutive: int = 3


MAX_HEALS = 2


def next_step(s: LadderState) -> tuple[Step, str]:
    """What to do next, and why in words (the reason feeds history and alerts)."""
    if s.last_ok:
        return Step.DONE, "succeeded"
    if s.on_probation:
        return Step.SUSPEND, "failed again while on probation after a heal"
    if s.deadline_passed:
        if s.heals or s.heal_available:
            return Step.SUSPEND, "the ladder's deadline passed before the task recovered"
        return _consecutive(s)
    if s.retried < s.retry_allowed and not s.heals and not s.retry_blocked:
        if s.retry_allowed == 1:
            return Step.RETRY, "failed; retrying once"
        return Step.RETRY, f"failed; retry {s.retried + 1} of {s.retry_allowed}"
    if s.heal_available and s.heals < MAX_HEALS:
        return Step.HEAL, f"still failing; self-heal {s.heals + 1}"
    if s.heals:
        return Step.SUSPEND, f"still failing after {s.heals} heal(s)"
    return _consecutive(s)


def _consecutive(s: LadderState) -> tuple[Step, str]:
    if s.failures_in_a_row >= s.max_consecutive:
        return Step.SUSPEND, f"failed {s.failures_in_a_row} ticks in a row"
    return (
        Step.GIVE_UP,
        f"failed ({s.failures_in_a_row} of {s.max_consecutive} in a row before suspension);"
        " the next fire tries again",
    )


def ladder_budget(timeout: float, retry: int, healing: bool, delays: float = 0.0) -> float:
    """Seconds the whole ladder may take: timeout × (1 + number of further steps), plus the
    reruns' delays (issue 26): a rerun waits, and only a run that overran eats into them."""
    steps = int(retry) + (2 * MAX_HEALS if healing else 0)
    return timeout * (1 + steps) + delays
