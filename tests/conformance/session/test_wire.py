"""The v2 transfers the suite hands a backend have the shapes SGLang 0.5.20-0.5.23 send.

Scenario: the whole suite runs against a correct backend that records every transfer it receives.
Expected: a pool keeps one hit policy on every call (swa, the trailing pool, TRAILING_PAGES; the others
ALL_PAGES, unless a check asks otherwise); writes and queries of a KV-derived pool mark it
(``indices_from_pool`` KV), and its reads do not, as SGLang reads it with each KV slice
(``CacheController._page_transfer_kv_batch`` builds those transfers from name, slots and keys alone).
Why it matters: a backend may file pages by policy or key reads on the mark; a suite sending shapes SGLang
never sends fails such a backend where SGLang serves it, or passes one SGLang breaks.
"""

from __future__ import annotations

from hicache_contracts.conformance.session.wire import POOL_POLICIES, Wire
from hicache_contracts.models import PoolHitPolicy, PoolName
from tests.conformance.correct_backend import CorrectBackend, pool_name
from tests.conformance.helpers import run


class RecordsItsTransfers(CorrectBackend):
    """Correct; records (method, pool, policy, marked KV-derived) of every v2 transfer."""

    seen: list = []

    def record(self, method: str, transfers) -> None:
        for item in transfers or ():
            marked = getattr(item, "indices_from_pool", None) is not None
            self.seen.append((method, pool_name(item.name), pool_name(item.hit_policy), marked))

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        self.record("batch_exists_v2", pool_transfers)
        return super().batch_exists_v2(keys, pool_transfers, extra_info)

    def batch_get_v2(self, transfers, extra_info=None):
        self.record("batch_get_v2", transfers)
        return super().batch_get_v2(transfers, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        self.record("batch_set_v2", transfers)
        return super().batch_set_v2(transfers, extra_info)


def test_every_transfer_of_a_run_has_a_shape_sglang_sends() -> None:
    RecordsItsTransfers.seen = []
    run(RecordsItsTransfers)
    seen = RecordsItsTransfers.seen
    assert {method for method, *_ in seen} == {"batch_exists_v2", "batch_get_v2", "batch_set_v2"}
    swa_policies = {policy for _, pool, policy, _ in seen if pool == "swa"}
    assert swa_policies == {"trailing_pages"}, swa_policies
    indexer = {(method, marked) for method, pool, _, marked in seen if pool == "indexer"}
    assert ("batch_get_v2", True) not in indexer, "a KV-derived read marked KV-derived, which SGLang never sends"
    assert {("batch_get_v2", False), ("batch_set_v2", True), ("batch_exists_v2", True)} <= indexer, indexer


def test_a_pools_own_policy_is_the_default_and_a_read_drops_the_mark() -> None:
    wire = Wire(None)
    assert POOL_POLICIES == {PoolName.SWA: PoolHitPolicy.TRAILING_PAGES}
    assert wire.transfer(PoolName.SWA, ["k"]).hit_policy is PoolHitPolicy.TRAILING_PAGES
    assert wire.transfer(PoolName.SWA, ["k"], policy=PoolHitPolicy.ALL_PAGES).hit_policy is PoolHitPolicy.ALL_PAGES
    assert wire.transfer(PoolName.INDEXER, ["k"]).hit_policy is PoolHitPolicy.ALL_PAGES
    assert wire.transfer(PoolName.INDEXER, ["k"], derived=True).indices_from_pool is PoolName.KV
    assert wire.transfer(PoolName.INDEXER, ["k"], derived=True, read=True).indices_from_pool is None
