"""Every contracted spec function has a planted variant, refuted by that function's own postcondition.

A function of ``spec/`` whose docstring carries PEP 316 ``pre:``/``post:``
lines is contracted. Each variant in ``planted_spec`` names the function it
plants (``plants: <function>``, its name starting with that function's), keeps
all of the function's ``pre:`` lines (it may add narrowing ones) and only the
function's own ``post:`` lines. On a known witness the variant breaks one of
those post lines while the real function keeps all of them; CrossHair finds
such inputs itself in ``.ci/crosshair_check.py``.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from tests.spec import planted_spec

ROOT = Path(__file__).resolve().parents[2]
CONDITION = re.compile(r"^\s*(pre|post)(\[[^\]]*\])?:\s*(.+?)\s*$")
PLANTS = re.compile(r"^\s*plants:\s*(\w+)\s*$", re.M)


def conditions(function) -> tuple[list[str], list[tuple[str, str]]]:
    """Return a function's pre expressions and its (mutation marker, post expression) pairs."""
    pre, post = [], []
    for line in (inspect.getdoc(function) or "").splitlines():
        match = CONDITION.match(line)
        if match and match.group(1) == "pre":
            pre.append(match.group(3))
        elif match:
            post.append((match.group(2) or "", match.group(3)))
    return pre, post


def contracted_spec_functions() -> dict[str, object]:
    """Every function defined in spec/ whose docstring has a pre: or post: line, by name."""
    found = {}
    for path in sorted((ROOT / "spec").glob("*.py")):
        module = importlib.import_module("hicache_spec" if path.stem == "__init__" else f"hicache_spec.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                docstring = ast.get_docstring(node) or ""
                if any(CONDITION.match(line) for line in docstring.splitlines()):
                    found[node.name] = getattr(module, node.name)
    return found


def planted_variants() -> dict[str, object]:
    """Every function planted_spec defines, by name."""
    return {
        name: value
        for name, value in vars(planted_spec).items()
        if inspect.isfunction(value) and value.__module__ == planted_spec.__name__
    }


def planted_function(variant) -> str:
    (name,) = PLANTS.findall(inspect.getdoc(variant) or "")
    return name


# One input per variant on which it breaks a post line of the function it plants (found by CrossHair first).
WITNESSES: dict[str, tuple] = {
    "extend_prefix_in_place": ([], ["c"]),
    "extra_info_forms_every_release_always": ("batch_get_v2", "0.5.21"),
    "extend_prefix_only_when_non_empty": ((), ("a",)),
    "extend_prefix_collapsing_empty": ((), ()),
    "count_leading_run_off_by_one": ((False, False),),
    "compute_pool_hit_window_misplaced": ("trailing_pages", 0, (True, False, False), 2),
    "fold_pool_query_min_of_maxima": (
        (True, True),
        (("indexer", "all_pages", 0, (True, False)), ("swa", "trailing_pages", 1, (False, True))),
    ),
    "plan_sidecar_groups_operation_prefix": ((), ("a",), (0, 0, 1)),
    "plan_batches_unclamped_end": (1, 2),
    "confirmed_pages_unchecked_length": ([True], 0),
    "confirmed_hit_unbounded": (1, 0),
    "is_page_key_any_length": ("",),
    "compute_namespace_seed_empty_as_absent": (None, ""),
    "compute_page_words_bigram_without_lookahead": ((0,), 0),
    "compute_page_key_raw_digest": ((1, 2),),
    "compute_key_chain_keys_partial_page": ((0,), 2),
    "compute_restorable_lengths_zero_window": ("trailing_pages", 0, (False,), 1),
    "fold_pool_hits_zero_entries": ((True,), (("swa", "trailing_pages", 0, (False,)),)),
    "count_pool_hits_drops_misses": ((("swa", ()),),),
    "compute_trailing_window_unclamped": (0, 0),
    "prefix_before_including_first_key": ((), ("a", "b", "c"), 1),
    "expected_prefixes_after_own_batch": ((), tuple("abcdefg"), 3),
    "compute_prefetch_acks_zero_after_termination": ((4, 4), (4,), 1),
    "compute_backup_progress_skipping_failures": ((4, 4), (False, True), 1),
    "agree_hit_pages_maximum": ((3, 2),),
    "agree_pool_boundaries_first_rank_wins": (((("swa", 0),), ()),),
    "compute_restorable_flags_keeps_lengths_above_hit": (1, (2,), 2),
    "agree_restorable_hit_pages_min_of_maxima": (((True, False, True), (True, True, False)),),
    "compute_effective_threshold_zero_only": (1, 4),
    "is_prefetch_span_long_enough_unaligned": (3, 3, 2),
    "is_prefetch_worth_it_strict": (256, 256),
    "compute_prefetch_timeout_caps_base_only": (1024, 1.0, 0.25, 1.0),
    "is_count_accepting_bool": (True,),
    "is_flag_accepting_ints": (1,),
    "is_storage_writer_tp_rank_zero": (True, 1, 1),
    "writes_pool_writer_only": ("mamba", False),
    "compute_non_writer_backup_tokens_vacuous": ((), 1, 1),
    "check_dcp_config_mla_first": (False, 0, 1, 0, 1, None),
    "linker_restorable_lengths_kv_only": ((True, False), ()),
    "judge_lookup_ignoring_missing": ((), (1,), 1),
    "intersect_rank_lookups_max_of_minima": (((2,), (1, 3)), 3),
}


def broken_posts(function, arguments: tuple) -> list[str]:
    """Call ``function`` on ``arguments`` (its pre lines must hold) and return the post lines it breaks."""
    bound = inspect.signature(function).bind(*copy.deepcopy(arguments))
    bound.apply_defaults()
    before = copy.deepcopy(dict(bound.arguments))
    namespace = dict(function.__globals__)
    pre, post = conditions(function)
    for expression in pre:
        assert eval(expression, {**namespace, **bound.arguments}), f"{function.__name__}: pre {expression!r} fails"
    result = function(*bound.args, **bound.kwargs)
    broken = []
    for marker, expression in post:
        names = {**namespace, **bound.arguments, "__return__": result}  # one scope: generators see the names
        if not eval(expression, names) or (marker == "[]" and dict(bound.arguments) != before):
            broken.append(expression)
    return broken


def test_every_contracted_spec_function_has_a_planted_variant():
    contracted = contracted_spec_functions()
    assert len(contracted) >= 34, sorted(contracted)
    planted = {planted_function(variant) for variant in planted_variants().values()}
    assert sorted(set(contracted) - planted) == []


@pytest.mark.parametrize("name", sorted(planted_variants()))
def test_variant_names_its_function_and_keeps_its_contracts(name):
    variant = planted_variants()[name]
    target = planted_function(variant)
    contracted = contracted_spec_functions()
    assert target in contracted, f"{name} plants {target!r}, not a contracted spec function"
    assert name.startswith(target + "_")
    real_pre, real_post = conditions(contracted[target])
    pre, post = conditions(variant)
    assert [line for line in real_pre if line not in pre] == [], "a variant keeps every pre line of its function"
    own = {expression for _, expression in real_post}
    assert post and [expression for _, expression in post if expression not in own] == []


@pytest.mark.parametrize("name", sorted(planted_variants()))
def test_variant_breaks_its_functions_post_where_the_function_keeps_it(name):
    variant = planted_variants()[name]
    real = contracted_spec_functions()[planted_function(variant)]
    assert name in WITNESSES, f"{name} has no witness"
    assert broken_posts(variant, WITNESSES[name]), f"{name} keeps every post line on its witness"
    # The same input, within the real function's domain, keeps every post line of the real function.
    assert broken_posts(real, WITNESSES[name]) == []


def test_a_new_contracted_function_without_a_variant_is_found(monkeypatch):
    """The mapping check itself: a contracted spec function no variant plants is reported."""
    variants = planted_variants()
    kept = {name: value for name, value in variants.items() if planted_function(value) != "compute_trailing_window"}
    monkeypatch.setattr(__import__(__name__, fromlist=["planted_variants"]), "planted_variants", lambda: kept)
    with pytest.raises(AssertionError, match="compute_trailing_window"):
        test_every_contracted_spec_function_has_a_planted_variant()


def test_crosshair_check_counts_only_a_post_line_made_false():
    """``.ci/crosshair_check.py`` credits a variant only when one of its post lines is false (or post[] broken)."""
    loader = importlib.util.spec_from_file_location("crosshair_check", ROOT / ".ci" / "crosshair_check.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    text = (ROOT / "tests" / "spec" / "planted_spec.py").read_text(encoding="utf-8")
    lines = text.splitlines()
    functions = [node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)]
    fold = next(node for node in functions if node.name == "fold_pool_query_min_of_maxima")
    post = next(n for n in range(fold.lineno, fold.end_lineno + 1) if lines[n - 1].strip().startswith("post:"))
    pre = next(n for n in range(fold.lineno, fold.end_lineno + 1) if lines[n - 1].strip().startswith("pre:"))

    def refuted(line: int, message: str) -> set:
        return module.refuting_functions(functions, lines, f"/x/tests/spec/planted_spec.py:{line}: error: {message}\n")

    assert refuted(post, "false when calling f(...)") == {fold.name}
    assert refuted(post, "Error while evaluating post condition: NameError: name 'x' is not defined") == set()
    assert refuted(pre, "false when calling f(...)") == set()
    assert refuted(fold.lineno, 'Argument "prefix" is not marked as mutable, but changed') == {fold.name}
