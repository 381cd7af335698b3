"""The tests' plain fold (``tests/oracles.py``) against SGLang's own HiCacheFile, so the oracle is not the spec's echo.

Scenario: hypothesis draws stores (KV pages and sidecar pools of each gating
policy) as in ``test_differential.py``; HiCacheFile answers over real files.
Expected: where the release folds as 0.5.23 does (no recorded BE-21
divergence), the plain fold gives HiCacheFile's hit, entries and restorable
set; where it is recorded as folding with the minimum of maxima, the plain
fold disagrees with it somewhere (the oracle tells the two apart).
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import example, given

from tests.oracles import plain_fold
from tests.sglang.test_differential import _diverges, _hicache_file_answer, differential, stores


ISSUE_39147 = (
    (True,) * 5,
    (
        ("indexer", "all_pages", 5, (True, True, True, True, False)),
        ("swa", "trailing_pages", 2, (True, True, False, True, True)),
    ),
)
"""Where the folds part (SGLang #39147): the minimum of maxima says 4, the intersection of restorable lengths 2."""


@pytest.mark.clause("BE-21", "HYB-6", "HYB-7")
def test_plain_fold_matches_hicache_file(sglang_storage, release):
    diverges = _diverges(release, "BE-21", "HiCacheFile.batch_exists_v2")
    disagreements = []

    @differential
    @given(store=stores())
    @example(store=ISSUE_39147)
    def compare(store):
        kv, pools = store
        root = tempfile.mkdtemp(prefix="hicache-oracle-")
        try:
            theirs = _hicache_file_answer(sglang_storage, root, kv, pools)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        ours = plain_fold(kv, pools)
        if diverges:
            if theirs[:2] != ours[:2]:
                disagreements.append(store)
            return
        assert theirs == ours, store

    compare()
    assert not diverges or disagreements, f"the plain fold cannot tell SGLang {release}'s recorded fold apart"
