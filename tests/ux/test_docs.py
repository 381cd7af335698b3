"""The guides as a new user reads them: every code block runs in a test or says it is a sketch; tables are true.

Scenario: every ```bash, ```sh and ```python block of README.md and docs/
(the generated pages aside); the level and option tables of docs/vendors.md;
the blocks this file is named as the runner of.
Expected: each block is preceded by ``<!-- runs: TEST FILE -->`` naming a test
file that exists and names the document, or by ``<!-- sketch: why -->``; the
blocks run here run as written; the level table lists exactly the clauses a
backend is held to and the option table every option of ``run``.
Why it matters: a vendor or engine developer copies these blocks first.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import pytest

from hicache_contracts.cli import build_parser
from hicache_contracts.conformance.levels import BACKEND_LEVELS, level_clause_ids

PROJECT = Path(__file__).resolve().parents[2]
GENERATED = {"spec.md", "backend-methods.md", "divergences.md"}
"""Pages rendered from the registry or the protocols: their code blocks are signatures, not examples."""
RUN_BY_CI = {("README.md", 0): "the setup commands at the top of the README are what .ci/run runs"}
"""Blocks run by CI itself, by document and position."""
FENCE = re.compile(r"^```(bash|sh|python)\n(.*?)^```$", re.S | re.M)
MARKER = re.compile(r"<!-- (runs|sketch): (.+?) -->")


def documents() -> list[Path]:
    return [
        PROJECT / "README.md",
        *sorted(path for path in (PROJECT / "docs").glob("*.md") if path.name not in GENERATED),
    ]


def blocks(path: Path) -> list[tuple[int, str, str, Optional[re.Match[str]]]]:
    """Each code block of ``path``: its position, language, text and the marker on the line before it."""
    text = path.read_text(encoding="utf-8")
    found = []
    for position, match in enumerate(FENCE.finditer(text)):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((position, match.group(1), match.group(2), MARKER.fullmatch(before.strip())))
    return found


def block_to_run(document: str, first_line: str) -> str:
    (code,) = [
        code
        for _, language, code, marker in blocks(PROJECT / document)
        if language == "python" and code.startswith(first_line)
    ]
    return code


@pytest.mark.parametrize("path", documents(), ids=lambda path: path.name)
def test_every_code_block_runs_in_a_test_or_is_marked_a_sketch(path: Path) -> None:
    for position, language, code, marker in blocks(path):
        where = f"{path.name} block {position} ({language}: {code.splitlines()[0]!r})"
        if (path.name, position) in RUN_BY_CI:
            continue
        assert marker is not None, f"{where}: precede it with <!-- runs: tests/... --> or <!-- sketch: why -->"
        if marker.group(1) == "runs":
            runner = PROJECT / marker.group(2)
            assert runner.is_file(), f"{where}: {marker.group(2)} does not exist"
            assert path.name in runner.read_text(encoding="utf-8"), f"{where}: {marker.group(2)} never names it"


@pytest.mark.clause("BE-2")
def test_the_host_pool_guide_example_runs_as_written() -> None:
    names: dict = {}
    exec(compile(block_to_run("docs/host_pool.md", "import torch\n"), "docs/host_pool.md", "exec"), names)
    assert names["page"].dim() == 1 and len(names["pointers"]) == len(names["sizes"])


@pytest.mark.clause("CTL-5", "CTL-7")
def test_the_end_to_end_check_of_the_engine_guide_runs_as_written(capsys) -> None:
    code = block_to_run("docs/engines.md", "from hicache_reference.engine_check import check_reference_controller\n")
    exec(compile(code, "docs/engines.md: end to end", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 10 and all(re.fullmatch(r"[A-Z]+-\d+ pass in \d+ scenario\(s\)", line) for line in lines), (
        lines
    )


def table_rows(document: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header line is ``header``, split into cells."""
    text = (PROJECT / "docs" / document).read_text(encoding="utf-8")
    table = text[text.index(header) :].split("\n\n", 1)[0].splitlines()[2:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in table]


@pytest.mark.clause("BE-1", "BE-14")
def test_the_level_table_of_the_vendor_guide_lists_the_clauses_a_backend_is_held_to() -> None:
    rows = table_rows("vendors.md", "| level | what it covers | clauses |")
    listed = {row[0].strip("`"): tuple(cell.strip() for cell in row[2].split(",")) for row in rows}
    assert listed == {level: level_clause_ids(level) for level in BACKEND_LEVELS}


def test_the_option_table_of_the_vendor_guide_lists_every_option_of_run() -> None:
    parser = build_parser()
    subparsers: Any = parser._subparsers
    (run,) = [action.choices["run"] for action in subparsers._group_actions]
    options = {
        option
        for action in run._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    table = " ".join(" ".join(row) for row in table_rows("vendors.md", "| option | meaning (default) |"))
    missing = sorted(
        option
        for option in options
        if f"`{option}" not in table and f"{option}`" not in table and f" {option}" not in table
    )
    assert missing == []


IMPORT = re.compile(r"^(from (hicache_\w+(?:\.\w+)*) import ([^#\n(]+)|import (hicache_\w+(?:\.\w+)*))", re.M)
"""An import of one of the project's packages, on one line."""


def project_imports(code: str) -> list[str]:
    """The project imports of a block, each a statement that runs on its own."""
    return [match.group(1).strip() for match in IMPORT.finditer(code)]


def unresolved_imports(documents_and_code: list[tuple[str, str]]) -> list[str]:
    """Each project import of the blocks that fails, with the document and the error."""
    failures = []
    for where, code in documents_and_code:
        for statement in project_imports(code):
            try:
                exec(compile(statement, where, "exec"), {})
            except Exception as error:  # ImportError mostly; anything else is as wrong
                failures.append(f"{where}: {statement}: {type(error).__name__}: {error}")
    return failures


def test_every_project_import_in_the_guides_resolves_sketches_included() -> None:
    found = [(path.name, code) for path in documents() for _, language, code, _ in blocks(path) if language == "python"]
    assert sum(len(project_imports(code)) for _, code in found) >= 20  # the guides' imports are all seen
    assert unresolved_imports(found) == []
    # ...the scenarios API among them, from the package and from its module (the same objects)
    import hicache_contracts.engine as engine
    import hicache_contracts.engine.scenarios as scenarios

    assert [name for name in scenarios.__all__ if getattr(engine, name, None) is not getattr(scenarios, name)] == []


def test_an_import_that_does_not_resolve_is_reported() -> None:
    planted = [
        (
            "planted.md",
            "from hicache_contracts.engine import check_engine, no_such_name\n"
            "import hicache_spec\nfrom hicache_reference.nowhere import X  # a sketch\n",
        )
    ]
    assert unresolved_imports(planted) == [
        "planted.md: from hicache_contracts.engine import check_engine, no_such_name: ImportError: cannot import "
        "name 'no_such_name' from 'hicache_contracts.engine' (" + str(PROJECT / "contracts/engine/__init__.py") + ")",
        "planted.md: from hicache_reference.nowhere import X: ModuleNotFoundError: No module named "
        "'hicache_reference.nowhere'",
    ]


JSON_FENCE = re.compile(r"^```json\n(.*?)^```$", re.S | re.M)


def json_blocks() -> list[tuple[str, str]]:
    return [
        (path.name, match.group(1))
        for path in documents()
        for match in JSON_FENCE.finditer(path.read_text(encoding="utf-8"))
    ]


def check_json_block(document: str, text: str) -> str:
    """Check one JSON block for what it is; return its kind. Parses; an extra config is one the Redis
    backend accepts; a trace loads and conforms."""
    import json

    from hicache_contracts.engine import check_operation, load_trace
    from hicache_reference.backends.redis_backend import RedisSettings

    value = json.loads(text)
    if value.get("format") == "hicache-trace/1":
        reports = [check_operation(operation) for operation in load_trace(text).operations]
        assert all(report.ok for report in reports), (document, [report.format_table() for report in reports])
        return "trace"
    if "redis_url" in value or "redis_cluster_nodes" in value:
        RedisSettings.from_extra_config(value)  # raises, naming the key, on a bad one
        return "redis extra config"
    return f"unchecked block of {document}"


@pytest.mark.clause("BE-1", "PFX-2", "CTL-5")
def test_every_json_block_of_the_guides_is_what_it_says() -> None:
    kinds = [check_json_block(document, text) for document, text in json_blocks()]
    assert len(kinds) >= 4 and sorted(set(kinds)) == ["redis extra config", "trace"], kinds


@pytest.mark.parametrize(
    "old, new",
    [
        ('"tokens": 64}\n      ]', '"tokens": 32}\n      ]'),  # a final ack that disagrees with progress
        ('"result": 2},\n        {"index": 1', '"result": 2,},\n        {"index": 1'),  # not JSON
    ],
    ids=["final-ack", "not-json"],
)
def test_a_broken_trace_block_is_caught(old: str, new: str) -> None:
    (text,) = [text for document, text in json_blocks() if '"hicache-trace/1"' in text]
    assert old in text
    with pytest.raises((AssertionError, ValueError)):
        check_json_block("engines.md", text.replace(old, new))


def test_a_bad_extra_config_block_is_caught() -> None:
    with pytest.raises(ValueError):
        check_json_block("distributed.md", '{"redis_url": "redis://10.0.0.5:6379/0", "socket_timeout": "2 s"}')


def test_the_index_names_every_level_of_the_registry() -> None:
    """docs/index.md's sentence on levels names each level of ``hicache_spec.LEVELS`` and no other."""
    from hicache_spec import LEVELS

    text = (PROJECT / "docs" / "index.md").read_text()
    sentence = text[text.index("a *level*") : text.index("a *role*")]
    named = re.findall(r"`([a-z0-9]+)`", sentence)
    assert sorted(named) == sorted(LEVELS), f"docs/index.md names levels {named}; the registry has {list(LEVELS)}"
