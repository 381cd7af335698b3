"""Outputs stay bounded and honest: a huge operation id is printed shortened, a report that cannot be written is
a clear error (exit 2), not a traceback after a passing report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hicache_contracts.cli import main
from hicache_contracts.engine._trace import MAX_OPERATION_ID_LENGTH, load_trace
from tests.conformance.helpers import CORRECT, run_cli

KEY = "ab" * 32


def test_a_huge_operation_id_is_printed_shortened(tmp_path: Any, capsys: Any) -> None:
    huge = "x" * 5_000_000
    document = {
        "format": "hicache-trace/1",
        "operations": [
            {
                "operation_id": huge,
                "chain": [KEY],
                "prefix_keys": None,
                "calls": [{"index": 0, "method": "batch_exists", "keys": [KEY], "result": 0}],
            }
        ],
    }
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    shortened = f"{'x' * (MAX_OPERATION_ID_LENGTH - 40)}... (5000000 characters)"
    assert load_trace(str(path)).operations[0].operation_id == shortened
    main(["trace", str(path)])
    out = capsys.readouterr().out
    assert len(out) < 5_000 and out.count(shortened) == 1
    main(["trace", str(path), "--json"])
    out = capsys.readouterr().out
    assert len(out) < 5_000 and json.loads(out)[0]["operation_id"] == shortened


def test_a_report_that_cannot_be_written_after_the_run_exits_2(tmp_path: Any, capsys: Any, monkeypatch: Any) -> None:
    real = Path.write_text

    def disk_full(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == "report.json":
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full)
    status = run_cli(
        "--backend",
        CORRECT,
        "--check",
        "batch_exists_has_no_side_effects",
        "--json",
        str(tmp_path / "report.json"),
        "--markdown",
        str(tmp_path / "report.md"),
    )
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err == (
        f"hicache-conform run: --json: the report could not be written (No space left on device) "
        f"(got {str(tmp_path / 'report.json')!r})\n"
    )
    assert "PASSED" in captured.out and (tmp_path / "report.md").exists()  # the other reports are still written
