"""What a backend claims: probed, declared, declared but not honoured; and a run touches only its own namespace.

Scenario: backends that implement fewer generations than the suite knows, or
declare more than they implement, and a store that already holds someone
else's pages.
Expected: unclaimed levels are skipped with the reason; a declared level
whose methods only raise NotImplementedError fails every clause of that
level; the other pages are still there after the run, and nothing of the
run's is.
Why it matters: vendors must see what was not checked and why, and running
the suite against a shared store must never cost anyone their cache.
"""

from __future__ import annotations

import pytest
import torch

from hicache_contracts.capabilities import detect_capabilities
from hicache_contracts.conformance import decide_levels, level_clause_ids
from hicache_contracts.host_pool import HostPagePool
from hicache_contracts.models import HiCacheStorageConfig
from tests.conformance.correct_backend import STORES, CorrectBackend
from hicache_contracts.conformance.session.loading import BackendFactory
from tests.conformance.helpers import UnimplementedV1V2, fresh_store, run, statuses


class LegacyOnly(UnimplementedV1V2, CorrectBackend):
    """Implements the legacy generation only; v1 and v2 raise NotImplementedError, as SGLang's base does."""


class ClaimsV1WithoutIt(LegacyOnly):
    """Declares v1 but its v1 methods only raise NotImplementedError."""

    hicache_levels = ("core", "v1")


def level_reasons(report) -> dict:
    return {level.level: (level.claimed, level.source, level.reason) for level in report.sections[0].levels}


@pytest.mark.clause("BE-18")
def test_probed_backend_skips_the_generations_it_lacks_with_the_reason() -> None:
    report = run(LegacyOnly, levels=None)
    levels = level_reasons(report)
    assert levels["core"] == (True, "required", None)
    assert levels["v1"] == (
        False,
        "probed",
        "batch_get_v1 only raises NotImplementedError (defined in "
        "tests.conformance.helpers.UnimplementedV1V2); batch_set_v1 only raises "
        "NotImplementedError (defined in tests.conformance.helpers.UnimplementedV1V2)",
    )
    assert levels["durability"] == (False, "probed", "cannot be probed; declare it with --levels or hicache_levels")
    assert levels["v2"][0] is False and levels["v2"][2].endswith(
        "(SGLang asks batch_exists_v2 of any backend serving a model with sidecar pools (SWA, Mamba, indexer), "
        "whatever the backend claims: without v2 it serves models without them only)"
    )
    result = statuses(report)
    assert {result[clause_id] for clause_id in level_clause_ids("v1")} == {"skip"}
    assert {result[clause_id] for clause_id in level_clause_ids("core")} <= {"pass", "skip"}
    assert result["BE-5"] == "pass"  # the backend's own fault hook fails its store on the legacy path too
    assert report.exit_code == 0


@pytest.mark.clause("BE-14", "BE-18")
def test_declared_but_not_honoured_level_fails_every_clause_of_it() -> None:
    report = run(ClaimsV1WithoutIt, levels=None)
    verdicts = {verdict.clause_id: verdict for verdict in report.sections[0].clauses}
    for clause_id in level_clause_ids("v1"):
        assert verdicts[clause_id].status == "fail"
        assert (
            verdicts[clause_id]
            .failures[0]
            .message.startswith("level v1 declared but not honoured: batch_get_v1 only raises NotImplementedError")
        )
    assert statuses(report)["NS-1"] == "skip"  # namespacing is not declared
    assert report.exit_code == 1


@pytest.mark.clause("BE-18")
def test_decide_levels_claims_namespacing_and_concurrency_without_a_declaration() -> None:
    backend = CorrectBackend(HiCacheStorageConfig.single_rank("decide", extra_config={"store": fresh_store()}))
    decision = decide_levels(detect_capabilities(backend), None)
    assert decision.claimed == {"core", "v1", "v2", "prefix", "namespacing", "concurrency"}
    declared = decide_levels(detect_capabilities(backend), ("core", "durability"))
    assert declared.claimed == {"core", "legacy", "durability"}  # without v1, SGLang moves KV through batch_get/set
    assert [verdict.source for verdict in declared.verdicts] == ["required", "required"] + ["declared"] * 8


@pytest.mark.clause("BE-9", "BE-14")
def test_a_level_the_engine_never_drives_is_not_claimed_and_v1_unasked_requires_legacy() -> None:
    backend = CorrectBackend(HiCacheStorageConfig.single_rank("unasked", extra_config={"store": fresh_store()}))
    why = "not asked: driven through batch_get/batch_set"
    decision = decide_levels(detect_capabilities(backend), None, {"v1": why})
    assert decision.claimed == {"core", "legacy", "v2", "prefix", "namespacing", "concurrency"}
    (v1,) = [verdict for verdict in decision.verdicts if verdict.level == "v1"]
    assert (v1.claimed, v1.reason) == (False, why)
    declared = decide_levels(detect_capabilities(backend), ("core", "v1"), {"v1": why})
    assert declared.claimed == {"core", "v1"}  # a declaration wins over what the factory says is not asked


def test_a_factory_refuses_not_asked_that_is_not_a_mapping_of_reasons() -> None:
    with pytest.raises(ValueError, match=r"^BackendFactory.not_asked: must map level names to reasons"):
        BackendFactory(CorrectBackend, not_asked={"v1": 1})  # type: ignore[dict-item]


@pytest.mark.clause("NS-8", "BE-11")
def test_a_run_leaves_someone_elses_pages_and_removes_its_own() -> None:
    store = fresh_store()
    pool = HostPagePool(page_count=4, page_size=64, layer_num=2, head_num=2, head_dim=8)
    pool.kv_buffer.normal_()
    owner = CorrectBackend(HiCacheStorageConfig.single_rank("production-model", extra_config={"store": store}))
    owner.register_mem_pool_host(pool)
    keys = [f"{index:064x}" for index in range(3)]
    assert owner.batch_set_v1(keys, torch.arange(3 * 64)) == [True, True, True]
    before = dict(STORES[store])

    report = run(CorrectBackend, store=store)

    assert report.exit_code == 0
    assert owner.batch_exists(keys) == 3
    assert STORES[store] == before  # theirs untouched, ours all gone


class NeedsAnEndpoint(CorrectBackend):
    """Reads its endpoint from the second constructor argument, which SGLang passes empty."""

    def __init__(self, storage_config, kwargs=None):
        if "endpoint" not in (kwargs or {}):
            raise ValueError("endpoint: required")
        super().__init__(storage_config, kwargs)


@pytest.mark.clause("BE-1")
def test_a_backend_that_cannot_be_built_fails_be1_and_every_check() -> None:
    report = run(NeedsAnEndpoint, extra={"endpoint": "10.0.0.5:7000"})
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == "BE-1")
    assert verdict.status == "fail"
    assert verdict.failures[0].message == ("building the backend raised ValueError: endpoint: required")
    first, *others = report.sections[0].checks  # one cause, one failure: told once, the other checks not run
    assert first.status == "fail"
    assert {(outcome.status, outcome.message) for outcome in others} == {
        ("skip", "not run: the backend could not be built (see BE-1)")
    }
    assert report.exit_code == 1
