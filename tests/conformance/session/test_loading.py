"""Loading a vendor's backend and its extra config, and the suite's options: clear errors for bad input.

Scenario: extra configs as JSON, @file in three formats, and malformed ones;
backend names that import or do not; options out of range.
Expected: good input loads; bad input raises ValueError naming the field and
the rule, with the value.
Why it matters: the first thing a vendor meets is the command line.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import BackendFactory, SuiteOptions, load_object, parse_extra_config, parse_levels
from hicache_contracts.conformance import resolve_factory
from tests.conformance.correct_backend import CorrectBackend


@pytest.mark.clause("BE-1")
@pytest.mark.parametrize(
    "suffix, text",
    [
        (".json", '{"module_path": "tests.conformance.correct_backend", "class_name": "CorrectBackend", "n": 1}'),
        (".toml", 'module_path = "tests.conformance.correct_backend"\nclass_name = "CorrectBackend"\nn = 1\n'),
        (".yaml", "module_path: tests.conformance.correct_backend\nclass_name: CorrectBackend\nn: 1\n"),
    ],
)
def test_extra_config_files_load_and_name_the_backend(tmp_path, suffix: str, text: str) -> None:
    path = tmp_path / f"extra{suffix}"
    path.write_text(text)
    config = parse_extra_config(f"@{path}")
    assert config == {"module_path": "tests.conformance.correct_backend", "class_name": "CorrectBackend", "n": 1}
    factory = resolve_factory(None, config)
    assert factory.target is CorrectBackend and factory.extra_config == config
    assert factory.name == "tests.conformance.correct_backend:CorrectBackend"


@pytest.mark.clause("BE-1")
@pytest.mark.parametrize(
    "text, message",
    [
        ("[1, 2]", "--extra-config: must be an object (a dict of options) (got [1, 2])"),
        (
            "{nope",
            "--extra-config: must be a JSON object or @file (Expecting property name enclosed in double quotes) "
            "(got '{nope')",
        ),
        ("@/no/such/file.json", "--extra-config: must name an existing file after '@' (got '@/no/such/file.json')"),
    ],
)
def test_bad_extra_config_names_the_option_and_the_rule(text: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_extra_config(text)
    assert str(error.value) == message


@pytest.mark.clause("BE-1")
def test_backend_names_resolve_or_say_why_not() -> None:
    assert load_object("tests.conformance.correct_backend:CorrectBackend") is CorrectBackend
    assert load_object("tests.conformance.correct_backend.CorrectBackend") is CorrectBackend
    with pytest.raises(ValueError) as error:
        load_object("tests.conformance.correct_backend:Missing")
    assert str(error.value) == (
        "--backend: module 'tests.conformance.correct_backend' must define 'Missing' "
        "(got 'tests.conformance.correct_backend:Missing')"
    )
    with pytest.raises(ValueError) as error:
        resolve_factory(None, {"store": "x"})
    assert str(error.value) == (
        "--backend: must be given, or the extra config must hold module_path and class_name (got None)"
    )


@pytest.mark.clause("BE-1")
def test_factory_builds_the_sglang_way() -> None:
    calls = []

    def target(storage_config, kwargs):
        calls.append((storage_config, kwargs))
        return object()

    BackendFactory(target, {"a": 1}).build("config")
    assert calls == [("config", {})]


@pytest.mark.clause("BE-1")
@pytest.mark.parametrize(
    "options, message",
    [
        (dict(page_size=0), "SuiteOptions.page_size: must be an int >= 1 (got 0)"),
        (dict(layout="rows"), "SuiteOptions.layout: must be one of ['layer_first', 'page_first'] (got 'rows')"),
        (dict(profile="fast"), "SuiteOptions.profile: must be one of ['smoke', 'standard', 'exhaustive'] (got 'fast')"),
        (
            dict(levels=("core", "controller")),
            "SuiteOptions.levels: must be a tuple of levels from ['core', 'legacy', "
            "'v1', 'v2', 'prefix', 'namespacing', 'concurrency', 'durability', "
            "'robustness', 'format'] (got ('core', 'controller'))",
        ),
        (dict(seed="1"), "SuiteOptions.seed: must be an int or None (got '1')"),
    ],
)
def test_bad_options_name_the_field_and_the_rule(options: dict, message: str) -> None:
    with pytest.raises(ValueError) as error:
        SuiteOptions(**options)
    assert str(error.value) == message


@pytest.mark.clause("BE-1")
def test_levels_parse_from_a_comma_list() -> None:
    assert parse_levels("core, v1,v1") == ("core", "v1")
    assert parse_levels("  ") is None
    with pytest.raises(ValueError) as error:
        parse_levels("core,controller", field="--levels")
    assert str(error.value) == (
        "--levels: must name backend levels from ['core', 'legacy', 'v1', 'v2', 'prefix', "
        "'namespacing', 'concurrency', 'durability', 'robustness', 'format'] (got 'controller', an "
        "engine level)"
    )
