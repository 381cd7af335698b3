"""Differential test of the fold against SGLang's simulated backend over a real store.

Scenario: hypothesis draws a store (which KV and sidecar pages exist); the
pages are written through ``SimHiCacheStorage.batch_set_v2`` of the release
(built by ``in_tree_factory("sim")`` as SGLang's factory builds it, with no
simulated delay) and its ``batch_exists_v2`` answers the same query the spec
folds.
Expected: where the registry records the release as diverging (DIV-6, the
minimum of each pool's largest hit), the backend answers exactly as that
recorded rule does on every store and differs from the spec on some store,
so an upstream fix, or a new difference, is noticed; elsewhere it equals
``fold_pool_query``.
Examples: 200 in the ci profile, 10,000 in the deep one.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from hicache_contracts.conformance.running.sglang_in_tree import in_tree_factory
from hicache_contracts.interop import to_sglang
from hicache_contracts.models import HiCacheStorageConfig
from hicache_spec.divergences import divergences_for_release
from hicache_spec.pools import fold_pool_query
from tests.sglang.differential_profile import differential, planted_search
from tests.sglang.test_differential import stores
from tests.spec.planted_spec import fold_pool_query_min_of_maxima

NO_DELAY = {"sim_op_latency_us": 0, "sim_write_gbps": 0, "sim_read_gbps": 0}


def _diverges(release: str) -> bool:
    return any(
        item.clause_id == "BE-21" and item.function == "SimHiCacheStorage.batch_exists_v2"
        for item in divergences_for_release(release)
    )


def _sim_answer(storage, store):
    """Write the store's pages through the simulator's own batch_set_v2, then ask its batch_exists_v2."""
    kv, pools = store
    config = to_sglang(
        HiCacheStorageConfig.single_rank(model_name="diff", extra_config=dict(NO_DELAY)), storage_module=storage
    )
    backend = in_tree_factory("sim", extra_config=NO_DELAY).build(config)
    keys = [f"{index:064x}" for index in range(len(kv))]
    writes = [storage.PoolTransfer(name=storage.PoolName.KV, keys=[k for k, flag in zip(keys, kv) if flag])]
    query = []
    for name, policy, window, present in pools:
        pool = storage.PoolName(name)
        writes.append(storage.PoolTransfer(name=pool, keys=[k for k, flag in zip(keys, present) if flag]))
        query.append(
            storage.PoolTransfer(
                name=pool,
                keys=keys[len(keys) - window :] if policy == "trailing_pages" else keys,
                hit_policy=storage.PoolHitPolicy(policy),
            )
        )
    written = backend.batch_set_v2(writes)
    assert all(all(flags) for flags in written.values())
    result = backend.batch_exists_v2(keys, query)
    entries = tuple((str(getattr(name, "value", name)), hits) for name, hits in result.extra_pool_hit_pages.items())
    restorable = getattr(result, "restorable_prefix_pages", None)
    return result.kv_hit_pages, entries, None if restorable is None else tuple(restorable)


@pytest.mark.clause("BE-21", "HYB-6", "HYB-7")
@differential
@given(store=stores())
def test_fold_matches_the_sim_backend_over_a_real_store(sglang_storage, release, store):
    theirs = _sim_answer(sglang_storage, store)
    if _diverges(release):
        # DIV-6: exactly the recorded rule, and no restorable set.
        assert theirs == fold_pool_query_min_of_maxima(*store)[:2] + (None,), store
    else:
        assert theirs == fold_pool_query(*store), store


@pytest.mark.clause("BE-21")
def test_sim_backend_divergence_is_still_there(sglang_storage, release):
    """On a diverging release some store tells the backend from the spec; else the old rule is refuted."""
    if _diverges(release):
        planted_search(stores(), lambda store: _sim_answer(sglang_storage, store)[:2] != fold_pool_query(*store)[:2])
    else:
        planted_search(
            stores(), lambda store: _sim_answer(sglang_storage, store) != fold_pool_query_min_of_maxima(*store)
        )
