"""``hicache-conform init --linker NAME``: the linker skeleton a vendor starts from, run through the linker suite.

Scenario: ``init --linker my_linker`` in a scratch directory; the skeleton as written, and the
skeleton with its five storage calls filled in with a dict (a few lines, as a vendor would write
their client calls), run through the linker suite against every pinned release's interface.
Expected: the filled one passes every check whose clause holds for the release, skipping only
checks the suite skips for every linker in this process (a clause that does not hold for the
release; the 0.5.23 factory check without that release imported); the unfilled one builds and
gets verdicts (failures, not a crash); filled in naively (pages written inside load(), a reset
that does not wait for a slow store) it fails the check of the rule it broke; a bad name or an
existing file is refused and nothing is written; the skeleton, the command's output and the
guide name the same storage calls.
Why it matters: a vendor's first conforming linker should take minutes, not a reading of every
LNK clause.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from hicache_contracts.cli import main
from hicache_contracts.linker.checks import CHECKS
from hicache_contracts.linker.scaffold import LINKER_STORAGE_CALLS, render_linker_skeleton
from hicache_contracts.linker.suite import FAIL, PASS, SKIP, run_linker_suite
from hicache_contracts.scaffold import class_name_for
from hicache_spec.releases import SGLANG_RELEASES

PROJECT = Path(__file__).resolve().parents[2]
MARKER = "    # ---------------------------------------------------------------- storage calls: fill these in"

FILLED_STORAGE_CALLS = """    # ---------------------------------------------------------------- storage calls: a dict all linkers share
    def connect(self, extra_config):
        self.objects = OBJECTS.setdefault(extra_config.get("store", "default"), {})

    def put_page(self, name, layers):
        self.objects[name] = tuple(layers)
        return True

    def get_page(self, name):
        return self.objects.get(name)

    def has_page(self, name):
        return name in self.objects

    def disconnect(self):
        pass


OBJECTS: dict = {}
"""
"""What a vendor writes: the linker skeleton's storage section, filled in (the only lines changed)."""


def load_module(path: Path):
    """Import the module at ``path`` under its file name."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def filled_source(module_name: str) -> str:
    text = render_linker_skeleton(module_name)
    assert MARKER in text
    return text[: text.index(MARKER)] + FILLED_STORAGE_CALLS


def accepted_skip(row, release: str) -> bool:
    """A skip the suite gives every linker in this process, whatever it does."""
    if row.check == "release_factory_loads":
        return row.detail.startswith("needs SGLang 0.5.23 imported")
    return row.detail == f"{row.clause} does not hold for {release}"


@pytest.mark.clause(*sorted({check.clause for check in CHECKS}, key=lambda c: int(c.split("-")[1])))
@pytest.mark.parametrize("release", SGLANG_RELEASES)
def test_the_filled_linker_skeleton_passes_the_linker_suite(tmp_path: Path, release: str, capsys) -> None:
    module_name = f"my_linker_{release.replace('.', '_')}"
    assert main(["init", "--linker", module_name, "--directory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (
        f"wrote {tmp_path / (module_name + '.py')}" in out and f"hicache-conform linker --linker {module_name}:" in out
    )
    written = tmp_path / f"{module_name}.py"
    assert written.read_text() == render_linker_skeleton(module_name)
    filled = tmp_path / f"filled_{module_name}.py"
    filled.write_text(filled_source(module_name))
    module = load_module(filled)
    linker_cls = getattr(module, class_name_for(module_name))
    assert module._Base is getattr(module._sglang_linker, "UnifiedCacheLinker", object)
    report = run_linker_suite(linker_cls, release=release, mode="direct")
    assert report.ok, report.render()
    for row in report.results:
        if row.counted:
            assert row.status == PASS or (row.status == SKIP and accepted_skip(row, release)), report.render()
    assert all(report.result(check.name).status in (PASS, SKIP) for check in CHECKS)


@pytest.mark.clause("LNK-4")
def test_the_filled_linker_skeleton_loads_through_0_5_23s_own_loader(tmp_path: Path) -> None:
    """In its own process: SGLang 0.5.23 imported, its wrapper driving, its dynamic factory building it."""
    from hicache_contracts.sglang_release import _unpacked, release_dir

    if not _unpacked(release_dir("0.5.23")):
        pytest.skip("needs SGLang 0.5.23's wheel cached (scripts/setup.sh --sglang)")
    (tmp_path / "wired_linker.py").write_text(filled_source("wired_linker"))
    command = [sys.executable, "-m", "hicache_contracts.cli", "linker", "--linker", "wired_linker:WiredLinker"]
    done = subprocess.run(
        [*command, "--sglang-version", "0.5.23"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "driven wrapper" in done.stdout and done.stdout.rstrip().endswith(": conforms"), done.stdout
    assert "PASS LNK-4   release_factory_loads" in done.stdout, done.stdout


@pytest.mark.clause("LNK-16")
def test_the_unfilled_linker_skeleton_builds_and_gets_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "bare_linker.py"
    path.write_text(render_linker_skeleton("bare_linker"))
    report = run_linker_suite(load_module(path).BareLinker, release="0.5.23", mode="direct")
    statuses = {row.check: row.status for row in report.results if row.counted}
    assert not report.ok
    assert statuses["interface_0.5.23"] == PASS and statuses["layer_done_counter"] == PASS
    assert statuses["offload_results_in_order"] == FAIL  # put_page is not filled in: every offload is False


SLOW_STORE = (
    "    def get_page(self, name):\n        return self.objects.get(name)\n",
    "    def get_page(self, name):\n        time.sleep(0.004)  # a slow store\n        return self.objects.get(name)\n",
)


@pytest.mark.clause("LNK-9", "LNK-17")
@pytest.mark.parametrize(
    "mutations, check",
    [
        (
            [
                (
                    "        self.pending[rid] = usable  # LNK-9: queued only; nothing is read or written before the "
                    "batch starts\n",
                    "        try:  # the stored pages written at once\n"
                    "            for pool, slots, layers in self.fetch_pages(usable):\n"
                    "                for layer in range(pool.num_layers):\n"
                    "                    pool.write_slots(layer, slots, layers[layer])\n"
                    "        except KeyError:\n"
                    "            pass\n"
                    "        self.pending[rid] = usable\n",
                )
            ],
            "load_only_queues",
        ),
        (
            [
                ("        self.loads.join()  # LNK-17: nothing begun before reset writes after it returns\n", ""),
                (
                    "        self.offloads.join()\n        with self.results_lock:\n",
                    "        with self.results_lock:\n",
                ),
                ("import logging\n", "import logging\nimport time\n"),
                SLOW_STORE,
            ],
            "reset_quiesces",
        ),
    ],
    ids=["loads-inside-load", "reset-does-not-wait"],
)
def test_the_suite_catches_a_linker_skeleton_filled_in_naively(
    tmp_path: Path, mutations: list[tuple[str, str]], check: str
) -> None:
    text = filled_source("planted_linker")
    for old, new in mutations:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "planted_linker.py"
    path.write_text(text)
    report = run_linker_suite(load_module(path).PlantedLinker, release="0.5.23", mode="direct")
    failed = {row.check for row in report.results if row.status == FAIL and row.counted}
    assert failed == {check}, report.render()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["init", "--linker", "my-linker"],
            "hicache-conform init: init NAME: must be a Python module name, such as my_linker (got 'my-linker')",
        ),
        (
            ["init", "--linker", "my_linker", "--class", "class"],
            "hicache-conform init: init --class: must be a Python class name, such as MyLinker (got 'class')",
        ),
    ],
)
def test_a_bad_name_is_refused_and_nothing_is_written(tmp_path: Path, arguments: list, message: str, capsys) -> None:
    assert main([*arguments, "--directory", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == message
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_never_overwritten(tmp_path: Path, capsys) -> None:
    (tmp_path / "my_linker.py").write_text("# mine\n")
    assert main(["init", "--linker", "my_linker", "--directory", str(tmp_path)]) == 2
    assert "must not exist yet; nothing was written" in capsys.readouterr().err
    assert (tmp_path / "my_linker.py").read_text() == "# mine\n"


def test_every_text_names_the_same_storage_calls(capsys) -> None:
    listed = ", ".join(LINKER_STORAGE_CALLS)
    skeleton = render_linker_skeleton("my_linker")
    assert f"five storage calls at the end of the file ({listed})" in " ".join(skeleton.split())
    assert all(f"    def {name}(self" in skeleton for name in LINKER_STORAGE_CALLS)
    guide = " ".join((PROJECT / "docs" / "linkers.md").read_text().split())
    assert "hicache-conform init --linker" in guide
    assert ", ".join(f"`{name}`" for name in LINKER_STORAGE_CALLS) in guide
