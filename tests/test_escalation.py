"""The ladder's decisions as plain values."""

import pytest

from mdcron.run.escalation_policy import LadderState, Step, ladder_budget, next_step


def step(**kw):
    kw.setdefault("last_ok", False)
    kw.setdefault("retry_allowed", False)
    return next_step(LadderState(**kw))[0]


def test_success_is_done():
    assert step(last_ok=True, on_probation=True, deadline_passed=True) is Step.DONE


def test_full_ladder_with_healer_and_retry():
    assert step(retry_allowed=True, heal_available=True) is Step.RETRY
    assert step(retry_allowed=True, retried=True, heal_available=True) is Step.HEAL
    assert step(retry_allowed=True, retried=True, heals=1, heal_available=True) is Step.HEAL
    assert step(retry_allowed=True, retried=True, heals=2, heal_available=True) is Step.SUSPEND


def test_no_retry_goes_straight_to_heal():
    assert step(heal_available=True) is Step.HEAL


def test_healer_gone_after_one_heal_suspends():
    assert step(heals=1, heal_available=False) is Step.SUSPEND


@pytest.mark.parametrize(("failures", "expected"), [(1, Step.GIVE_UP), (2, Step.GIVE_UP),
                                                    (3, Step.SUSPEND), (4, Step.SUSPEND)])
def test_without_healer_the_consecutive_rule_applies(failures, expected):
    assert step(failures_in_a_row=failures, max_consecutive=3) is expected
    assert step(retry_allowed=True, retried=True, failures_in_a_row=failures) is expected


def test_probation_failure_suspends_without_healing():
    assert step(heal_available=True, on_probation=True, retry_allowed=True) is Step.SUSPEND


def test_deadline_stops_the_ladder():
    assert step(heal_available=True, deadline_passed=True, retry_allowed=True) is Step.SUSPEND
    assert step(heals=1, deadline_passed=True) is Step.SUSPEND
    assert step(deadline_passed=True, failures_in_a_row=1) is Step.GIVE_UP


def test_budget():
    assert ladder_budget(60, retry=False, healing=False) == 60
    assert ladder_budget(60, retry=True, healing=True) == 60 * 6


def test_the_budget_adds_the_reruns_delays():
    assert ladder_budget(60, retry=3, healing=False, delays=45) == 60 * 4 + 45
    assert ladder_budget(60, retry=2, healing=True, delays=10) == 60 * 7 + 10


def reason(**kw) -> str:
    kw.setdefault("last_ok", False)
    kw.setdefault("retry_allowed", False)
    return next_step(LadderState(**kw))[1]


def test_each_decision_says_why_in_the_words_history_and_alerts_show():
    assert reason(last_ok=True) == "succeeded"
    assert reason(on_probation=True) == "failed again while on probation after a heal"
    assert reason(heals=1, deadline_passed=True) == (
        "the ladder's deadline passed before the task recovered")
    assert reason(failures_in_a_row=3, max_consecutive=3) == "failed 3 ticks in a row"
    assert reason(failures_in_a_row=1, max_consecutive=3) == (
        "failed (1 of 3 in a row before suspension); the next fire tries again")
    assert reason(heals=2, heal_available=True) == "still failing after 2 heal(s)"
    assert reason(heal_available=True) == "still failing; self-heal 1"
    assert reason(retry_allowed=1) == "failed; retrying once"
    assert reason(retry_allowed=3, retried=1) == "failed; retry 2 of 3"
