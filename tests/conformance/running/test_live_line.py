"""The live line: on a terminal, the running check and its elapsed time; nothing on a file or a pipe.

Scenario: a live line on a stream that says it is a terminal, started,
left running past one tick, cleared and stopped; the same on a plain
stream; the CLI's progress printer around a check.
Expected: the terminal gets the check's name and a growing seconds count,
each redraw starting with a carriage return and an erase; clearing erases
it; a non-terminal stream gets nothing at all.
Why it matters: a backend call that blocks must show which check is stuck,
without filling CI logs with control characters.
"""

from __future__ import annotations

import io
import time

from hicache_contracts.conformance.running.live import TICK_S, LiveLine


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_line_shows_the_running_check_and_its_seconds_on_a_terminal() -> None:
    terminal = Terminal()
    line = LiveLine(terminal)
    line.start("[ 3/41] running batch_exists_counts_the_leading_run")
    time.sleep(TICK_S * 2.5)
    shown = line.render()
    assert shown is not None
    assert shown.startswith("[ 3/41] running batch_exists_counts_the_leading_run ... ") and shown.endswith(" s")
    assert float(shown.rsplit(" ", 2)[1]) >= TICK_S * 2
    line.stop()
    written = terminal.getvalue()
    assert written.count("\r\033[K[ 3/41] running batch_exists_counts_the_leading_run ... ") >= 2
    assert written.endswith("\r\033[K")
    assert line.render() is None


def test_the_live_line_writes_nothing_to_a_file_or_when_quiet() -> None:
    for stream, enabled in ((io.StringIO(), True), (Terminal(), False)):
        line = LiveLine(stream, enabled=enabled)
        line.start("[ 1/1] running x")
        line.stop()
        assert stream.getvalue() == ""
