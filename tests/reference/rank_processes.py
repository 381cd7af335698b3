"""Ranks as child processes: one interpreter per rank, each one's output collected, nothing left running.

``run_rank_processes(module, args_by_rank, timeout)`` starts
``python -m <module> <rank> <port> <args...>`` for each rank with one
rendezvous port, waits at most ``timeout`` seconds for each, and kills every
child still running when anything fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_rank_processes(module: str, args_by_rank: Sequence[Sequence[str]], timeout: float) -> list[str]:
    """Run one child per rank; return each one's stdout, by rank. A rank that fails raises AssertionError."""
    port = free_port()
    environment = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    children = [
        subprocess.Popen(
            [sys.executable, "-m", module, str(rank), str(port), *args],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, args in enumerate(args_by_rank)
    ]
    outputs = []
    try:
        for rank, child in enumerate(children):
            out, err = child.communicate(timeout=timeout)
            assert child.returncode == 0, f"rank {rank} failed:\n{err[-3000:]}"
            outputs.append(out)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(10)
    return outputs
