"""Backends the reliability tests hand to ``hicache-conform run`` by name."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from typing import Any, Optional

from hicache_reference.backends import FileBackend
from tests.conformance.correct_backend import CorrectBackend


class RefusesToBuild:
    """Raises on construction, showing the config it was given (as a vendor's constructor may)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        raise RuntimeError(f"cannot connect with {storage_config.extra_config!r}")


class InterruptedFileBackend(FileBackend):
    """A file backend whose ``INTERRUPT_AT``-th ``batch_set_v1`` in the main thread sends its process a SIGINT
    once its pages are written: a Ctrl-C landing in the middle of a check."""

    INTERRUPT_AT = 12
    writes = 0

    def batch_set_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        result = super().batch_set_v1(keys, host_indices, extra_info)
        if threading.current_thread() is threading.main_thread():
            type(self).writes += 1
            if type(self).writes == self.INTERRUPT_AT:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler raises KeyboardInterrupt here, at once
        return result


class Hostile(CorrectBackend):
    """The correct in-test backend, made hostile as ``extra_config["hostile"]`` says, from its
    ``extra_config.get("after", 0) + 1``-th ``batch_get_v1`` of some keys on (counted per process; the
    probe's empty call is answered):

    - ``sys.exit``: calls ``sys.exit(0)``; ``SystemExit``, ``KeyboardInterrupt``, ``CancelledError``,
      ``GeneratorExit``: raises it;
    - ``os._exit``: ends the process with status 0 at once;
    - ``thread``: starts a non-daemon thread that never ends (once per process), and answers correctly;
    - ``endless``: answers with an endless (slow) iterator;
    - ``del``: answers correctly with a result whose ``__del__`` blocks for ever;
    - ``fork``: forks; the copy writes its process id to ``extra_config["pidfile"]`` and goes on answering as
      the original does;
    - ``chdir``: changes the working directory to ``extra_config["to"]`` and answers correctly.
    """

    gets = 0
    threads = 0

    def batch_get_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> Any:
        extra = dict(self.config.extra_config or {})
        type(self).gets += bool(keys)
        if not keys or type(self).gets <= int(extra.get("after", 0)):
            return super().batch_get_v1(keys, host_indices, extra_info)
        how = extra["hostile"]
        if how == "sys.exit":
            sys.exit(0)
        if how in _RAISED:
            raise _RAISED[how]("planted by the backend")
        if how == "os._exit":
            os._exit(0)
        if how == "thread" and not type(self).threads:
            type(self).threads += 1
            threading.Thread(target=threading.Event().wait, name="hostile-forever", daemon=False).start()
        elif how == "endless":
            return _endless()
        elif how == "del":
            return _BlocksWhenCollected(super().batch_get_v1(keys, host_indices, extra_info))
        elif how == "fork":
            if os.fork() == 0:  # the copy says who it is, then goes on as the original does
                with open(extra["pidfile"], "w") as stream:
                    stream.write(str(os.getpid()))
        elif how == "chdir":
            os.chdir(extra["to"])
        return super().batch_get_v1(keys, host_indices, extra_info)


_RAISED = {
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
    "CancelledError": asyncio.CancelledError,
    "GeneratorExit": GeneratorExit,
}


def _endless() -> Any:
    """True for ever, slowly: an endless result that whatever reads it whole never finishes (nor fills memory)."""
    while True:
        time.sleep(0.01)
        yield True


class _BlocksWhenCollected(list):
    def __del__(self) -> None:
        threading.Event().wait()
