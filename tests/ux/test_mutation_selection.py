"""Which mutants a run of scripts/mutation.py judges, so a long run can be split and picked up again.

Scenario: a target's mutants (here four made by hand, in the script's order) selected with ``--only``, with
``--rerun`` or ``--resume`` of an earlier ``--out`` file, and with ``--sample``.
Expected: ``--only`` keeps the ids holding its text; ``--rerun`` keeps the file's survivors and ``--resume`` the
mutants it lists as not run in its budget, each in the target's order; a file without that list stops the run
with a message naming it; a sample is the same for the same seed.
Why it matters: the whole checks target takes hours, so it runs one file at a time under a budget, and the part a
budget cut off must be runnable later without judging again what was judged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import mutation  # noqa: E402


def args(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"only": "", "rerun": "", "resume": "", "sample": 0, "seed": 0, **given})


def mutants() -> list[mutation.Mutant]:
    return [
        mutation.Mutant("a.py", "NumberReplacer", 0, 3, "f", ident="a.py::f::NumberReplacer::x = 1#1"),
        mutation.Mutant("a.py", "NumberReplacer", 1, 3, "f", ident="a.py::f::NumberReplacer::x = 1#2"),
        mutation.Mutant("b.py", "AddNot", 0, 7, "g", ident="b.py::g::AddNot::if y:#1"),
        mutation.Mutant("b.py", "AddNot", 0, 9, "h", ident="b.py::h::AddNot::if z:#1"),
    ]


def ids(chosen: list[mutation.Mutant]) -> list[str]:
    return [m.ident for m in chosen]


def test_only_keeps_the_ids_holding_its_text() -> None:
    assert ids(mutation.select(mutants(), args(only="b.py"))) == ids(mutants())[2:]


def test_resume_runs_only_what_the_budget_left_and_rerun_only_the_survivors(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier.json"
    every = ids(mutants())
    earlier.write_text(
        json.dumps({"survivors": [{"id": every[0], "line": 3, "covered": True}], "not_run_ids": every[:1:-1]})
    )
    assert ids(mutation.select(mutants(), args(resume=str(earlier)))) == every[2:]
    assert ids(mutation.select(mutants(), args(rerun=str(earlier)))) == every[:1]
    assert ids(mutation.select(mutants(), args(resume=str(earlier), only="h::"))) == every[3:]


def test_an_earlier_file_without_the_list_asked_for_stops_the_run(tmp_path: Path) -> None:
    older = tmp_path / "older.json"
    older.write_text(json.dumps({"survivors": []}))
    with pytest.raises(SystemExit, match=r"older\.json lists no not_run_ids"):
        mutation.select(mutants(), args(resume=str(older)))


def test_a_sample_is_the_same_for_the_same_seed() -> None:
    first = ids(mutation.select(mutants(), args(sample=2, seed=5)))
    assert len(first) == 2 and set(first) <= set(ids(mutants()))
    assert ids(mutation.select(mutants(), args(sample=2, seed=5))) == first


def test_two_lines_that_show_alike_give_their_mutants_distinct_ids(tmp_path, monkeypatch) -> None:
    """An id shows the first 60 characters of its line: two lines alike that far still name each mutant once, the
    occurrences counting on across both (a shared id would judge two mutants as one)."""
    head = "values = [" + "1, " * 20
    (tmp_path / "m.py").write_text(f"def f():\n    {head}4]\n    {head}5]\n")
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    made = [m.ident for m in mutation.enumerate_mutants("m.py") if "NumberReplacer" in m.ident]
    assert len(made) == len(set(made)) == 2 * 2 * 21, made[:4]
