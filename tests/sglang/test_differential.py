"""Differential tests: the spec functions against SGLang's own code for the same rule, on the same inputs.

Scenario: hypothesis draws inputs; the spec function and the release's code
(its hash functions, ``count_pool_hits``, ``HiCacheFile.batch_exists_v2``
over real files in a temporary store) each answer. HiCacheFile's fold is
compared with the spec's and with the tests' plain one (``tests/oracles.py``),
so the oracle is not the spec's echo.
Expected: equal answers, except where the registry records the release as
diverging (``hicache_spec.divergences``): there the release must still
disagree somewhere, so an upstream fix is noticed.
Examples per function: 200 in the ci profile, 10,000 in the deep one
(``HICACHE_HYPOTHESIS_PROFILE=deep``).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hicache_spec.divergences import divergences_for_release
from hicache_spec.keys import compute_key_chain, compute_namespace_seed
from hicache_spec.pools import count_pool_hits, fold_pool_query
from hicache_spec.releases import release_key
from tests.oracles import plain_fold
from tests.spec.planted_spec import fold_pool_query_min_of_maxima

EXAMPLES = 10_000 if os.environ.get("HICACHE_HYPOTHESIS_PROFILE") == "deep" else 200
differential = settings(max_examples=EXAMPLES, deadline=None, derandomize=True)


def _diverges(release: str, clause_id: str, function: str) -> bool:
    return any(item.clause_id == clause_id and item.function == function for item in divergences_for_release(release))


# ------------------------------------------------------------------ keys
@pytest.fixture(scope="module")
def sglang_utils(sglang_storage):
    return importlib.import_module("sglang.srt.mem_cache.utils")


NARROW = st.integers(0, 2**32 - 1)
WIDE = st.integers(0, 2**63 - 1)
HASH = st.none() | st.binary(min_size=32, max_size=32).map(bytes.hex)


@pytest.mark.clause("KEY-1", "KEY-3")
@differential
@given(tokens=st.lists(NARROW, max_size=40), page_size=st.integers(1, 8), prior=HASH)
def test_key_chain_matches_the_release(sglang_utils, tokens, page_size, prior):
    pages = len(tokens) // page_size
    tokens = tokens[: pages * page_size]
    theirs = sglang_utils.get_hash_str(tokens, prior, page_size) if tokens else []
    assert tuple(theirs) == compute_key_chain(tuple(tokens), page_size, prior)


@pytest.mark.clause("KEY-5")
@differential
@given(tokens=st.lists(WIDE, min_size=1, max_size=16), prior=HASH)
def test_wide_tokens_match_the_release(sglang_utils, release, tokens, prior):
    if release_key(release) < (0, 5, 23):
        pytest.skip(f"wide tokens are hashed with 8-byte words from 0.5.23 on (SGLang {release})")
    theirs = sglang_utils.get_hash_str(tokens, prior, len(tokens))
    assert tuple(theirs) == compute_key_chain(tuple(tokens), len(tokens), prior)


TEXT = st.none() | st.text(max_size=12)


@pytest.mark.clause("KEY-4")
@differential
@given(extra_key=TEXT, cache_salt=TEXT)
def test_namespace_seed_matches_the_release(sglang_utils, release, extra_key, cache_salt):
    seed = getattr(sglang_utils, "storage_namespace_seed", None)
    if seed is None:
        pytest.skip(f"SGLang {release} has no namespace seed")
    assert seed(extra_key, cache_salt) == compute_namespace_seed(extra_key, cache_salt)


# ------------------------------------------------------------------ pool hits
RESULTS = st.dictionaries(
    st.sampled_from(["kv", "swa", "mamba", "indexer"]), st.lists(st.booleans(), max_size=12), max_size=4
)


@pytest.mark.clause("HYB-8")
@differential
@given(results=RESULTS)
def test_count_pool_hits_matches_the_release(sglang_storage, results):
    theirs = sglang_storage.count_pool_hits({name: list(flags) for name, flags in results.items()})
    ours = dict(count_pool_hits(tuple((name, tuple(flags)) for name, flags in results.items())))
    assert {str(name): hits for name, hits in theirs.items()} == ours


@st.composite
def stores(draw):
    """A chain, which KV pages exist, and sidecar pools (name, policy, window, which pages exist)."""
    length = draw(st.integers(1, 10))
    kv = tuple(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
    pools = []
    for name in draw(st.lists(st.sampled_from(["swa", "mamba", "indexer"]), unique=True, max_size=3)):
        policy = draw(st.sampled_from(["all_pages", "trailing_pages"]))
        window = draw(st.integers(1, length)) if policy == "trailing_pages" else length
        present = tuple(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
        pools.append((name, policy, window, present))
    return kv, tuple(pools)


def _hicache_file_answer(module, root, kv, pools):
    """Write empty page files where the store says pages exist (by HiCacheFile's own names); query it."""
    from hicache_contracts.interop import to_sglang
    from hicache_contracts.models import HiCacheStorageConfig, PoolTransfer

    config = to_sglang(
        HiCacheStorageConfig.single_rank(model_name="diff", extra_config={"file_storage_path": root}),
        storage_module=module,
    )
    backend = module.HiCacheFile(config, root)  # 0.5.20 and 0.5.21 ignore file_storage_path
    assert backend.file_path == root, f"HiCacheFile stores under {backend.file_path!r}, not the test's {root!r}"
    keys = [f"{index:064x}" for index in range(len(kv))]
    transfers = []
    for index, present in enumerate(kv):
        if present:
            open(os.path.join(root, f"{backend._get_suffixed_key(keys[index])}.bin"), "wb").close()
    for name, policy, window, present in pools:
        transfer = to_sglang(
            PoolTransfer(
                name=name, keys=keys[len(keys) - window :] if policy == "trailing_pages" else keys, hit_policy=policy
            ),
            storage_module=module,
        )
        transfers.append(transfer)
        for index, flag in enumerate(present):
            if flag:
                component = backend._get_component_key(keys[index], transfer.name)
                open(os.path.join(root, f"{component}.bin"), "wb").close()
    result = backend.batch_exists_v2(keys, transfers)
    entries = tuple((str(getattr(name, "value", name)), hits) for name, hits in result.extra_pool_hit_pages.items())
    restorable = getattr(result, "restorable_prefix_pages", None)
    return result.kv_hit_pages, entries, None if restorable is None else tuple(restorable)


def _hicache_file_on(sglang_storage, kv, pools):
    """HiCacheFile's answer for the store (kv, pools), over real files in a temporary directory it then removes."""
    root = tempfile.mkdtemp(prefix="hicache-diff-")
    try:
        return _hicache_file_answer(sglang_storage, root, kv, pools)
    finally:
        shutil.rmtree(root, ignore_errors=True)


ISSUE_39147 = (
    (True,) * 5,
    (
        ("indexer", "all_pages", 5, (True, True, True, True, False)),
        ("swa", "trailing_pages", 2, (True, True, False, True, True)),
    ),
)
"""Where the folds part (SGLang #39147): the minimum of maxima says 4, the intersection of restorable lengths 2."""
FOLDS = {"spec": fold_pool_query, "plain oracle": plain_fold}
"""The spec's fold, and the tests' plain one (``tests/oracles.py``), so the oracle is not the spec's echo."""


@pytest.mark.clause("BE-21", "HYB-6", "HYB-7")
@pytest.mark.parametrize("fold", FOLDS.values(), ids=FOLDS.keys())
def test_fold_matches_hicache_file_over_a_real_store(sglang_storage, release, fold):
    """Each fold against HiCacheFile's batch_exists_v2; 0.5.20-0.5.22 must show their recorded min-of-maxima fold."""
    diverges = _diverges(release, "BE-21", "HiCacheFile.batch_exists_v2")
    disagreements = []

    @differential
    @given(store=stores())
    @example(store=ISSUE_39147)
    def compare(store):
        kv, pools = store
        theirs = _hicache_file_on(sglang_storage, kv, pools)
        ours = fold(kv, pools)
        if diverges:
            # DIV-5: exactly the recorded rule (minimum of maxima, no restorable set), so a new difference fails.
            assert theirs == fold_pool_query_min_of_maxima(kv, pools)[:2] + (None,), store
            if theirs[:2] != ours[:2]:
                disagreements.append((store, theirs, ours))
            return
        assert theirs == ours, store

    compare()
    if diverges:
        assert disagreements, (
            f"SGLang {release} is recorded as folding with the minimum of maxima (BE-21), "
            "but it agreed with this fold on every store: update the divergence registry, or the fold tells nothing apart"
        )
