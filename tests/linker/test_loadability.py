"""Loadability against every pinned release's linker interface, without SGLang.

Scenario: classes written to 0.5.21's, 0.5.22's and 0.5.23's interfaces, the reference linkers,
and the CLI on a 0.5.21-style class.
Expected: each release's verdict names every missing method (LNK-1, LNK-2), an offload without
session_id (LNK-3) and a constructor without the loader's keywords (LNK-4), one line each; the
CLI prints them and exits 1 with no traceback.
Why it matters: 0.5.23's factory refuses a linker written to another release at server start; a
vendor should learn which methods and keywords are missing before that.
"""

from __future__ import annotations

import pytest

from hicache_contracts.linker.interface import check_loadability
from hicache_contracts.linker.suite import main
from hicache_reference.linker import FileLinker, MemoryLinker
from hicache_spec.releases import SGLANG_RELEASES
from tests.linker.other_interfaces import Linker0521, Linker0522, Linker0523


def problems(cls: type, release: str) -> dict[str, str]:
    verdict = check_loadability(cls, release)
    return {clause_id: text for clause_id, text in verdict.problems}


@pytest.mark.clause("LNK-1", "LNK-2", "LNK-3", "LNK-4")
@pytest.mark.parametrize("release", SGLANG_RELEASES)
@pytest.mark.parametrize("cls", [MemoryLinker, FileLinker])
def test_reference_linkers_load_on_every_release(cls: type, release: str) -> None:
    assert check_loadability(cls, release).ok


@pytest.mark.clause("LNK-1", "LNK-2")
def test_a_0521_linker_is_named_its_missing_method_on_0522_and_later() -> None:
    assert problems(Linker0521, "0.5.20") == {} and problems(Linker0521, "0.5.21") == {}
    for release in ("0.5.22", "0.5.23"):
        assert problems(Linker0521, release)["LNK-2"] == f"missing methods for {release}: finish_layer_wise_loading"


@pytest.mark.clause("LNK-1")
def test_a_0522_linker_is_named_the_completed_load_methods_on_0520() -> None:
    assert (
        problems(Linker0522, "0.5.20")["LNK-1"] == "missing methods for 0.5.20: num_completed_loads, pop_completed_load"
    )
    assert problems(Linker0522, "0.5.22") == {}


@pytest.mark.clause("LNK-3", "LNK-4")
def test_0523_names_the_session_id_and_the_loader_keywords() -> None:
    found = problems(Linker0522, "0.5.23")
    assert "offload(transfers, session_id=None) is refused" in found["LNK-3"] and "session_id" in found["LNK-3"]
    assert "forward_stream" in found["LNK-4"]
    assert "forward_stream" in problems(Linker0521, "0.5.23")["LNK-4"]
    assert problems(Linker0523, "0.5.23") == {}


@pytest.mark.clause("LNK-2")
def test_cli_names_each_gap_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--linker", "tests.linker.other_interfaces:Linker0521", "--release", "0.5.23", "--checks", ""])
    out, err = capsys.readouterr()
    assert status == 1
    assert "FAIL LNK-2   interface_0.5.23: missing methods for 0.5.23: finish_layer_wise_loading" in out
    assert "FAIL LNK-4   interface_0.5.23: constructor refuses" in out
    assert "PASS LNK-1   interface_0.5.21 (not counted: another release)" in out
    assert "Traceback" not in out + err


def test_cli_refuses_a_bad_linker_argument(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="--linker: expected module:Name"):
        main(["--linker", "nocolon"])
    assert main([]) == 2
    assert main(["--linker", "tests.linker.other_interfaces:Linker0523", "--extra-config", "[1]"]) == 2
    assert "--extra-config: must be a JSON object" in capsys.readouterr().err


def test_json_report(tmp_path) -> None:
    import json

    path = tmp_path / "report.json"
    assert main(["--linker", "hicache_reference.linker:MemoryLinker", "--json", str(path)]) == 0
    report = json.loads(path.read_text())  # the backend suite's report form, one linker section
    (section,) = report["sections"]
    assert report["passed"] and section["options"]["release"] == SGLANG_RELEASES[-1]
    assert section["options"]["mode"] == "direct"
    assert {verdict["id"] for verdict in section["clauses"]} >= {"LNK-2", "LNK-7", "LNK-21"}


def test_bad_input_names_the_field_and_the_rule(tmp_path) -> None:
    from hicache_contracts.linker.harness import fresh_setup, linker_arguments
    from hicache_contracts.linker.suite import run_linker_suite

    with pytest.raises(ValueError, match=r"release: not a pinned release \(got '0.6.0'"):
        run_linker_suite(MemoryLinker, release="0.6.0")
    with pytest.raises(ValueError, match="mode: must be auto, wrapper or direct"):
        run_linker_suite(MemoryLinker, mode="fast")
    with pytest.raises(ValueError, match="linker_cls: give a linker class or a factory"):
        run_linker_suite()
    server_args, params, _ = linker_arguments(fresh_setup(tmp_path))
    with pytest.raises(ValueError, match=r"linker_extra_config.tp_rank: must be a non-negative int \(got -1\)"):
        MemoryLinker(server_args, params, components=set(), extra_config={"tp_rank": -1})
    with pytest.raises(ValueError, match="linker_extra_config.path: FileLinker needs a folder"):
        FileLinker(server_args, params, components=set(), extra_config={})
    assert not list(tmp_path.iterdir())  # nothing written
