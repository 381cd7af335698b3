"""The contract models are field-equal to the release's dataclasses and enums.

Scenario: describe the project's models and the release's
``HiCacheStorageConfig``, ``HiCacheStorageExtraInfo``, ``PoolTransfer``,
``PoolTransferResult``, ``PoolName`` and ``PoolHitPolicy`` (names, order,
defaults, enum values) and compare them.
Expected: no difference but the supported ones (an older release lacks
fields and members) and the listed known ones; a planted drift (a renamed
field, a missing member, a changed default, a reordered field) is caught.
"""

from __future__ import annotations

import copy
import itertools

import pytest

from hicache_contracts.sglang_compat import compare, describe_models, describe_release

MODEL_CLAUSES = ("BE-1", "BE-8", "BE-19", "BE-21", "BE-25")


@pytest.mark.clause(*MODEL_CLAUSES)
def test_models_match_the_release(sglang_storage, release):
    problems = compare(describe_models(), describe_release(sglang_storage), release)
    assert problems == [], "\n".join(problems)


def _renamed(description, cls, old, new):
    planted = copy.deepcopy(description)
    planted["classes"][cls] = [[new if field == old else field, default] for field, default in planted["classes"][cls]]
    return planted


@pytest.mark.clause(*MODEL_CLAUSES)
def test_a_planted_drift_is_caught(sglang_storage, release):
    """Planted drifts of the project's models, each against the real release: every one is reported."""
    ours, theirs = describe_models(), describe_release(sglang_storage)
    renamed = _renamed(ours, "HiCacheStorageConfig", "attn_cp_rank", "cp_rank")
    assert any("attn_cp_rank" in problem for problem in compare(renamed, theirs, release))

    last_member = theirs["enums"]["PoolName"][-1][0]
    missing = copy.deepcopy(ours)
    missing["enums"]["PoolName"] = [pair for pair in missing["enums"]["PoolName"] if pair[0] != last_member]
    assert any(last_member in problem for problem in compare(missing, theirs, release))

    defaulted = copy.deepcopy(ours)
    defaulted["classes"]["PoolTransfer"] = [
        [field, "'trailing_pages'" if field == "hit_policy" else default]
        for field, default in defaulted["classes"]["PoolTransfer"]
    ]
    assert any("hit_policy" in problem for problem in compare(defaulted, theirs, release))

    reordered = copy.deepcopy(ours)
    fields = reordered["classes"]["HiCacheStorageConfig"]
    fields[0], fields[1] = fields[1], fields[0]
    assert any("order" in problem for problem in compare(reordered, theirs, release))

    value = copy.deepcopy(ours)
    value["enums"]["PoolHitPolicy"] = [
        [name, "ALL" if name == "ALL_PAGES" else text] for name, text in value["enums"]["PoolHitPolicy"]
    ]
    assert any("ALL_PAGES" in problem for problem in compare(value, theirs, release))


@pytest.mark.clause("BE-25")
def test_dcp_validation_agrees_with_the_release(sglang_storage, release):
    """Where the release has DCP fields (0.5.23), the model refuses exactly what its __post_init__ refuses."""
    from hicache_contracts.errors import ContractViolation
    from hicache_contracts.models import HiCacheStorageConfig

    cls = sglang_storage.HiCacheStorageConfig
    if "dcp_size" not in cls.__dataclass_fields__:
        pytest.skip(f"SGLang {release} has no DCP fields")
    base = HiCacheStorageConfig.single_rank(model_name="m").model_dump(include=set(cls.__dataclass_fields__))
    varied = ("tp_size", "tp_rank", "dcp_size", "dcp_rank", "is_mla_model", "logical_page_size")
    cases = [
        dict(base, **dict(zip(varied, values)))
        for tp_size, dcp_size in itertools.product((1, 2, 3, 4), (1, 2, 4))
        for values in itertools.product(
            (tp_size,), range(tp_size), (dcp_size,), range(dcp_size), (False, True), (None, 0, 2, 3, 64)
        )
    ]
    for case in cases:
        try:
            theirs = cls(**case)
        except ValueError:
            theirs = None
        try:
            ours = HiCacheStorageConfig(**case)
        except ContractViolation:
            ours = None
        assert (ours is None) == (theirs is None), case
        if ours is not None:
            assert ours.is_storage_writer == theirs.is_storage_writer, case
