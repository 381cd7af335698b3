"""The bad-input matrix: malformed input across the backend API, the suite options, the trace format and the CLI.

Every row asserts the whole message (``Class.field: rule (got value)
[CLAUSE]`` for the API and the trace, ``hicache-conform run: ...`` on stderr
with exit 2 for the CLI) and that nothing was written: no page read or
written (the backend's counters and its files are unchanged), no file made
in the working folder, no report printed. Over 450 lines: one table per surface, kept together so the
matrix reads as one.
"""

from __future__ import annotations

import os
from typing import Any, Union

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_reference.backends import FileBackend, MemoryBackend
from tests.reliability.badinput_rows import KEY, PAGE_SIZE, Scene, make_pool

SECOND_KEY = "cd" * 32


def scene_for(kind: str, folder: str) -> Scene:
    """A backend of ``kind`` (memory or file) holding KEY and SECOND_KEY, with metrics on."""
    config = HiCacheStorageConfig.single_rank(model_name="matrix", enable_storage_metrics=True)
    backend: Union[MemoryBackend, FileBackend]
    if kind == "memory":
        backend = MemoryBackend(config, {"store": f"matrix-{os.path.basename(folder)}"})
    else:
        backend = FileBackend(config, {"path": os.path.join(folder, "store")})
    backend.register_mem_pool_host(make_pool())
    assert backend.batch_set_v1([KEY, SECOND_KEY], torch.arange(2 * PAGE_SIZE)) == [True, True]
    return Scene(backend, folder)


def snapshot(folder: str) -> dict[str, int]:
    found = {}
    for directory, directories, files in os.walk(folder):
        for name in directories + files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, folder)] = os.path.getsize(path) if os.path.isfile(path) else -1
    return found


BACKEND_MESSAGES: dict[str, str] = {
    "batch_exists keys a str": "{backend}.keys: must be a list, tuple or key sequence of str (got 'abc') [KEY-2]",
    "batch_get_v1 keys a str": "{backend}.keys: must be a list, tuple or key sequence of str (got 'abc') [KEY-2]",
    "batch_set_v1 keys a str": "{backend}.keys: must be a list, tuple or key sequence of str (got 'abc') [KEY-2]",
    "batch_exists keys None": "{backend}.keys: must be a list, tuple or key sequence of str (got None) [KEY-2]",
    "batch_get_v1 keys None": "{backend}.keys: must be a list, tuple or key sequence of str (got None) [KEY-2]",
    "batch_set_v1 keys None": "{backend}.keys: must be a list, tuple or key sequence of str (got None) [KEY-2]",
    "batch_exists keys an int": "{backend}.keys: must be a list, tuple or key sequence of str (got 5) [KEY-2]",
    "batch_get_v1 keys an int": "{backend}.keys: must be a list, tuple or key sequence of str (got 5) [KEY-2]",
    "batch_set_v1 keys an int": "{backend}.keys: must be a list, tuple or key sequence of str (got 5) [KEY-2]",
    "batch_exists keys ints": "{backend}.keys[0]: page key must be a non-empty str (got 1) [KEY-2]",
    "batch_get_v1 keys ints": "{backend}.keys[0]: page key must be a non-empty str (got 1) [KEY-2]",
    "batch_set_v1 keys ints": "{backend}.keys[0]: page key must be a non-empty str (got 1) [KEY-2]",
    "batch_exists keys an empty key": "{backend}.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    "batch_get_v1 keys an empty key": "{backend}.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    "batch_set_v1 keys an empty key": "{backend}.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    "batch_exists keys None inside": "{backend}.keys[1]: page key must be a non-empty str (got None) [KEY-2]",
    "batch_get_v1 keys None inside": "{backend}.keys[1]: page key must be a non-empty str (got None) [KEY-2]",
    "batch_set_v1 keys None inside": "{backend}.keys[1]: page key must be a non-empty str (got None) [KEY-2]",
    "batch_exists keys bytes inside": "{backend}.keys[0]: page key must be a non-empty str (got b'k') [KEY-2]",
    "batch_get_v1 keys bytes inside": "{backend}.keys[0]: page key must be a non-empty str (got b'k') [KEY-2]",
    "batch_set_v1 keys bytes inside": "{backend}.keys[0]: page key must be a non-empty str (got b'k') [KEY-2]",
    "batch_exists keys a dict": "{backend}.keys: must be a list, tuple or key sequence of str (got {'abababababababababababababababababababababababababababababababab': 1}) [KEY-2]",
    "batch_get_v1 keys a dict": "{backend}.keys: must be a list, tuple or key sequence of str (got {'abababababababababababababababababababababababababababababababab': 1}) [KEY-2]",
    "batch_set_v1 keys a dict": "{backend}.keys: must be a list, tuple or key sequence of str (got {'abababababababababababababababababababababababababababababababab': 1}) [KEY-2]",
    "exists key int": "{backend}.keys[0]: page key must be a non-empty str (got 5) [KEY-2]",
    "get key int": "{backend}.keys[0]: page key must be a non-empty str (got 5) [KEY-2]",
    "set key int": "{backend}.keys[0]: page key must be a non-empty str (got 5) [KEY-2]",
    "exists key None": "{backend}.keys[0]: page key must be a non-empty str (got None) [KEY-2]",
    "get key None": "{backend}.keys[0]: page key must be a non-empty str (got None) [KEY-2]",
    "set key None": "{backend}.keys[0]: page key must be a non-empty str (got None) [KEY-2]",
    "exists key empty": "{backend}.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    "get key empty": "{backend}.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    "set key empty": "{backend}.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    "batch_get_v1 host_indices a list": "{backend}.host_indices: must be a 1-D integer torch.Tensor (got [0, 1, 2, 3]) [BE-15]",
    "batch_set_v1 host_indices a list": "{backend}.host_indices: must be a 1-D integer torch.Tensor (got [0, 1, 2, 3]) [BE-15]",
    "batch_get_v1 host_indices floats": "{backend}.host_indices: must be a 1-D integer torch.Tensor, not torch.float32 (got Tensor(shape=(4,), dtype=torch.float32)) [BE-15]",
    "batch_set_v1 host_indices floats": "{backend}.host_indices: must be a 1-D integer torch.Tensor, not torch.float32 (got Tensor(shape=(4,), dtype=torch.float32)) [BE-15]",
    "batch_get_v1 host_indices 2-D": "{backend}.host_indices: must be a 1-D integer torch.Tensor, not 2-D (got Tensor(shape=(2, 2), dtype=torch.int64)) [BE-15]",
    "batch_set_v1 host_indices 2-D": "{backend}.host_indices: must be a 1-D integer torch.Tensor, not 2-D (got Tensor(shape=(2, 2), dtype=torch.int64)) [BE-15]",
    "batch_get_v1 host_indices too few": "{backend}.host_indices: must hold key_count * page_size = 1 * 4 = 4 slots (got Tensor(shape=(3,), dtype=torch.int64)) [BE-15]",
    "batch_set_v1 host_indices too few": "{backend}.host_indices: must hold key_count * page_size = 1 * 4 = 4 slots (got Tensor(shape=(3,), dtype=torch.int64)) [BE-15]",
    "batch_get_v1 host_indices misaligned": "{backend}.host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got 1) [BE-15]",
    "batch_set_v1 host_indices misaligned": "{backend}.host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got 1) [BE-15]",
    "batch_get_v1 host_indices not consecutive": "{backend}.host_indices[0:4]: page 0's slots must be consecutive (got [0, 2, 1, 3]) [BE-15]",
    "batch_set_v1 host_indices not consecutive": "{backend}.host_indices[0:4]: page 0's slots must be consecutive (got [0, 2, 1, 3]) [BE-15]",
    "batch_get_v1 host_indices negative": "{backend}.host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got -4) [BE-15]",
    "batch_set_v1 host_indices negative": "{backend}.host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got -4) [BE-15]",
    "batch_get_v1 host_indices beyond the pool": "{backend}.host_indices: must address slots in [0, 32) of the host pool (got 4099) [BE-15]",
    "batch_set_v1 host_indices beyond the pool": "{backend}.host_indices: must address slots in [0, 32) of the host pool (got 4099) [BE-15]",
    "batch_get_v1 host_indices on the meta device": "{backend}.host_indices: must be a tensor on the CPU (or a CUDA device), whose slots can be read (got 'tensor on meta') [BE-15]",
    "batch_set_v1 host_indices on the meta device": "{backend}.host_indices: must be a tensor on the CPU (or a CUDA device), whose slots can be read (got 'tensor on meta') [BE-15]",
    "batch_get_v1 host_indices bools": "{backend}.host_indices: must be a 1-D integer torch.Tensor, not torch.bool (got Tensor(shape=(4,), dtype=torch.bool)) [BE-15]",
    "batch_set_v1 host_indices bools": "{backend}.host_indices: must be a 1-D integer torch.Tensor, not torch.bool (got Tensor(shape=(4,), dtype=torch.bool)) [BE-15]",
    "batch_get_v1 host_indices None": "{backend}.host_indices: must be a 1-D integer torch.Tensor (got None) [BE-15]",
    "batch_set_v1 host_indices None": "{backend}.host_indices: must be a 1-D integer torch.Tensor (got None) [BE-15]",
    "batch_get_v2 transfers a plain dict": "{backend}.transfers[0]: must be a PoolTransfer (an object with name and keys), not a dict (got {'name': 'kv', 'keys': ['abababababababababababababababababababababababababababababababab']}) [BE-19]",
    "batch_set_v2 transfers a plain dict": "{backend}.transfers[0]: must be a PoolTransfer (an object with name and keys), not a dict (got {'name': 'kv', 'keys': ['abababababababababababababababababababababababababababababababab']}) [BE-19]",
    "batch_exists_v2 pool_transfers a plain dict": "{backend}.pool_transfers[0]: must be a PoolTransfer (an object with name and keys), not a dict (got {'name': 'kv', 'keys': ['abababababababababababababababababababababababababababababababab']}) [BE-19]",
    "batch_get_v2 transfers None inside": "{backend}.transfers[0]: must be a PoolTransfer (an object with name and keys), not a NoneType (got None) [BE-19]",
    "batch_set_v2 transfers None inside": "{backend}.transfers[0]: must be a PoolTransfer (an object with name and keys), not a NoneType (got None) [BE-19]",
    "batch_exists_v2 pool_transfers None inside": "{backend}.pool_transfers[0]: must be a PoolTransfer (an object with name and keys), not a NoneType (got None) [BE-19]",
    "batch_get_v2 transfers a str": "{backend}.transfers: must be a list of PoolTransfer (got 'kv') [BE-19]",
    "batch_set_v2 transfers a str": "{backend}.transfers: must be a list of PoolTransfer (got 'kv') [BE-19]",
    "batch_exists_v2 pool_transfers a str": "{backend}.pool_transfers: must be a list of PoolTransfer (got 'kv') [BE-19]",
    "batch_get_v2 transfers an int inside": "{backend}.transfers[0]: must be a PoolTransfer (an object with name and keys), not a int (got 3) [BE-19]",
    "batch_set_v2 transfers an int inside": "{backend}.transfers[0]: must be a PoolTransfer (an object with name and keys), not a int (got 3) [BE-19]",
    "batch_exists_v2 pool_transfers an int inside": "{backend}.pool_transfers[0]: must be a PoolTransfer (an object with name and keys), not a int (got 3) [BE-19]",
    "batch_get_v2 transfers one dict": "{backend}.transfers: must be a list of PoolTransfer (got {'name': 'kv'}) [BE-19]",
    "batch_set_v2 transfers one dict": "{backend}.transfers: must be a list of PoolTransfer (got {'name': 'kv'}) [BE-19]",
    "batch_exists_v2 pool_transfers one dict": "{backend}.pool_transfers: must be a list of PoolTransfer (got {'name': 'kv'}) [BE-19]",
    "batch_get_v2 transfers a transfer then a dict": "{backend}.transfers[1]: must be a PoolTransfer (an object with name and keys), not a dict (got {'name': 'swa'}) [BE-19]",
    "batch_set_v2 transfers a transfer then a dict": "{backend}.transfers[1]: must be a PoolTransfer (an object with name and keys), not a dict (got {'name': 'swa'}) [BE-19]",
    "batch_exists_v2 pool_transfers a transfer then a dict": "{backend}.pool_transfers[1]: must be a PoolTransfer (an object with name and keys), not a dict (got {'name': 'swa'}) [BE-19]",
    "batch_get_v2 slots short": "{backend}.host_indices: must hold key_count * page_size = 1 * 4 = 4 slots (got Tensor(shape=(3,), dtype=torch.int64)) [BE-15]",
    "batch_set_v2 slots misaligned": "{backend}.host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got 1) [BE-15]",
    "batch_get_v2 slots beyond the pool": "{backend}.host_indices: must address slots in [0, 32) of the host pool (got 4099) [BE-15]",
    "register a bogus pool name": "{backend}.register_mem_host_pool_v2.host_pool_name: must be a PoolName or its value, such as 'kv' or 'indexer' (got 'bogus') [BE-24]",
    "register pool name None": "{backend}.register_mem_host_pool_v2.host_pool_name: must be a PoolName or its value, such as 'kv' or 'indexer' (got None) [BE-24]",
    "register pool name 0": "{backend}.register_mem_host_pool_v2.host_pool_name: must be a PoolName or its value, such as 'kv' or 'indexer' (got 0) [BE-24]",
    "register pool name in capitals": "{backend}.register_mem_host_pool_v2.host_pool_name: must be a PoolName or its value, such as 'kv' or 'indexer' (got 'KV') [BE-24]",
    "register a second KV pool": "{backend}.register_mem_pool_host: pool 'kv' already has another host pool; one instance serves one host pool per name (build one instance per controller) (got 'HostPagePool') [BE-28]",
    "register a second KV pool through v2": "{backend}.register_mem_host_pool_v2: pool 'kv' already has another host pool; one instance serves one host pool per name (build one instance per controller) (got 'HostPagePool') [BE-28]",
    "register something that is no pool": "{backend}.host_pool: must provide get_data_page() (got 'object') [BE-24]",
    "batch_get targets of the wrong length": "{backend}.target_locations: must hold one entry per key (got 2) [BE-9]",
    "batch_set values of the wrong length": "{backend}.values: must hold one value per key (got 2) [BE-9]",
}
"""Per backend row, its whole message; ``{backend}`` is the backend class."""

OPTION_MESSAGES: dict[str, str] = {
    "SuiteOptions(page_size=0)": "SuiteOptions.page_size: must be an int >= 1 (got 0)",
    "SuiteOptions(page_size=-1)": "SuiteOptions.page_size: must be an int >= 1 (got -1)",
    "SuiteOptions(page_size=True)": "SuiteOptions.page_size: must be an int >= 1 (got True)",
    "SuiteOptions(page_size=4097)": "SuiteOptions.page_size: must be at most 4096 (the suite's pools would not fit in memory) (got 4097)",
    "SuiteOptions(page_size=1000000000)": "SuiteOptions.page_size: must be at most 4096 (the suite's pools would not fit in memory) (got 1000000000)",
    "SuiteOptions(page_size='64')": "SuiteOptions.page_size: must be an int >= 1 (got '64')",
    "SuiteOptions(page_size=64.0)": "SuiteOptions.page_size: must be an int >= 1 (got 64.0)",
    "SuiteOptions(timeout_s=nan)": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got nan)",
    "SuiteOptions(timeout_s=inf)": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got inf)",
    "SuiteOptions(timeout_s=-1.0)": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got -1.0)",
    "SuiteOptions(timeout_s=0)": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got 0)",
    "SuiteOptions(timeout_s=True)": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got True)",
    "SuiteOptions(timeout_s='5')": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got '5')",
    "SuiteOptions(timeout_s=86401)": "SuiteOptions.timeout_s: must be a finite number of seconds > 0 and <= 86400 (got 86401)",
    "SuiteOptions(model_name='')": "SuiteOptions.model_name: must be a non-empty str (got '')",
    "SuiteOptions(model_name='mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm')": "SuiteOptions.model_name: must be at most 100 printable characters, 101 given (got 'mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm...')",
    "SuiteOptions(model_name='mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm')": "SuiteOptions.model_name: must be at most 100 printable characters, 10000 given (got 'mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm...')",
    "SuiteOptions(model_name='a\\nb')": "SuiteOptions.model_name: must be at most 100 printable characters, 3 given (got 'a\\nb')",
    "SuiteOptions(model_name=None)": "SuiteOptions.model_name: must be a non-empty str (got None)",
    "SuiteOptions(layout='row_first')": "SuiteOptions.layout: must be one of ['layer_first', 'page_first'] (got 'row_first')",
    "SuiteOptions(kind='gqa')": "SuiteOptions.kind: must be one of ['mha', 'mla'] (got 'gqa')",
    "SuiteOptions(profile='quick')": "SuiteOptions.profile: must be one of ['smoke', 'standard', 'exhaustive'] (got 'quick')",
    "SuiteOptions(levels=['core'])": "SuiteOptions.levels: must be a tuple of levels from ['core', 'legacy', 'v1', 'v2', 'prefix', 'namespacing', 'concurrency', 'durability', 'robustness', 'format'] (got ['core'])",
    "SuiteOptions(levels=('hybrid',))": "SuiteOptions.levels: must be a tuple of levels from ['core', 'legacy', 'v1', 'v2', 'prefix', 'namespacing', 'concurrency', 'durability', 'robustness', 'format'] (got ('hybrid',))",
    "SuiteOptions(seed='1')": "SuiteOptions.seed: must be an int or None (got '1')",
    "SuiteOptions(seed=True)": "SuiteOptions.seed: must be an int or None (got True)",
    "SuiteOptions(seed=1.5)": "SuiteOptions.seed: must be an int or None (got 1.5)",
    "SuiteOptions(may_evict='yes')": "SuiteOptions.may_evict: must be a bool or None (got 'yes')",
    "SuiteOptions(checks=['a'])": "SuiteOptions.checks: must be a tuple of check names (got ['a'])",
    "SuiteOptions(checks=(1,))": "SuiteOptions.checks: must be a tuple of check names (got (1,))",
}

TRACE_MESSAGES: dict[str, str] = {
    "method rm_rf": "TraceDocument.operations[0].calls[0].method: must be a method of the backend interface, such as batch_exists, batch_get_v1 or batch_set_v2 (got 'rm_rf')",
    "method empty": "TraceDocument.operations[0].calls[0].method: must be a method of the backend interface, such as batch_exists, batch_get_v1 or batch_set_v2 (got '')",
    "method an int": "TraceDocument.operations[0].calls[0].method: input should be a valid string (got 5)",
    "method with a dot": "TraceDocument.operations[0].calls[0].method: must be a method of the backend interface, such as batch_exists, batch_get_v1 or batch_set_v2 (got 'backend.clear')",
    "method in capitals": "TraceDocument.operations[0].calls[0].method: must be a method of the backend interface (did you mean batch_exists?) (got 'BATCH_EXISTS')",
    "result nested 1000 deep": "TraceDocument: must not nest arrays and objects more than 64 deep (got 'more than 64 levels')",
    "result nested 65 deep": "TraceDocument: must not nest arrays and objects more than 64 deep (got 'more than 64 levels')",
    "format unknown": "TraceDocument.format: input should be 'hicache-trace/1' (got 'hicache-trace/2')",
    "no operations": "TraceDocument.operations: is required (got nothing)",
    "operations empty": "TraceDocument.operations: must hold at least one operation (an empty trace checks nothing) (got ())",
    "operations an object": "TraceDocument.operations: input should be a valid array (got {})",
    "chain missing": "TraceDocument.operations[0].chain: is required (got nothing)",
    "chain of ints": "TraceDocument.operations[0].chain[0]: input should be a valid string (got 1) [KEY-2]",
    "chain a str": "TraceDocument.operations[0].chain: input should be a valid array (got 'abababababababababababababababababababababababababababababababab') [KEY-2]",
    "chain with an empty key": "TraceDocument.operations[0].chain[0]: page key must be a non-empty str (got '') [KEY-2]",
    "prefix_keys a str": "TraceDocument.operations[0].prefix_keys: input should be a valid array (got 'abababababababababababababababababababababababababababababababab') [PFX-1]",
    "prefix_keys missing": "TraceDocument.operations[0].prefix_keys: is required (got nothing)",
    "batch_size 0": "TraceDocument.operations[0].batch_size: must be >= 1 (got 0) [CTL-2]",
    "batch_size a str": "TraceDocument.operations[0].batch_size: input should be a valid integer (got '128') [CTL-2]",
    "page_size 0": "TraceDocument.operations[0].page_size: must be >= 1 (got 0) [CTL-5]",
    "agreed_pages beyond the chain": "TraceDocument.operations[0].agreed_pages: must be <= len(chain) = 1 (got 2) [RANK-2]",
    "agreed_pages negative": "TraceDocument.operations[0].agreed_pages: must be >= 0 (got -1) [RANK-2]",
    "terminated_before_slice negative": "TraceDocument.operations[0].terminated_before_slice: must be >= 0 (got -1) [CTL-4]",
    "backup_completed_tokens without page_size": "TraceDocument.operations[0].page_size: must be given with backup_completed_tokens (got None) [CTL-7]",
    "an unknown operation field": "TraceDocument.operations[0].colour: is not a field of TraceOperation (its fields: operation_id, chain, prefix_keys, prefix_keys_after, batch_size, page_size, agreed_pages, terminated_before_slice, backup_completed_tokens, calls, acks) (got 'red')",
    "an unknown call field": "TraceDocument.operations[0].calls[0].colour: is not a field of TraceCall (its fields: index, method, keys, transfers, extra_info_state, prefix_keys, prefix_keys_problem, prefix_keys_after, result, raised, thread, thread_id, started, finished) (got 'red')",
    "call index missing": "TraceDocument.operations[0].calls[0].index: is required (got nothing)",
    "call index a str": "TraceDocument.operations[0].calls[0].index: input should be a valid integer (got '0')",
    "call keys a str": "TraceDocument.operations[0].calls[0].keys: input should be a valid array (got 'abababababababababababababababababababababababababababababababab') [KEY-2]",
    "call keys of ints": "TraceDocument.operations[0].calls[0].keys[0]: input should be a valid string (got 1) [KEY-2]",
    "extra_info_state unknown": "TraceDocument.operations[0].calls[0].extra_info_state: input should be 'absent', 'none' or 'present' (got 'maybe') [PFX-7]",
    "calls an object": "TraceDocument.operations[0].calls: input should be a valid array (got {})",
    "acks without page_size": "TraceDocument.operations[0].page_size: must be given with acks (got None) [CTL-5]",
    "ack kind unknown": "TraceDocument.operations[0].acks[0]: input tag 'x' found using 'kind' does not match any of the expected tags: 'progress', 'pool_hits', 'final' (got {'kind': 'x'})",
    "not JSON": "TraceDocument: must be valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)) (got '{not json')",
    "an array": "TraceDocument: input should be an object (got [])",
    "a number": "TraceDocument: must be a readable file (No such file or directory) (got '7')",
    "empty text": "TraceDocument: must be valid JSON (Expecting value: line 1 column 1 (char 0)) (got '')",
}

CLI_ROWS: list[tuple[str, list[str], str]] = [
    (
        "timeout nan",
        ["--timeout", "nan"],
        "--timeout: must be a finite number of seconds > 0 and <= 86400 (got nan)",
    ),
    (
        "timeout inf",
        ["--timeout", "inf"],
        "--timeout: must be a finite number of seconds > 0 and <= 86400 (got inf)",
    ),
    (
        "timeout negative",
        ["--timeout", "-1"],
        "--timeout: must be a finite number of seconds > 0 and <= 86400 (got -1.0)",
    ),
    (
        "timeout zero",
        ["--timeout", "0"],
        "--timeout: must be a finite number of seconds > 0 and <= 86400 (got 0.0)",
    ),
    (
        "timeout a week",
        ["--timeout", "604800"],
        "--timeout: must be a finite number of seconds > 0 and <= 86400 (got 604800.0)",
    ),
    (
        "page size a billion",
        ["--page-size", "1000000000"],
        "--page-size: must be at most 4096 (the suite's pools would not fit in memory) (got 1000000000)",
    ),
    (
        "page size 4097",
        ["--page-size", "4097"],
        "--page-size: must be at most 4096 (the suite's pools would not fit in memory) (got 4097)",
    ),
    ("page size negative", ["--page-size", "-64"], "--page-size: must be an int >= 1 (got -64)"),
    (
        "model name of 10k characters",
        ["--model-name", "m" * 10_000],
        f"--model-name: must be at most 100 printable characters, 10000 given (got '{'m' * 57}...')",
    ),
    (
        "model name with a newline",
        ["--model-name", "a\nb"],
        "--model-name: must be at most 100 printable characters, 3 given (got 'a\\nb')",
    ),
    (
        "json into a directory",
        ["--json", "."],
        "--json: must be a file the report can be written to; it is a directory (got '.')",
    ),
    (
        "json under /proc",
        ["--json", "/proc/report.json"],
        "--json: must be a file the report can be written to; nothing can be created in /proc (No such file or "
        "directory) (got '/proc/report.json')",
    ),
    (
        "junit under a file",
        ["--junit-xml", "a-file/report.xml"],
        "--junit-xml: must be a file the report can be written to; {folder}/a-file is not a folder "
        "(got 'a-file/report.xml')",
    ),
    (
        "markdown deep under a file",
        ["--markdown", "a-file/x/y/report.md"],
        "--markdown: must be a file the report can be written to; {folder}/a-file is not a folder "
        "(got 'a-file/x/y/report.md')",
    ),
    (
        "markdown under /proc",
        ["--markdown", "/proc/new/report.md"],
        "--markdown: must be a file the report can be written to; nothing can be created in /proc (No such file or "
        "directory) (got '/proc/new/report.md')",
    ),
    (
        "unknown level",
        ["--levels", "core,fast"],
        "--levels: must name backend levels from ['core', 'legacy', 'v1', 'v2', 'prefix', 'namespacing', "
        "'concurrency', 'durability', 'robustness', 'format'] (got 'fast', not a level)",
    ),
    ("unknown check", ["--check", "rm_rf"], "--check: must name a check from --list-checks (got 'rm_rf')"),
    (
        "extra config not JSON",
        ["--extra-config", "{path: x}"],
        "--extra-config: must be a JSON object or @file (Expecting property name enclosed in double quotes) "
        "(got '{path: x}')",
    ),
    (
        "extra config a list",
        ["--extra-config", "[1]"],
        "--extra-config: must be an object (a dict of options) (got [1])",
    ),
    (
        "extra config file missing",
        ["--extra-config", "@missing.json"],
        "--extra-config: must name an existing file after '@' (got '@missing.json')",
    ),
    (
        "extra config of another kind",
        ["--extra-config", "@a-file"],
        "--extra-config: must be a .json, .toml, .yaml or .yml file (got 'a-file')",
    ),
    (
        "backend module raising on import",
        ["--backend", "raises_on_import:Backend"],
        "--backend: module 'raises_on_import' must import without error (RuntimeError: boom at import) "
        "(got 'raises_on_import:Backend')",
    ),
    (
        "module_path raising on import",
        ["--extra-config", '{"module_path": "raises_on_import", "class_name": "B"}'],
        "extra_config.module_path/class_name: module 'raises_on_import' must import without error (RuntimeError: boom "
        "at import) (got 'raises_on_import:B')",
    ),
    (
        "backend without a class",
        ["--backend", "raises_on_import"],
        "--backend: must be 'module:Class' (got 'raises_on_import')",
    ),
    (
        "extra config: a YAML alias bomb",
        ["--extra-config", "@bomb.yaml"],
        "--extra-config: must hold at most 100000 values once its YAML aliases are expanded (got 'more than 100000')",
    ),
    (
        "extra config: a YAML alias to itself",
        ["--extra-config", "@self.yaml"],
        "--extra-config: must not hold a YAML alias to a node that contains it (got 'an alias to itself')",
    ),
    (
        "extra config: YAML nested 30k deep",
        ["--extra-config", "@deep.yaml"],
        "--extra-config: must not nest arrays and objects more than 64 deep (got 'more than 64')",
    ),
    (
        "extra config: JSON nested 30k deep",
        ["--extra-config", "[" * 30_000 + "]" * 30_000],
        "--extra-config: must not nest arrays and objects more than 64 deep (got 'more than 64')",
    ),
    (
        "extra config: a JSON file nested 30k deep",
        ["--extra-config", "@deep.json"],
        "--extra-config: must not nest arrays and objects more than 64 deep (got 'more than 64')",
    ),
    (
        "extra config: TOML nested 30k deep",
        ["--extra-config", "@deep.toml"],
        "--extra-config: must not nest arrays and objects more than 64 deep (got 'more than 64')",
    ),
    (
        "extra config: NaN",
        ["--extra-config", '{"timeout_s": NaN}'],
        "--extra-config: must hold finite numbers only (NaN and infinity are no settings) (got 'NaN')",
    ),
    (
        "extra config: NaN in YAML",
        ["--extra-config", "@nan.yaml"],
        "--extra-config.limits.timeout_s: must be a finite number (NaN and infinity are no settings) (got nan)",
    ),
    (
        "extra config: over a MiB",
        ["--extra-config", "@big.json"],
        "--extra-config: must be a file of at most 1048576 bytes (got 'big.json')",
    ),
    (
        "extra config: a NUL byte in the path",
        ["--extra-config", "@conf\x00ig.json"],
        "--extra-config: must be a path without a NUL byte (got 'conf\\x00ig.json')",
    ),
    (
        "json: a NUL byte in the path",
        ["--json", "report\x00.json"],
        "--json: must be a path without a NUL byte (got 'report\\x00.json')",
    ),
    (
        "markdown: bytes that are not UTF-8",
        ["--markdown", "report-\udcff.md"],
        "--markdown: must be a path of valid UTF-8 (it holds bytes that are not) (got 'report-\\udcff.md')",
    ),
    (
        "certify: a NUL byte in the folder",
        ["--certify", "bundle\x00"],
        "--certify: must be a path without a NUL byte (got 'bundle\\x00')",
    ),
    (
        "known failures: a NUL byte in the path",
        ["--known-failures", "known\x00.txt"],
        "--known-failures: must be a path without a NUL byte (got 'known\\x00.txt')",
    ),
    (
        "deadline nan",
        ["--deadline", "nan"],
        "--deadline: must be a finite number of seconds > 0 and <= 604800 (a week) (got nan)",
    ),
    (
        "deadline in one process",
        ["--deadline", "5", "--isolation", "none"],
        "--deadline: needs --isolation process (in one process nothing can stop a backend that never returns) "
        "(got 5.0)",
    ),
    (
        "password in a bad extra config",
        ["--extra-config", '{"redis_password": "hunter2", "x": }'],
        '--extra-config: must be a JSON object or @file (Expecting value) (got \'{"redis_password": "***", "x": }\')',
    ),
]
"""``hicache-conform run`` usage errors: (label, arguments, message after ``hicache-conform run: ``)."""

FILE_CONFIG_ROWS: list[tuple[str, Any, dict, str]] = [
    ("no path", "m", {}, "FileBackend.extra_config.path: required, the directory that holds the pages (got None)"),
    (
        "path an int",
        "m",
        {"path": 5},
        "FileBackend.extra_config.path: required, the directory that holds the pages (got 5)",
    ),
    ("fsync a str", "m", {"fsync": "yes"}, "FileBackend.extra_config.fsync: must be true or false (got 'yes')"),
    (
        "model name ..",
        "..",
        {},
        "FileBackend.storage_config.model_name: must give a directory name that is not '.' or "
        "'..' and at most 200 bytes once escaped (got '..', 2 characters)",
    ),
    (
        "model name .",
        ".",
        {},
        "FileBackend.storage_config.model_name: must give a directory name that is not '.' or "
        "'..' and at most 200 bytes once escaped (got '.', 1 characters)",
    ),
    (
        "model name of 10k characters",
        "m" * 10_000,
        {},
        "FileBackend.storage_config.model_name: must give a directory name that is not '.' or '..' and at most 200 "
        f"bytes once escaped (got '{'m' * 76}..., 10000 characters)",
    ),
    (
        "model name escaping past 200 bytes",
        "/" * 67,
        {},
        "FileBackend.storage_config.model_name: must give a directory name that is not '.' or '..' and at most 200 "
        f"bytes once escaped (got '{'/' * 67}', 67 characters)",
    ),
]
"""The file backend's configuration: (label, model name, extra config, message)."""

HOST_INDEX_ROWS: list[tuple[str, Any, str]] = [
    (
        "validate_host_indices on the meta device",
        lambda: torch.arange(PAGE_SIZE, device="meta"),
        "host_indices: must be a tensor on the CPU (or a CUDA device), whose slots can be read (got 'tensor on meta') "
        "[BE-15]",
    ),
    (
        "backup host_indices on the meta device",
        lambda: torch.arange(PAGE_SIZE, device="meta"),
        "CacheController.backup.host_indices: must be a tensor on the CPU (or a CUDA device), whose slots can be read "
        "(got 'tensor on meta') [BE-15]",
    ),
    (
        "backup host_indices of floats",
        lambda: torch.arange(float(PAGE_SIZE)),
        "CacheController.backup.host_indices: must be a 1-D integer torch.Tensor, not torch.float32 (got "
        "Tensor(shape=(4,), dtype=torch.float32)) [BE-15]",
    ),
    (
        "backup host_indices too few",
        lambda: torch.arange(PAGE_SIZE - 1),
        "CacheController.backup.host_indices: must hold key_count * page_size = 1 * 4 = 4 slots (got "
        "Tensor(shape=(3,), dtype=torch.int64)) [BE-15]",
    ),
]
"""Host slots handed to ``validate_host_indices`` directly and through the reference controller's backup:
(label, slots, message)."""

TRACE_CLI_ROWS = [
    "method rm_rf",
    "result nested 1000 deep",
    "chain with an empty key",
    "not JSON",
    "empty text",
    "an unknown call field",
    "format unknown",
    "operations empty",
]
"""Trace rows also run through ``hicache-conform trace`` (exit 2, the message on stderr, nothing on stdout)."""


# ---------------------------------------------------------------- the tests
import json  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from hicache_contracts import ContractViolation  # noqa: E402
from hicache_contracts.cli import main  # noqa: E402
from tests.reliability import badinput_rows as rows  # noqa: E402
from tests.reliability.badinput_rows import TRACE_DOCUMENTS  # noqa: E402

BACKEND_CASES = [(kind, label, action) for kind in ("memory", "file") for label, action in rows.BACKEND_ACTIONS]


def test_the_matrix_has_at_least_250_cases_and_every_row_a_message() -> None:
    assert set(BACKEND_MESSAGES) == {label for label, _ in rows.BACKEND_ACTIONS}
    assert set(OPTION_MESSAGES) == {label for label, _ in rows.OPTION_ACTIONS}
    assert set(TRACE_MESSAGES) == {label for label, _ in rows.TRACE_ACTIONS}
    sizes = {
        "backend API": len(BACKEND_CASES),
        "suite options": len(OPTION_MESSAGES),
        "trace format": len(TRACE_MESSAGES) + len(TRACE_CLI_ROWS),
        "CLI": len(CLI_ROWS),
        "file backend config": len(FILE_CONFIG_ROWS),
        "host slots": len(HOST_INDEX_ROWS),
    }
    assert sum(sizes.values()) >= 250, sizes


@pytest.mark.clause("KEY-2", "BE-15", "BE-19", "BE-24", "BE-28")
@pytest.mark.parametrize(
    ("kind", "label", "action"), BACKEND_CASES, ids=[f"{kind}: {label}" for kind, label, _ in BACKEND_CASES]
)
def test_backend_refuses_bad_input_and_writes_nothing(kind: str, label: str, action: Any, tmp_path: Any) -> None:
    scene = scene_for(kind, str(tmp_path))
    stats, files = scene.backend.get_stats(), snapshot(str(tmp_path))
    with pytest.raises(ContractViolation) as raised:
        action(scene)
    assert str(raised.value) == BACKEND_MESSAGES[label].replace("{backend}", type(scene.backend).__name__)
    assert scene.backend.get_stats() == stats  # nothing read, nothing written
    assert snapshot(str(tmp_path)) == files
    assert scene.backend.batch_exists([KEY, SECOND_KEY]) == 2  # the stored pages are intact


@pytest.mark.parametrize(("label", "action"), rows.OPTION_ACTIONS, ids=[label for label, _ in rows.OPTION_ACTIONS])
def test_suite_options_refuse_bad_values(label: str, action: Any) -> None:
    with pytest.raises(ValueError) as raised:
        action(None)
    assert str(raised.value) == OPTION_MESSAGES[label]


@pytest.mark.clause("PFX-7")
@pytest.mark.parametrize(("label", "action"), rows.TRACE_ACTIONS, ids=[label for label, _ in rows.TRACE_ACTIONS])
def test_trace_format_refuses_bad_documents(label: str, action: Any) -> None:
    with pytest.raises(ContractViolation) as raised:
        action(None)
    assert str(raised.value) == TRACE_MESSAGES[label]


@pytest.mark.parametrize("label", TRACE_CLI_ROWS)
def test_trace_command_exits_2_naming_the_field(label: str, tmp_path: Any, capsys: Any) -> None:
    document = dict(TRACE_DOCUMENTS)[label]
    path = tmp_path / "trace.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    assert main(["trace", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{path}: not a valid trace: {TRACE_MESSAGES[label]}\n"
    assert sorted(os.listdir(tmp_path)) == ["trace.json"]


@pytest.fixture
def cli_folder(tmp_path: Any, monkeypatch: Any) -> str:
    """A working folder holding a file ``a-file`` and a module that raises on import; TMPDIR inside it."""
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "tmp").mkdir()
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"]  # 10 lines standing for 9**10 (3.5 billion) strings
    bomb += [f"{this}: &{this} [{', '.join(['*' + last] * 9)}]" for last, this in zip("abcdefgh", "bcdefghi")]
    (tmp_path / "bomb.yaml").write_text("\n".join(bomb + [f"password: [{', '.join(['*i'] * 9)}]"]) + "\n")
    (tmp_path / "self.yaml").write_text("a: &a [1, *a]\n")
    (tmp_path / "deep.yaml").write_text("x: " + "[" * 30_000 + "]" * 30_000 + "\n")
    (tmp_path / "deep.json").write_text('{"x": ' + "[" * 30_000 + "]" * 30_000 + "}")
    (tmp_path / "deep.toml").write_text("x = " + "[" * 30_000 + "]" * 30_000 + "\n")
    (tmp_path / "nan.yaml").write_text("limits:\n  timeout_s: .nan\n")
    (tmp_path / "big.json").write_text('{"x": "' + "y" * (1 << 20) + '"}')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.delitem(sys.modules, "raises_on_import", raising=False)
    return str(tmp_path)


@pytest.mark.clause("BE-1")
@pytest.mark.parametrize(("label", "arguments", "message"), CLI_ROWS, ids=[row[0] for row in CLI_ROWS])
def test_run_usage_errors_exit_2_and_write_nothing(
    label: str, arguments: list, message: str, cli_folder: str, capsys: Any
) -> None:
    before = snapshot(cli_folder)
    assert main(["run", "--quiet", "--no-color", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"hicache-conform run: {message.replace('{folder}', cli_folder)}\n"
    after = {name: size for name, size in snapshot(cli_folder).items() if "__pycache__" not in name}
    assert after == before  # no report, no probe, no temporary directory left


@pytest.mark.parametrize(
    ("label", "model_name", "extra", "message"), FILE_CONFIG_ROWS, ids=[row[0] for row in FILE_CONFIG_ROWS]
)
def test_file_backend_refuses_bad_configuration_and_writes_nothing(
    label: str, model_name: str, extra: dict, message: str, tmp_path: Any
) -> None:
    config = HiCacheStorageConfig.single_rank(model_name=model_name)
    arguments = {"path": str(tmp_path / "store"), **extra} if "path" not in extra and label != "no path" else extra
    with pytest.raises(ValueError) as raised:
        FileBackend(config, arguments)
    assert str(raised.value) == message
    assert os.listdir(tmp_path) == []


def test_planted_backend_that_trusts_its_transfers_is_caught(tmp_path: Any, monkeypatch: Any) -> None:
    from hicache_reference.backends.base import PageStoreBackend

    monkeypatch.setattr(PageStoreBackend, "_checked_transfers", lambda self, transfers, argument: list(transfers or []))
    caught = 0
    for kind, label, action in BACKEND_CASES:
        if "transfers" not in label:
            continue
        try:
            test_backend_refuses_bad_input_and_writes_nothing(kind, label, action, tmp_path / f"{kind}-{caught}")
        except (Exception, pytest.fail.Exception):  # a wrong message, an escaped error or nothing raised
            caught += 1
    assert caught == 2 * 3 * len(rows.BAD_TRANSFERS)  # every transfer row, on both backends


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize(("label", "make", "message"), HOST_INDEX_ROWS, ids=[row[0] for row in HOST_INDEX_ROWS])
def test_host_slots_are_refused_before_any_io(label: str, make: Any, message: str, tmp_path: Any) -> None:
    from hicache_contracts import validate_host_indices
    from hicache_reference import CacheController

    scene = scene_for("memory", str(tmp_path))
    stats = scene.backend.get_stats()
    with pytest.raises(ContractViolation) as raised:
        if label.startswith("validate_host_indices"):
            validate_host_indices(make(), 1, PAGE_SIZE)
        else:
            controller = CacheController(scene.backend, scene.backend.mem_pool_host, start=False)
            controller.backup(["ef" * 32], make())
    assert str(raised.value) == message
    assert scene.backend.get_stats() == stats  # nothing read, nothing written
    assert scene.backend.batch_exists(["ef" * 32]) == 0
    assert scene.backend.batch_exists([KEY, SECOND_KEY]) == 2
