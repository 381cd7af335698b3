"""The fault tier: a full disk, kill -9 during writes and a hung backend never give a wrong page.

- full disk: writes that meet ENOSPC are False, leave no temporary file, and
  every page stored before still reads back exactly;
- kill -9: a writer killed in the middle of its writes leaves only whole
  pages: every page file present reads back exactly what was written;
- Redis killed and restarted mid-backup and mid-prefetch: see test_redis_faults.py;
- a hung backend: see test_controller_hang.py (every operation gets its
  final ack, close returns in time).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import hicache_reference.backends.file as file_module
from tests.reliability.fault_writer import BATCH, PAGE_SIZE, backend_at, fill, key_of

PROJECT = Path(__file__).resolve().parents[2]
"""The repository root: ``python -m tests...`` runs from there, whatever pytest's working directory."""


def read_value(backend: Any, key: str) -> Any:
    """Return the one value page ``key`` holds in every element, 'mixed' if it is not uniform, None on a miss."""
    pool = backend.mem_pool_host
    fill(pool, 0, -1.0)
    if backend.batch_get_v1([key], torch.arange(PAGE_SIZE)) != [True]:
        return None
    page = pool.get_data_page(0, flat=True)
    return float(page[0]) if bool((page == page[0]).all()) else "mixed"


@pytest.mark.clause("BE-5", "BE-7")
def test_a_full_disk_fails_writes_and_spoils_no_page(tmp_path: Any, monkeypatch: Any) -> None:
    backend = backend_at(str(tmp_path))
    pool = backend.mem_pool_host
    for page in range(BATCH):
        fill(pool, page, float(page))
    stored = [key_of(page) for page in range(BATCH)]
    assert backend.batch_set_v1(stored, torch.arange(BATCH * PAGE_SIZE)) == [True] * BATCH
    real_write, calls = os.write, {"n": 0}

    def filling_up(descriptor: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] % 2 == 0:  # every other write finds the disk full, half way through
            real_write(descriptor, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    def filling_up_vectored(descriptor: int, parts: Any) -> int:
        return filling_up(descriptor, b"".join(bytes(part) for part in parts))

    monkeypatch.setattr(file_module.os, "write", filling_up)
    monkeypatch.setattr(file_module.os, "writev", filling_up_vectored)
    for page in range(BATCH):
        fill(pool, page, 500.0 + page)
    rewritten = backend.batch_set_v1(stored, torch.arange(BATCH * PAGE_SIZE))  # rewrites: some fail
    monkeypatch.undo()
    assert rewritten.count(False) == BATCH // 2
    leftovers = [name for _, _, files in os.walk(tmp_path) for name in files if "%tmp" in name]
    assert leftovers == []
    for page, (key, ok) in enumerate(zip(stored, rewritten)):
        assert read_value(backend, key) == (500.0 + page if ok else float(page)), key  # old or new, never torn


@pytest.mark.clause("BE-7", "BE-13")
def test_kill_9_during_writes_leaves_only_whole_pages(tmp_path: Any) -> None:
    root = str(tmp_path / "store")
    wrong = pages = 0
    for attempt in range(3):
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.fault_writer", root], stdout=subprocess.PIPE, cwd=PROJECT
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"writing"
        time.sleep(0.3 + 0.2 * attempt)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        backend = backend_at(root)
        directory = os.path.join(root, backend.namespace, "kv")
        names = {name for name in os.listdir(directory) if "%tmp" not in name}
        number = 0
        while key_of(number) in names or number < BATCH:
            if key_of(number) in names:
                pages += 1
                value = read_value(backend, key_of(number))
                wrong += value != float(number % 1000)
            number += 1
        assert pages > 0
        backend.clear()  # the temporary files of the killed writer go with the namespace
        assert os.listdir(root) == []
    assert wrong == 0, f"{wrong} wrong pages out of {pages}"
