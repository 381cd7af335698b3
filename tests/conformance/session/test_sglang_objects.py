"""With SGLang importable, the backend receives SGLang's own objects.

When the run holds a pinned release (``HICACHE_SGLANG_RELEASE``) its real
module is used; otherwise a stand-in ``sglang.srt.mem_cache.hicache_storage``
(SGLang 0.5.23's dataclasses and str enums, field for field) is put in
``sys.modules`` for the test.

Scenario: the whole smoke suite against the correct in-test backend, which
records the types of what it receives.
Expected: configs, extra infos, transfers and pool names are the stand-in's
classes (mutable lists inside, as SGLang has them), and every clause passes.
Why it matters: a backend written for SGLang must be checked with the
objects SGLang hands it.
"""

from __future__ import annotations

import types
from typing import Any, Iterator, Optional

import pytest

from hicache_contracts.conformance import backend_clauses
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import UNCLAIMED_CLAUSES, run, statuses
from tests.sglang_standin import real_or_stand_in

SEEN: set = set()


@pytest.fixture
def sglang_stand_in() -> Iterator[types.ModuleType]:
    with real_or_stand_in() as module:
        yield module


class TypeRecordingBackend(CorrectBackend):
    """Records the module of every config, extra info and transfer it receives."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None) -> None:
        SEEN.add(type(storage_config))
        super().__init__(storage_config, kwargs)

    def batch_exists(self, keys, extra_info=None):
        if extra_info is not None:
            SEEN.add(type(extra_info))
            SEEN.add(type(extra_info.prefix_keys))
        return super().batch_exists(keys, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        SEEN.update(type(item) for item in transfers)
        SEEN.update(type(item.name) for item in transfers)
        return super().batch_set_v2(transfers, extra_info)


@pytest.mark.clause(*[item.id for item in backend_clauses()])
def test_backend_receives_sglang_objects_and_passes(sglang_stand_in: types.ModuleType) -> None:
    SEEN.clear()
    report = run(TypeRecordingBackend)
    not_passing = {clause_id for clause_id, status in statuses(report).items() if status != "pass"}
    assert not_passing == UNCLAIMED_CLAUSES, report.render_text(color=False)  # format: not declared
    assert report.sections[0].options["sglang_objects"] is True
    for name in ("HiCacheStorageConfig", "HiCacheStorageExtraInfo", "PoolTransfer", "PoolName"):
        assert getattr(sglang_stand_in, name) in SEEN
    assert list in SEEN  # prefix_keys arrive as plain lists, as SGLang hands them over
