"""The backdoor hooks: the checks that need them run where a backend offers them and skip, saying why, where not.

Scenario: the correct in-test backend with and without the hooks (a class
attribute), and with hooks given through the factory; a factory given an
object that is not a set of hooks.
Expected: with hooks every backdoor check passes; without, each is skipped
with "backend offers no backdoor hooks"; a bad object is refused naming
the field.
Why it matters: a check that needs a path into the store must never fail a
backend for not offering one.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import BackendFactory, SuiteOptions, run_suite
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import ALL_LEVELS, SEED, fresh_store, run
from tests.conformance.planted_backdoor import CorrectBackdoor, CorrectWithBackdoor

BACKDOOR_CHECKS = (
    "planted_short_objects_are_misses",
    "a_removed_object_is_never_read_as_a_hit",
    "a_removed_kv_derived_sidecar_is_never_read_as_a_hit",
)


def outcomes(report) -> dict[str, tuple[str, str]]:
    return {item.check: (item.status, item.message or "") for item in report.sections[0].checks}


@pytest.mark.clause("BE-13", "BE-16", "BE-4", "BE-15", "BE-22")
def test_backdoor_checks_pass_a_correct_backend_with_hooks() -> None:
    report = run(CorrectWithBackdoor, checks=BACKDOOR_CHECKS)
    assert {check: status for check, (status, _) in outcomes(report).items()} == dict.fromkeys(BACKDOOR_CHECKS, "pass")


@pytest.mark.clause("BE-13", "BE-4")
def test_hooks_given_through_the_factory_are_used() -> None:
    factory = BackendFactory(CorrectBackend, {"store": fresh_store()}, backdoor=CorrectBackdoor())
    report = run_suite(factory, SuiteOptions(profile="smoke", seed=SEED, levels=ALL_LEVELS, checks=BACKDOOR_CHECKS))
    assert {check: status for check, (status, _) in outcomes(report).items()} == dict.fromkeys(BACKDOOR_CHECKS, "pass")


@pytest.mark.clause("BE-13", "BE-4", "BE-22")
def test_without_hooks_the_checks_are_skipped_with_the_reason() -> None:
    report = run(CorrectBackend, checks=BACKDOOR_CHECKS)
    for check, (status, message) in outcomes(report).items():
        assert status == "skip" and message.startswith("backend offers no backdoor hooks"), (check, message)


def test_a_factory_refuses_an_object_without_the_hooks() -> None:
    with pytest.raises(ValueError) as raised:
        BackendFactory(CorrectBackend, {}, backdoor=object())
    assert str(raised.value).startswith("BackendFactory.backdoor: must have plant, peek and remove methods")


class NotHooks(CorrectBackend):
    hicache_backdoor = object()


@pytest.mark.clause("BE-13")
def test_a_class_attribute_without_the_hooks_skips_naming_it() -> None:
    report = run(NotHooks, checks=BACKDOOR_CHECKS)
    for status, message in outcomes(report).values():
        assert status == "skip" and message.startswith("hicache_backdoor: must have plant, peek and remove"), message
