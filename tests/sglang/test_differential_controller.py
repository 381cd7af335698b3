"""Differential tests of the controller rules: the spec functions against SGLang's controller code.

Scenario: hypothesis draws inputs; the spec function and the release's own
code answer — ``_trailing_chain_groups`` (sidecar v2 groups), the timeout
computed by the real config parser, ``StorageAttachment`` and the
UnifiedRadixCache method that applies it, and the rank agreement of
``prefetch_thread_func`` / ``_sync_prefetch_hit_query`` with a stubbed
all-reduce (element-wise MIN over every rank's vector).
Expected: equal answers on every release that has the rule (others skip,
naming the release). Each comparison also refutes a planted variant of an
old rule, so it cannot pass vacuously.
Examples per function: 200 in the ci profile, 10,000 in the deep one
(``HICACHE_HYPOTHESIS_PROFILE=deep``).
"""

from __future__ import annotations

import importlib
import json
import math
import queue
import threading
from types import SimpleNamespace
from typing import Optional
from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec.prefix import plan_sidecar_groups
from hicache_spec.progress import (
    DEFAULT_PREFETCH_TIMEOUT_BASE,
    DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    LEGACY_PREFETCH_TIMEOUT_BASE,
    LEGACY_PREFETCH_TIMEOUT_MAX,
    LEGACY_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    agree_hit_pages,
    agree_pool_boundaries,
    agree_restorable_hit_pages,
    compute_prefetch_timeout,
    compute_restorable_flags,
)
from hicache_spec.releases import release_key
from tests.sglang.differential_profile import differential, planted_search
from tests.spec.planted_spec import plan_sidecar_groups_operation_prefix

HYBRID = "sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller"


def _module(name: str):
    return importlib.import_module(name)


def _needs(release: str, first: str, what: str) -> None:
    if release_key(release) < release_key(first):
        pytest.skip(f"SGLang {release} has no {what} (it arrives in {first})")


# ------------------------------------------------------------------ sidecar groups (PFX-9)
KEYS = st.integers(0, 2**16).map(lambda n: f"{n:064x}")


@st.composite
def group_inputs(draw):
    """A prefix (None: feature off), a span of distinct keys, and per transfer its trailing key count."""
    span_len = draw(st.integers(0, 12))
    span = tuple("%064x" % (1000 + i) for i in range(span_len))
    prefix = draw(st.none() | st.lists(KEYS, max_size=4).map(tuple))
    counts = tuple(draw(st.lists(st.integers(0, span_len), max_size=6)))
    empty_as_none = draw(st.booleans())  # a transfer with no keys may hold None or []
    return prefix, span, counts, empty_as_none


def _release_groups(storage, prefix, span, counts, empty_as_none):
    """SGLang's grouping, as (prefix or None, transfer indices) per call; checks it never aliases the prefix."""
    hybrid = _module(HYBRID)
    transfers = []
    for count in counts:
        keys = list(span[len(span) - count :]) if count else (None if empty_as_none else [])
        transfers.append(
            storage.PoolTransfer(name=storage.PoolName.SWA, keys=keys, hit_policy=storage.PoolHitPolicy.TRAILING_PAGES)
        )
    given_prefix = None if prefix is None else list(prefix)
    groups = hybrid._trailing_chain_groups(given_prefix, list(span), transfers)
    answer = []
    for extra_info, members in groups:
        assert isinstance(extra_info, storage.HiCacheStorageExtraInfo)
        keys = extra_info.prefix_keys
        assert keys is None or keys is not given_prefix  # PFX-5: a new list per call
        indices = tuple(next(i for i, t in enumerate(transfers) if t is member) for member in members)
        answer.append((None if keys is None else tuple(keys), indices))
    assert given_prefix is None or given_prefix == list(prefix)  # the operation's prefix is left as it was
    return tuple(answer)


@pytest.mark.clause("PFX-9", "HYB-2")
@differential
@given(case=group_inputs())
def test_sidecar_groups_match_the_release(sglang_storage, release, case):
    _needs(release, "0.5.21", "trailing-length grouping of sidecar calls")
    prefix, span, counts, empty_as_none = case
    assert _release_groups(sglang_storage, *case) == plan_sidecar_groups(prefix, span, counts)


@pytest.mark.clause("PFX-9")
def test_sidecar_groups_refute_the_operation_level_prefix(sglang_storage, release):
    """The comparison catches the old PFX-9 rule: every call carrying the operation's prefix."""
    _needs(release, "0.5.21", "trailing-length grouping of sidecar calls")
    planted_search(
        group_inputs(),
        lambda case: _release_groups(sglang_storage, *case) != plan_sidecar_groups_operation_prefix(*case[:3]),
    )


# ------------------------------------------------------------------ prefetch timeout (CTL-10, CTL-14, CTL-16)
SECONDS = st.floats(0, 1e4, allow_nan=False, allow_infinity=False)


@st.composite
def timeout_inputs(draw):
    """Knobs as a user writes them in the extra config, the page size, the pages checked and a sub-page remainder."""
    base, per_ki = draw(SECONDS), draw(SECONDS)
    page_size = draw(st.sampled_from([1, 2, 16, 64, 256]))
    pages = draw(st.integers(0, 2**20))
    remainder = draw(st.integers(0, page_size - 1))
    return base, per_ki, page_size, pages, remainder


def _unified_settings(release: str, base: float, per_ki: float, page_size: int) -> SimpleNamespace:
    """The cache attributes the release derives from the extra config (real parser, real StorageAttachment)."""
    hybrid = _module(HYBRID)
    attachment = _module("sglang.srt.mem_cache.unified_cache.storage_attachment")
    parsed = hybrid.HybridCacheController.parse_storage_backend_extra_config(
        json.dumps({"prefetch_timeout_base": base, "prefetch_timeout_per_ki_token": per_ki})
    )
    cache = SimpleNamespace(page_size=page_size, enable_storage=False)
    attachment.StorageAttachment(cache).apply_runtime_config(
        storage_backend=None,
        prefetch_threshold=parsed[1],
        prefetch_timeout_base=parsed[2],
        prefetch_timeout_per_ki_token=parsed[3],
        hicache_storage_pass_prefix_keys=parsed[4],
        enable_storage=False,
        enable_storage_metrics=False,
        extra_metric_labels=None,
    )
    return cache


def _expires_after(module, check, operation, limit: float) -> bool:
    """Whether ``check(operation)`` holds at ``limit`` seconds after the operation's start (a stubbed clock)."""
    operation.start_time = 0.0
    with mock.patch.object(module, "time", SimpleNamespace(monotonic=lambda: limit)):
        return bool(check(operation))


def _agrees(module, check, operation, expected: float) -> bool:
    """Whether the release's deadline check flips where ``expected`` says (to 1e-9 relative: rounding order differs)."""
    slack = 1e-9 * max(1.0, expected)
    return not _expires_after(module, check, operation, expected - slack) and _expires_after(
        module, check, operation, expected + slack
    )


def _release_timeout_agrees(release: str, case, spec_timeout) -> bool:
    """Run the release's own timeout code for ``case`` and compare with ``spec_timeout(tokens, base, per_ki)``."""
    base, per_ki, page_size, pages, remainder = case
    radix = _module("sglang.srt.mem_cache.unified_radix_cache")
    cache = _unified_settings(release, base, per_ki, page_size)
    if release_key(release) >= (0, 5, 23):
        # CTL-14: the requested span's whole pages, timed from the first blocked admission poll.
        cache.prefetch_stop_policy = "timeout"
        cache._storage_prefetch_wait = {}
        operation = SimpleNamespace(handle="req", stats_requested_tokens=pages * page_size + remainder)
        radix.UnifiedRadixCache._start_storage_prefetch_wait(cache, operation)
        theirs = cache._storage_prefetch_wait["req"].timeout_s
        ours = spec_timeout(pages * page_size, base, per_ki)
        return math.isclose(theirs, ours, rel_tol=1e-9, abs_tol=1e-12)
    # CTL-16: the pages of the operation's key list when checked, timed from the operation's creation.
    operation = SimpleNamespace(hash_value=range(pages))
    check = lambda op: radix.UnifiedRadixCache._prefetch_timeout_check_linear_func(cache, op)  # noqa: E731
    return _agrees(radix, check, operation, spec_timeout(pages * page_size, base, per_ki))


@pytest.mark.clause("CTL-14", "CTL-16")
@differential
@given(case=timeout_inputs())
def test_prefetch_timeout_matches_the_release(release, case):
    assert _release_timeout_agrees(release, case, compute_prefetch_timeout), case


@pytest.mark.clause("CTL-14", "CTL-16")
def test_prefetch_timeout_refutes_the_capped_rule(release):
    """The comparison catches the 0.5.20 HiRadixCache cap (30 s) applied to the unified cache."""

    def capped(tokens, base, per_ki):
        return compute_prefetch_timeout(tokens, base, per_ki, LEGACY_PREFETCH_TIMEOUT_MAX)

    planted_search(timeout_inputs(), lambda case: not _release_timeout_agrees(release, case, capped))


@pytest.mark.clause("CTL-14", "CTL-16")
def test_prefetch_timeout_defaults_match_the_release(release):
    parsed = _module(HYBRID).HybridCacheController.parse_storage_backend_extra_config(None)
    assert (parsed[2], parsed[3]) == (DEFAULT_PREFETCH_TIMEOUT_BASE, DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN)


@pytest.mark.clause("CTL-10")
@differential
@given(case=timeout_inputs(), maximum=SECONDS)
def test_legacy_prefetch_timeout_matches_hiradix_cache(sglang_storage, release, case, maximum):
    if release_key(release) > (0, 5, 20):
        pytest.skip(f"SGLang {release} has no HiRadixCache (removed after 0.5.20)")
    base, per_ki, page_size, pages, _ = case
    hiradix = _module("sglang.srt.mem_cache.hiradix_cache")
    cache = SimpleNamespace(
        page_size=page_size, prefetch_timeout_config=sglang_storage.PrefetchTimeoutConfig(base, per_ki, maximum)
    )
    check = lambda op: hiradix.HiRadixCache._prefetch_timeout_check_linear_func(cache, op)  # noqa: E731
    expected = compute_prefetch_timeout(pages * page_size, base, per_ki, maximum)
    assert _agrees(hiradix, check, SimpleNamespace(hash_value=range(pages)), expected), (case, maximum)


@pytest.mark.clause("CTL-10")
def test_legacy_prefetch_timeout_defaults_match_the_release(sglang_storage, release):
    if release_key(release) > (0, 5, 20):
        pytest.skip(f"SGLang {release} has no PrefetchTimeoutConfig (removed after 0.5.20)")
    config = sglang_storage.PrefetchTimeoutConfig()
    assert (config.base, config.per_ki_token, config.max) == (
        LEGACY_PREFETCH_TIMEOUT_BASE,
        LEGACY_PREFETCH_TIMEOUT_PER_KI_TOKEN,
        LEGACY_PREFETCH_TIMEOUT_MAX,
    )


# ------------------------------------------------------------------ rank agreement (RANK-1, RANK-2, RANK-5, RANK-6)
class StubbedAllReduce:
    """Two rounds over the ranks: the first records each rank's vector, the second hands back their element-wise MIN."""

    def __init__(self) -> None:
        self.vectors: list[torch.Tensor] = []
        self.agreed: Optional[torch.Tensor] = None
        self.calls = 0

    def __call__(self, tensor, op, groups) -> None:
        assert op == torch.distributed.ReduceOp.MIN
        self.calls += 1
        if self.agreed is None:
            self.vectors.append(tensor.clone())
        else:
            tensor.copy_(self.agreed.reshape(tensor.shape))

    def reduce(self) -> None:
        shapes = {tuple(vector.shape) for vector in self.vectors}
        assert len(shapes) == 1, f"ranks packed vectors of different shapes {shapes}: a real collective hangs"
        self.agreed = torch.stack(self.vectors).min(dim=0).values


def _over_ranks(run_rank, ranks: int) -> list:
    """Run ``run_rank(rank, all_reduce)`` on every rank twice (record, then MIN); return the second round's answers."""
    collective = StubbedAllReduce()
    for rank in range(ranks):
        run_rank(rank, collective)
    collective.reduce()
    answers = [run_rank(rank, collective) for rank in range(ranks)]
    assert collective.calls == 2 * ranks, "each rank must all-reduce exactly once per operation (RANK-1)"
    return answers


@st.composite
def scalar_ranks(draw):
    """Per rank: the hit its query found, in pages, and whether its operation was terminated first."""
    page_size = draw(st.sampled_from([1, 4, 64]))
    span = draw(st.integers(0, 12))
    ranks = draw(st.lists(st.tuples(st.integers(0, span), st.booleans()), min_size=1, max_size=4))
    return page_size, span, tuple(ranks)


def _base_controller_hits(case) -> list[tuple[int, list]]:
    """Every rank's agreed hit and cut key list, from HiCacheController.prefetch_thread_func."""
    controller_module = _module("sglang.srt.managers.cache_controller")
    page_size, span, ranks = case
    keys = [f"{i:064x}" for i in range(span)]

    def run_rank(rank, collective):
        hit, terminated = ranks[rank]
        controller = object.__new__(controller_module.HiCacheController)
        controller.page_size = page_size
        controller.prefetch_hits_sync_groups = []
        controller._all_reduce = collective
        controller._storage_hit_query = lambda operation: (keys[:hit], hit * page_size)
        controller.storage_stop_event = threading.Event()
        controller.storage_stop_event.set()  # the loop drains the queue, then ends
        controller.prefetch_queue, controller.prefetch_hit_queue = queue.Queue(), queue.Queue()
        operation = SimpleNamespace(request_id=f"r{rank}", is_terminated=lambda: terminated)
        controller.prefetch_queue.put(operation)
        controller.prefetch_thread_func()
        done = controller.prefetch_hit_queue.get_nowait()
        return int(done.storage_hit_count), list(done.hash_value)

    return _over_ranks(run_rank, len(ranks))


def _spec_scalar_agreement(case, agree=agree_hit_pages) -> tuple[int, list]:
    page_size, span, ranks = case
    agreed = agree(tuple(0 if terminated else hit for hit, terminated in ranks))  # RANK-1: a terminated rank offers 0
    return agreed * page_size, [f"{i:064x}" for i in range(agreed)]  # RANK-2: keys cut to the agreed count


@pytest.mark.clause("RANK-1", "RANK-2")
@differential
@given(case=scalar_ranks())
def test_scalar_rank_agreement_matches_the_release(case):
    ours = _spec_scalar_agreement(case)
    assert all(answer == ours for answer in _base_controller_hits(case)), case


@pytest.mark.clause("RANK-1")
def test_scalar_rank_agreement_refutes_max():
    planted_search(
        scalar_ranks(),
        lambda case: any(answer != _spec_scalar_agreement(case, max) for answer in _base_controller_hits(case)),
    )


@st.composite
def vector_ranks(draw, min_ranks: int = 1, trailing: bool = False):
    """A hybrid hit query on several ranks: pool policies, span, and per rank its hit, restorable set and pool verdicts.

    ``trailing`` forces a TRAILING_PAGES pool; ``min_ranks`` the fewest ranks (to aim a planted search).
    """
    page_size = draw(st.sampled_from([1, 4, 16]))
    # At least one page: CTL-3 declines a shorter span before any query. (On a span of no whole page
    # SGLang 0.5.23 packs the single flag 1 and reads it back as a 1-token hit; no engine reaches it.)
    span = draw(st.integers(1, 10))
    extra_tokens = draw(st.integers(0, page_size - 1))
    policies = tuple(draw(st.lists(st.sampled_from(["all_pages", "trailing_pages"]), max_size=3)))
    policies += ("trailing_pages",) if trailing else ()
    pools = ("swa", "mamba", "indexer")
    ranks = []
    for _ in range(draw(st.integers(min_ranks, 4))):
        hit = draw(st.integers(0, span))
        restorable = draw(st.none() | st.lists(st.integers(-1, span + 1), max_size=span + 2).map(tuple))
        verdicts = tuple((name, draw(st.integers(0, span))) for name in pools if draw(st.booleans()))
        ranks.append((hit, restorable, verdicts))
    return page_size, span, extra_tokens, policies, tuple(ranks)


def _hybrid_agreement(storage, case) -> list[tuple[int, dict]]:
    """Every rank's agreed hit (tokens) and pool verdicts, from HybridCacheController._sync_prefetch_hit_query."""
    hybrid = _module(HYBRID)
    page_size, span, extra_tokens, policies, ranks = case
    transfers = [
        storage.PoolTransfer(name=storage.PoolName.SWA, hit_policy=storage.PoolHitPolicy(policy)) for policy in policies
    ]

    def run_rank(rank, collective):
        hit, restorable, verdicts = ranks[rank]
        controller = object.__new__(hybrid.HybridCacheController)
        controller.page_size = page_size
        controller.prefetch_hits_sync_groups = []
        controller._all_reduce = collective
        result = SimpleNamespace(restorable_prefix_pages=None if restorable is None else list(restorable))
        operation = SimpleNamespace(
            pool_transfers=transfers,
            token_ids=[0] * (span * page_size + extra_tokens),
            pool_storage_result=result,
            query_pool_hit_pages={storage.PoolName(name): pages for name, pages in verdicts},
        )
        agreed = controller._sync_prefetch_hit_query(operation, hit * page_size)
        return int(agreed), {str(name.value): pages for name, pages in operation.query_pool_hit_pages.items()}

    return _over_ranks(run_rank, len(ranks))


def _spec_vector_agreement(
    release, case, agree_flags=agree_restorable_hit_pages, agree_pools=agree_pool_boundaries
) -> tuple[int, dict]:
    page_size, span, _, policies, ranks = case
    if release_key(release) >= (0, 5, 23) and "trailing_pages" in policies:  # RANK-6
        agreed = agree_flags(tuple(compute_restorable_flags(hit, restorable, span) for hit, restorable, _ in ranks))
    else:
        agreed = agree_hit_pages(tuple(hit for hit, _, _ in ranks))
    pools = agree_pools(tuple(verdicts for _, _, verdicts in ranks))  # RANK-5
    return agreed * page_size, dict(pools)


def _min_of_largest_flag(rank_flags) -> int:
    """Planted: MIN over ranks of each rank's largest restorable length (picks a length some rank cannot restore)."""
    return min(max(n for n, flag in enumerate(flags) if flag) for flags in rank_flags)


@pytest.mark.clause("RANK-5", "RANK-6")
@differential
@given(case=vector_ranks())
def test_packed_rank_vector_matches_the_release(sglang_storage, release, case):
    _needs(release, "0.5.22", "packed rank-agreement vector")
    ours = _spec_vector_agreement(release, case)
    assert all(answer == ours for answer in _hybrid_agreement(sglang_storage, case)), case


@pytest.mark.clause("RANK-6")
def test_packed_rank_vector_refutes_min_of_largest_lengths(sglang_storage, release):
    _needs(release, "0.5.23", "per-length restorable flags")
    planted_search(
        vector_ranks(min_ranks=2, trailing=True),
        lambda case: any(
            answer != _spec_vector_agreement(release, case, _min_of_largest_flag)
            for answer in _hybrid_agreement(sglang_storage, case)
        ),
    )


def _pools_any_rank_named(rank_boundaries) -> tuple:
    """Planted: a pool keeps the MIN of the verdicts given, even when some rank gave none."""
    agreed: dict = {}
    for rank in rank_boundaries:
        for name, hits in rank:
            agreed[name] = min(hits, agreed.get(name, hits))
    return tuple(agreed.items())


@pytest.mark.clause("RANK-5")
def test_packed_rank_vector_refutes_verdicts_some_rank_lacks(sglang_storage, release):
    _needs(release, "0.5.22", "packed rank-agreement vector")
    planted_search(
        vector_ranks(min_ranks=2),
        lambda case: any(
            answer != _spec_vector_agreement(release, case, agree_pools=_pools_any_rank_named)
            for answer in _hybrid_agreement(sglang_storage, case)
        ),
    )
