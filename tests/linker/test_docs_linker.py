"""docs/linkers.md's command block runs as written and says what the guide says.

Scenario: each ``hicache-conform`` line of the guide's command block, run in-process.
Expected: the reference linkers conform (exit 0, the report's last line says so); the check list
names every check with its clause.
Why it matters: a vendor copies these lines first.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hicache_contracts.cli import main
from hicache_contracts.linker.checks import CHECKS

DOC = Path(__file__).resolve().parents[2] / "docs" / "linkers.md"


def command_lines() -> list[str]:
    text = DOC.read_text()
    block = re.search(r"<!-- runs: tests/linker/test_docs_linker.py -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None, "docs/linkers.md lost its command block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.clause("LNK-7")
@pytest.mark.parametrize("line", command_lines())
def test_the_guides_commands_run_as_written(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    words = shlex.split(line)
    assert words[0].endswith("hicache-conform")
    assert main(words[1:]) == 0
    out = capsys.readouterr().out
    if "--list-checks" in words:
        assert all(f"{check.clause:7} {check.name}" in out for check in CHECKS)
    else:
        assert out.rstrip().endswith("conforms")
