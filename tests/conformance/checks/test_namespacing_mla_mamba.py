"""Namespacing with MLA and a Mamba state pool: KV is one copy for every TP rank, Mamba state one per rank.

Scenario: two instances of one model with is_mla_model=True, tp_rank 0 and 1 of 2, each registering a Mamba state
pool (page_size 1, as SGLang's MambaPoolHost); rank 0 writes the KV, each rank writes its own state under the same
key; a new instance of each rank reads its state back. Run against a backend that files every pool of an MLA
instance under the namespace its ranks share (Mamba state included), a correct one and the reference backends.
Expected: the first fails NS-1, naming the rank that reads the other's state; the others pass.
Why it matters: SGLang 0.5.23 has every rank write its Mamba state (CTL-8); a store that shares it like MLA KV
restores one rank's state on another, silently.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import SuiteOptions
from hicache_contracts.conformance.session.pools import MAMBA_STATE_ELEMENTS, mamba_state_pool
from hicache_reference.main_job import run_reference_suite
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import run
from tests.conformance.planted_branches import MambaStateSharedUnderMla

CHECK = "ranks_and_models_never_share_pages"


def outcome_of(backend, **options):
    report = run(backend, checks=(CHECK,), **options)
    return next(item for item in report.sections[0].checks if item.check == CHECK)


@pytest.mark.clause("NS-1")
def test_mamba_state_shared_under_mla_fails_ns1() -> None:
    outcome = outcome_of(MambaStateSharedUnderMla)
    assert (outcome.status, outcome.clause_id) == ("fail", "NS-1"), outcome
    assert outcome.message == (
        "with is_mla_model=True, a new instance of tp_rank 0 reads its Mamba state of k13 as tp_rank 1's state: "
        "Mamba state is sharded by TP rank (every rank writes its own, CTL-8), so it stays per rank where MLA KV is "
        "shared (NS-5)"
    )
    assert outcome.counterexample.splitlines()[0] == (
        "is_mla_model=True, tp_size 2: tp_rank 0 (the storage writer) writes the KV of [k12, k13]; tp_rank 0 and "
        "tp_rank 1 each write their own Mamba state of [k13] (batch_set_v2, pool mamba, TRAILING_PAGES); a new "
        "instance of each rank reads its state back"
    )


@pytest.mark.clause("NS-1", "NS-5")
@pytest.mark.parametrize("options", [{}, dict(kind="mla", layout="page_first")], ids=["mha-run", "mla-page-first"])
def test_a_correct_backend_keeps_mamba_state_per_rank(options: dict) -> None:
    assert outcome_of(CorrectBackend, **options).status == "pass"


@pytest.mark.clause("NS-1")
def test_the_case_runs_only_where_v2_is_claimed() -> None:
    levels = ("core", "v1", "namespacing")
    assert outcome_of(MambaStateSharedUnderMla, levels=levels).status == "pass"


@pytest.mark.clause("NS-1", "NS-5")
def test_the_reference_backends_keep_mamba_state_per_rank() -> None:
    report = run_reference_suite(SuiteOptions(profile="smoke", seed=0, checks=(CHECK,)))
    assert [item.status for section in report.sections for item in section.checks] == ["pass", "pass"]


def test_the_mamba_state_pool_has_one_state_per_page() -> None:
    pool = mamba_state_pool(4, layer_num=2, layout="page_first_direct")
    assert (pool.page_size, pool.page_count, pool.layout) == (1, 4, "page_first")
    assert pool.page_element_count == 2 * MAMBA_STATE_ELEMENTS
    assert str(pool.dtype) == "torch.float32"
