"""Every rule of the trace checker has a planted change named by its clause.

Scenario: the clause IDs the trace checker can report (read from its source),
against the clauses of the planted changes of test_checker, test_acks and
test_reference_controller (each asserts its clause is reported).
Expected: every rule has at least one, so switching any single rule off turns
that planted test red; RANK-3 is reported only together with CTL-5 (one
missing ack breaks both), so CTL-5's changes stand for it.
Why it matters: a rule no planted change exercises can stop working unseen.
"""

from __future__ import annotations

import re
from pathlib import Path

import hicache_contracts.engine._checker as checker
from hicache_contracts.engine import check_acks
from tests.engine import test_acks, test_checker, test_reference_controller

PAIRED = {"RANK-3": "CTL-5"}
"""Rules always reported beside another rule, and the rule whose planted changes stand for them."""


CHECKER_MODULES = sorted(Path(checker.__file__).parent.glob("_check*.py"))
"""The trace checker's modules: the entry points and every rule family."""


def reported_rules() -> set[str]:
    return {rule for path in CHECKER_MODULES for rule in re.findall(r'"([A-Z]+-\d+)"', path.read_text())}


def planted_rules() -> set[str]:
    return (
        {clause_id for clause_id, _ in test_checker.PLANTED.values()}
        | {clause_id for clause_id, _, _ in test_acks.PLANTED.values()}
        | {case[3] for case in test_reference_controller.PLANTED}
    )


def test_every_checker_rule_has_a_planted_change() -> None:
    missing = {rule for rule in reported_rules() - planted_rules() if PAIRED.get(rule) not in planted_rules()}
    assert missing == set()


def test_the_rule_families_are_all_read() -> None:
    names = {path.stem for path in CHECKER_MODULES}
    assert {"_checker", "_check_acks", "_check_backup", "_check_hits", "_check_pages", "_check_prefix"} <= names
    assert {"CTL-1", "CTL-7", "CTL-11", "HYB-3", "PFX-8"} <= reported_rules()


def test_a_paired_rule_is_reported_with_its_partner() -> None:
    acks = test_acks.schedule(test_acks.SLICES, test_acks.SLICES)[:1]  # the acks of two slices of three missing
    report = check_acks(
        acks, slice_pages=test_acks.SLICES, loaded_pages=test_acks.SLICES, page_size=test_acks.PAGE_SIZE
    )
    assert {"CTL-5", "RANK-3"} <= set(report.violated)
