"""The levels a backend is held to only when it claims them: ``legacy`` on a v1 backend, and ``robustness``.

Scenario: backends that break only what no pinned SGLang release asks of
them: a v1 backend whose legacy methods raise "deprecated", and a v2
backend that raises on a transfer for a pool never registered (BE-20).
Expected: neither fails while the level is not claimed, and the report says
why the level was not checked; each is caught once it claims the level.
Why it matters: every pinned release's controller registers each pool
before a transfer names it (``hybrid_cache_controller.py``
``attach_storage_backend``, ``register_host_pool_entry``), and moves KV of a
v1 backend through batch_get_v1/batch_set_v1 alone (``cache_controller.py``
picks ``_page_get_zero_copy``); a suite that asks more fails backends for
calls SGLang never makes.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import level_clause_ids
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import ALL_LEVELS, checks_for, run, statuses
from tests.conformance.planted_backends import V2RaisesOnUnregisteredPool

WITHOUT_ROBUSTNESS = tuple(level for level in ALL_LEVELS if level != "robustness")
V1_WITHOUT_LEGACY = tuple(level for level in ALL_LEVELS if level != "legacy")


class DeprecatedLegacyMethods(CorrectBackend):
    """A v1 backend whose legacy page methods raise, as a vendor that dropped them would write it."""

    def _deprecated(self, *args, **kwargs):
        raise RuntimeError("deprecated: use batch_get_v1 / batch_set_v1")

    get = set = exists = batch_get = batch_set = _deprecated

    def batch_exists(self, keys: list, extra_info=None) -> int:  # the hit query SGLang asks of every backend
        for index, key in enumerate(keys):
            if not self.present(self.name(key)):
                return index
        return len(keys)


def reasons(report) -> dict:
    return {verdict.clause_id: verdict.reason for verdict in report.sections[0].clauses}


def level_line(report, name: str):
    return next(level for level in report.sections[0].levels if level.level == name)


@pytest.mark.clause("BE-20")
def test_an_unregistered_pool_is_checked_only_when_robustness_is_claimed() -> None:
    report = run(V2RaisesOnUnregisteredPool, levels=WITHOUT_ROBUSTNESS, checks=checks_for(("BE-20",)))
    assert statuses(report)["BE-20"] == "skip"
    assert reasons(report)["BE-20"] == "level robustness not claimed: not declared"
    assert report.exit_code == 0
    caught = run(V2RaisesOnUnregisteredPool, levels=ALL_LEVELS, checks=checks_for(("BE-20",)))
    assert statuses(caught)["BE-20"] == "fail"
    assert caught.exit_code == 1


@pytest.mark.clause("BE-20")
def test_robustness_is_never_probed() -> None:
    report = run(CorrectBackend, levels=None, checks=checks_for(("BE-20",)))
    line = level_line(report, "robustness")
    assert (line.claimed, line.source) == (False, "probed")
    assert line.reason == "cannot be probed; declare it with --levels or hicache_levels"
    assert statuses(report)["BE-20"] == "skip"


@pytest.mark.clause("BE-9", "BE-13")
def test_a_v1_backend_is_held_to_the_legacy_methods_only_when_it_claims_legacy() -> None:
    legacy = checks_for(level_clause_ids("legacy")) + ("missing_keys_are_misses_not_errors",)
    for levels in (V1_WITHOUT_LEGACY, None):  # declared without legacy, or probed
        report = run(DeprecatedLegacyMethods, levels=levels, checks=legacy)
        assert report.exit_code == 0, report.render_text(color=False)
        line = level_line(report, "legacy")
        assert line.claimed is False
        assert line.reason == (
            "SGLang moves KV through batch_get_v1/batch_set_v1 on a backend that claims v1 and "
            "never calls get, set, exists, batch_get or batch_set; declare legacy to have them "
            "checked"
        )
        assert {statuses(report)[clause_id] for clause_id in level_clause_ids("legacy")} == {"skip"}
        assert statuses(report)["BE-4"] == "pass"
    claimed = run(DeprecatedLegacyMethods, levels=ALL_LEVELS, checks=legacy)
    assert {"BE-9", "BE-4"} <= {clause_id for clause_id, status in statuses(claimed).items() if status == "fail"}


@pytest.mark.clause("BE-9")
def test_a_backend_without_v1_is_held_to_the_legacy_methods() -> None:
    without_v1 = tuple(level for level in ALL_LEVELS if level not in ("v1", "legacy"))
    report = run(CorrectBackend, levels=without_v1, checks=checks_for(("BE-9",)))
    line = level_line(report, "legacy")
    assert (line.claimed, line.source) == (True, "required")
    assert statuses(report)["BE-9"] == "pass"


@pytest.mark.clause("BE-28")
def test_a_second_host_pool_is_refused_or_served_never_swapped() -> None:
    from tests.conformance.planted_backends import RefusesWithoutSaying, ReplacesFirstHostPool

    checks = checks_for(("BE-28",))
    refusing = run(CorrectBackend, checks=checks)  # refuses the second pool, with a message
    assert statuses(refusing)["BE-28"] == "pass", refusing.render_text(color=False)
    swapping = run(ReplacesFirstHostPool, checks=checks)
    verdict = next(item for item in swapping.sections[0].clauses if item.clause_id == "BE-28")
    assert verdict.status == "fail"
    assert "read through the first controller's pool holds" in verdict.failures[0].message
    silent = run(RefusesWithoutSaying, checks=checks)
    assert statuses(silent)["BE-28"] == "fail"
    assert (
        "no message"
        in next(item for item in silent.sections[0].clauses if item.clause_id == "BE-28").failures[0].message
    )
    # Driven through the legacy methods, pages travel as tensors: the same backend serves both pools.
    legacy = tuple(level for level in ALL_LEVELS if level != "v1")
    serving = run(ReplacesFirstHostPool, checks=checks, levels=legacy)
    assert statuses(serving)["BE-28"] == "pass", serving.render_text(color=False)
    unclaimed = run(ReplacesFirstHostPool, checks=checks, levels=WITHOUT_ROBUSTNESS)
    assert statuses(unclaimed)["BE-28"] == "skip" and unclaimed.exit_code == 0
