"""The live line: on a terminal, the check under way and how long it has run, rewritten in place.

    line = LiveLine(sys.stderr)
    line.start("[ 3/41] running batch_exists_counts_the_leading_run")   # "... 12.5 s", every half second
    line.clear()                                                          # before the check's result is printed
    line.stop()                                                           # at the end of the run

It writes only when its stream is a terminal (never into a file or a pipe,
where CI logs would fill with carriage returns), from one daemon thread, so a
backend call that blocks shows as a line whose seconds keep counting.
"""

from __future__ import annotations

import threading
import time
from typing import Optional, TextIO

__all__ = ["LiveLine", "TICK_S"]

TICK_S = 0.5
"""How often the elapsed time is redrawn."""

WIDTH = 150
"""Longest line drawn (longer ones are cut)."""


class LiveLine:
    """One status line on a terminal stream, redrawn every ``TICK_S`` seconds while a check runs."""

    def __init__(self, stream: TextIO, *, enabled: bool = True) -> None:
        self.stream = stream
        self.enabled = enabled and hasattr(stream, "isatty") and stream.isatty()
        """Whether anything is drawn: only on a terminal, and not in quiet runs."""
        self._lock = threading.Lock()
        self._text: Optional[str] = None
        self._since = 0.0
        self._wake = threading.Event()
        self._stopped = False
        self._thread: Optional[threading.Thread] = None

    def start(self, text: str) -> None:
        """Show ``text`` and the seconds since now, until ``clear``."""
        if not self.enabled:
            return
        with self._lock:
            self._text, self._since = text, time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hicache-conform-live-line", daemon=True)
                self._thread.start()
        self._draw()

    def clear(self) -> None:
        """Erase the line (a result line is about to be printed)."""
        if not self.enabled:
            return
        with self._lock:
            had = self._text is not None
            self._text = None
        if had:
            self._write("\r\033[K")

    def stop(self) -> None:
        """Erase the line and end the drawing thread."""
        self.clear()
        self._stopped = True
        self._wake.set()

    def render(self) -> Optional[str]:
        """Return the line as drawn now (None when nothing runs)."""
        with self._lock:
            if self._text is None:
                return None
            return f"{self._text} ... {time.monotonic() - self._since:.1f} s"[:WIDTH]

    def _draw(self) -> None:
        line = self.render()
        if line is not None:
            self._write("\r\033[K" + line)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: the run goes on without the line
            self.enabled = False

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(TICK_S)
            if self._stopped:
                return
            self._draw()
