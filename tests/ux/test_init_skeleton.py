"""``hicache-conform init NAME``: the skeleton a vendor starts from, run through the suite.

Scenario: ``init my_store`` in a scratch directory; the skeleton as written,
and the skeleton with its five storage calls filled in with a dict (a few
lines, as a vendor would write their client calls), run with the levels it
declares and nothing more.
Expected: the unfilled skeleton builds and gets verdicts (failures, not a
crash); the filled one declares every level a backend of its shape can pass
(prefix, concurrency and robustness included) and passes every clause of
them the suite checks; filled in naively (a prefix list extended in place, a
second host pool swapped in) it fails the clause it broke; a bad name or an
existing file is refused and nothing is written; the skeleton, the command's
help, the README and the vendor guide count the same storage calls.
Why it matters: a vendor's first green run should take minutes, not a
reading of the whole contract.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from hicache_contracts.cli import main
from hicache_contracts.conformance import BackendFactory, SuiteOptions, level_clause_ids, run_suite
from hicache_contracts.scaffold import SKELETON_LEVELS, STORAGE_CALLS, render_skeleton

PROJECT = Path(__file__).resolve().parents[2]

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
    assert spec is not None and spec.loader is not None, path
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


def suite(backend: type, levels: tuple[str, ...] | None = None):
    """The smoke suite on ``backend``, with the levels it declares unless ``levels`` are given."""
    return run_suite(
        BackendFactory(backend, {"store": f"init-{id(backend)}"}), SuiteOptions(profile="smoke", seed=0, levels=levels)
    )


@pytest.mark.clause(
    "BE-9",
    "BE-13",
    "BE-14",
    "BE-15",
    "BE-16",
    "BE-17",
    "BE-19",
    "BE-20",
    "BE-21",
    "BE-22",
    "BE-23",
    "BE-28",
    "HYB-6",
    "HYB-7",
    "HYB-8",
    "NS-1",
    "NS-5",
    "NS-8",
    "PFX-1",
    "PFX-6",
)
def test_the_filled_skeleton_passes_every_level_it_declares(tmp_path: Path, capsys) -> None:
    assert main(["init", "my_store", "--directory", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'my_store.py'}" in capsys.readouterr().out
    module = load_module(fill_in(tmp_path / "my_store.py"))
    assert module.MyStore.hicache_levels == SKELETON_LEVELS
    assert {"prefix", "concurrency", "robustness"} <= set(SKELETON_LEVELS)
    report = suite(module.MyStore)  # the levels it declares: nothing more filled in, nothing passed on the side
    (section,) = report.sections
    failed = [verdict.clause_id for verdict in section.clauses if verdict.status == "fail"]
    assert report.exit_code == 0 and failed == [], report.render_text(color=False)
    passed = {verdict.clause_id for verdict in section.clauses if verdict.status == "pass"}
    assert {"BE-2", "BE-11", "BE-14", "BE-15", "BE-16", "BE-17", "NS-1", "NS-5", "NS-8"} <= passed
    assert {"BE-19", "BE-21", "BE-22", "BE-26", "HYB-6", "HYB-7", "HYB-8"} <= passed
    assert {"BE-9", "BE-13", "PFX-1", "PFX-6", "BE-23", "BE-20", "BE-28"} <= passed
    assert {level.level for level in section.levels if level.claimed} == set(SKELETON_LEVELS)
    # Nothing of a declared level is skipped for the skeleton's sake: BE-27, BE-29 and BE-32 do not apply (it has
    # no on_host_pools_registered, close or describe_l3_object_layout), and a clause no check covers yet is
    # skipped for every backend.
    held = {clause_id for level in SKELETON_LEVELS for clause_id in level_clause_ids(level)}
    skipped = {
        verdict.clause_id
        for verdict in section.clauses
        if verdict.status == "skip" and verdict.clause_id in held and verdict.reason != "no check covers it"
    }
    assert skipped <= {"BE-27", "BE-29", "BE-32"}, report.render_text(color=False)


def test_every_text_counts_the_same_storage_calls() -> None:
    listed = ", ".join(f"`{name}`" for name in STORAGE_CALLS[:-1]) + f" and `{STORAGE_CALLS[-1]}`"
    skeleton = render_skeleton("my_store")
    assert f"five storage calls at the end of the file ({', '.join(STORAGE_CALLS)})" in " ".join(skeleton.split())
    assert all(f"    def {name}(self" in skeleton for name in STORAGE_CALLS) and len(STORAGE_CALLS) == 5
    assert "five storage calls" in " ".join(main_help("init").split())
    for document in ("README.md", "docs/vendors.md"):
        text = " ".join((PROJECT / document).read_text().split())
        assert "five storage calls" in text, document
        assert listed.replace(" and ", ", ") in text.replace(" and ", ", ").replace("— ", ""), document
        assert not any(word in text for word in ("four storage calls", "four methods")), document


def main_help(command: str) -> str:
    """The description ``hicache-conform COMMAND --help`` prints."""
    from hicache_contracts.cli import build_parser

    parser = build_parser()
    action = next(action for action in parser._actions if getattr(action, "choices", None))
    choices: Any = action.choices  # the subcommands' parsers, by name
    return choices[command].description


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


@pytest.mark.clause("BE-21", "BE-22", "BE-26", "BE-28", "PFX-6")
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
        (
            (
                '        self.keep_pool("kv", mem_pool_host)\n',
                '        self.pools["kv"] = mem_pool_host  # a second pool silently replaces the first\n',
            ),
            {"BE-28"},
        ),
        (
            (
                '        """The leading run of stored keys, in pages (BE-2, BE-3); extra_info may be None (BE-8)."""\n',
                '        """The leading run of stored keys, naively noting the keys in the prefix list."""\n'
                "        if extra_info is not None and extra_info.prefix_keys is not None:\n"
                "            extra_info.prefix_keys += keys  # in place: the engine's list changes (PFX-6)\n",
            ),
            {"PFX-6"},
        ),
    ],
    ids=["min-of-maxima", "claims-reads", "swaps-a-pool", "extends-the-prefix-in-place"],
)
def test_the_checks_catch_a_skeleton_filled_in_naively(
    tmp_path: Path, mutation: tuple[str, str], clause_ids: set
) -> None:
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
