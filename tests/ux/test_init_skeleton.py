"""``hicache-conform init NAME``: the skeleton a vendor starts from, run through the suite.

Scenario: ``init my_store`` in a scratch directory; the skeleton as written,
and the skeleton with its five storage calls filled in with a dict (a few
lines, as a vendor would write their client calls).
Expected: the unfilled skeleton builds and gets verdicts (failures, not a
crash); the filled one passes every clause of core, v1, v2 and namespacing
the suite checks; a bad name or an existing file is refused and nothing is
written.
Why it matters: a vendor's first green run should take minutes, not a
reading of the whole contract.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from hicache_contracts.cli import main
from hicache_contracts.conformance import BackendFactory, SuiteOptions, run_suite
from hicache_contracts.scaffold import render_skeleton

FILLED_STORAGE_CALLS = """    # ---------------------------------------------------------------- storage calls: a dict all instances share
    def connect(self, extra_config):
        self.objects = OBJECTS.setdefault(extra_config.get("store", "default"), {})

    def store(self, name, data):
        self.objects[name] = data
        return True

    def fetch(self, name):
        return self.objects.get(name)

    def contains(self, name):
        return name in self.objects

    def delete_namespace(self, prefix):
        for name in [name for name in self.objects if name.startswith(prefix)]:
            del self.objects[name]


OBJECTS: dict = {}
"""
"""What a vendor writes: the skeleton's storage section, filled in (the only lines changed)."""


def load_module(path: Path):
    """Import the module at ``path`` under its file name."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def fill_in(path: Path) -> Path:
    """Replace the skeleton's storage section with FILLED_STORAGE_CALLS; return the new module's path."""
    text = path.read_text()
    marker = "    # ---------------------------------------------------------------- storage calls: fill these in"
    assert marker in text
    filled = path.with_name(f"filled_{path.name}")
    filled.write_text(text[: text.index(marker)] + FILLED_STORAGE_CALLS)
    return filled


def suite(backend: type, levels: tuple[str, ...] = ("core", "v1", "v2", "namespacing")):
    return run_suite(
        BackendFactory(backend, {"store": f"init-{id(backend)}"}), SuiteOptions(profile="smoke", seed=0, levels=levels)
    )


@pytest.mark.clause(
    "BE-14", "BE-15", "BE-16", "BE-17", "BE-19", "BE-21", "BE-22", "HYB-6", "HYB-7", "HYB-8", "NS-1", "NS-5", "NS-8"
)
def test_the_filled_skeleton_passes_core_v1_v2_and_namespacing(tmp_path: Path, capsys) -> None:
    assert main(["init", "my_store", "--directory", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'my_store.py'}" in capsys.readouterr().out
    module = load_module(fill_in(tmp_path / "my_store.py"))
    report = suite(module.MyStore)
    (section,) = report.sections
    failed = [verdict.clause_id for verdict in section.clauses if verdict.status == "fail"]
    assert report.exit_code == 0 and failed == [], report.render_text(color=False)
    passed = {verdict.clause_id for verdict in section.clauses if verdict.status == "pass"}
    assert {"BE-2", "BE-11", "BE-14", "BE-15", "BE-16", "BE-17", "NS-1", "NS-5", "NS-8"} <= passed
    assert {"BE-19", "BE-21", "BE-22", "BE-26", "HYB-6", "HYB-7", "HYB-8"} <= passed
    assert {level.level for level in section.levels if level.claimed} == {"core", "v1", "v2", "namespacing"}


@pytest.mark.clause("BE-10", "BE-14")
def test_the_unfilled_skeleton_builds_and_gets_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "bare_store.py"
    path.write_text(render_skeleton("bare_store"))
    report = suite(load_module(path).BareStore)
    (section,) = report.sections
    statuses = {verdict.clause_id: verdict.status for verdict in section.clauses}
    assert report.exit_code == 1
    assert statuses["BE-14"] == "pass"  # it builds, and its results have the right shape
    assert statuses["BE-10"] == "fail"  # but every write is refused: store() is not filled in
    assert "the backend could not be built" not in report.render_text(color=False)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["init", "my-store"],
            "hicache-conform init: init NAME: must be a Python module name, such as my_store (got 'my-store')",
        ),
        (
            ["init", "my_store", "--class", "class"],
            "hicache-conform init: init --class: must be a Python class name, such as MyStore (got 'class')",
        ),
    ],
)
def test_a_bad_name_is_refused_and_nothing_is_written(tmp_path: Path, arguments: list, message: str, capsys) -> None:
    assert main([*arguments, "--directory", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == message
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_never_overwritten(tmp_path: Path, capsys) -> None:
    (tmp_path / "my_store.py").write_text("# mine\n")
    assert main(["init", "my_store", "--directory", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"hicache-conform init: init NAME: {tmp_path / 'my_store.py'} must "
        "not exist yet; nothing was written (got 'my_store')"
    )
    assert (tmp_path / "my_store.py").read_text() == "# mine\n"


@pytest.mark.clause("BE-21", "BE-22", "BE-26")
@pytest.mark.parametrize(
    "mutation, clause_ids",
    [
        (
            (
                "restorable = [n for n in restorable if n in allowed]",  # each pool's largest hit, then the minimum
                "restorable = list(range(1, min(len(restorable), allowed[-1] if allowed else 0) + 1))",
            ),
            {"BE-21", "BE-26"},
        ),
        (
            (
                "results[transfer.name] = [False] * len(keys) if indices is None else self.read_pages(pool, keys, indices)",
                "results[transfer.name] = [True] * len(keys)",
            ),
            {"BE-22"},
        ),  # sidecar reads claimed, none done
    ],
    ids=["min-of-maxima", "claims-reads"],
)
def test_the_v2_checks_catch_a_planted_skeleton(tmp_path: Path, mutation: tuple[str, str], clause_ids: set) -> None:
    path = tmp_path / "my_store.py"
    path.write_text(render_skeleton("my_store"))
    filled = fill_in(path)
    text = filled.read_text()
    assert mutation[0] in text
    planted = filled.with_name("planted_store.py")
    planted.write_text(text.replace(mutation[0], mutation[1]))
    report = suite(load_module(planted).MyStore)
    failed = {verdict.clause_id for verdict in report.sections[0].clauses if verdict.status == "fail"}
    assert clause_ids & failed, report.render_text(color=False)
