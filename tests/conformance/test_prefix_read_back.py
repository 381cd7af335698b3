"""PFX-1's last read, the whole chain from its root, catches a backend whose reads place a page by its batch.

Scenario: a backend names each page after the key before it in the same call (forgetting prefix_keys), and
keeps a plain index that batch_exists answers from; the setup reads each batch back the way it was written.
Expected: PFX-1 fails on the read of the whole chain, the only call that batches the pages differently.
Why it matters: SGLang backs a chain up slice by slice and prefetches it whole; before this read the
check's last assertion could only fail for a backend whose second identical read differs from its first.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.correct_backend import CorrectBackend, tensor_bytes
from tests.conformance.helpers import failed, run


class ChainsPagesWithinOneCall(CorrectBackend):
    """v1 reads and writes name a page after the key before it in the call, ignoring prefix_keys (PFX-1)."""

    def chained(self, keys: list) -> list[str]:
        return [self.name(f"{previous}>{key}") for previous, key in zip([""] + keys[:-1], keys)]

    def batch_set_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list[bool]:
        keys = list(keys)
        results = super().batch_set_v1(keys, host_indices, extra_info)  # the plain index batch_exists reads
        host_pool = self.pools["kv"]
        for index, (name, stored) in enumerate(zip(self.chained(keys), results)):
            if stored:
                self.put(
                    name,
                    tensor_bytes(host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True)),
                )
        return results

    def batch_get_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list[bool]:
        keys = list(keys)
        host_pool = self.pools["kv"]
        results = []
        for index, name in enumerate(self.chained(keys)):
            data = self.fetch(name)
            if data is None:
                results.append(False)
                continue
            host_pool.set_from_flat_data_page(int(host_indices[index * host_pool.page_size]), self.page_tensor(data))
            results.append(True)
        return results


@pytest.mark.clause("PFX-1")
def test_the_read_of_the_whole_chain_is_reached_and_fails() -> None:
    report = run(ChainsPagesWithinOneCall, checks=("prefix_states_none_empty_and_list_all_work",))
    assert failed(report) == ["PFX-1"]
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == "PFX-1")
    assert verdict.failures[0].message == (
        "batch_get_v1 over the chain with HiCacheStorageExtraInfo(prefix_keys=None, extra_info=None) did not read "
        "back every page written"
    )
