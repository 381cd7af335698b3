"""Hostile extra configs are refused before anything walks them; secrets are found without expanding aliases.

Scenario: a 10-line YAML alias bomb (9**10 strings once expanded) given to
``--extra-config``; the same shape built in Python and handed to
``secret_values``. Expected: the bomb is refused, naming the option, before
a single object is built from it (the YAML constructor is never called);
``secret_values`` visits each shared list once, so it finds the secret under
``password`` in a handful of steps. Why: the redaction used to walk the
expanded aliases, so the bomb held the command for over 120 s. (The
whole messages, and that nothing is written, are pinned in the bad-input
matrix; the time is in benchmarks/bench_config_limits.py as a ratio.)
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hicache_contracts.conformance.reporting import redaction
from hicache_contracts.conformance.session.options import load_config, load_text

BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x]"]
    + [f"{this}: &{this} [{', '.join(['*' + last] * 9)}]" for last, this in zip("abcdefgh", "bcdefghi")]
    + [f"password: [{', '.join(['*i'] * 9)}]"]
)


def test_the_alias_bomb_is_refused_before_any_object_is_built(tmp_path: Any, monkeypatch: Any) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    built: list[Any] = []
    monkeypatch.setattr(yaml.SafeLoader, "construct_document", lambda self, node: built.append(node))
    with pytest.raises(ValueError) as raised:
        load_config(f"@{path}")
    assert str(raised.value) == (
        "--extra-config: must hold at most 100000 values once its YAML aliases are expanded (got 'more than 100000')"
    )
    assert built == []


def test_a_small_shared_config_loads_and_keeps_its_sharing(tmp_path: Any) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text("base: &base {host: h, redis_password: hunter2}\nreplica: *base\n")
    config = load_config(f"@{path}")
    assert config == {
        "base": {"host": "h", "redis_password": "hunter2"},
        "replica": {"host": "h", "redis_password": "hunter2"},
    }
    assert redaction.secret_values(config) == ("hunter2",)


class CountingPattern:
    """Stands for the URL pattern: counts how many strings the walk looked at."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.calls = 0

    def finditer(self, text: str) -> Any:
        self.calls += 1
        return self.pattern.finditer(text)


def test_secret_values_walks_each_shared_container_once(monkeypatch: Any) -> None:
    level: Any = ["x"] * 9
    config: dict[str, Any] = {"a": level}
    for name in "bcdefghi":
        level = [level] * 9
        config[name] = level
    config["password"] = [level] * 9  # 9**10 strings once expanded
    counter = CountingPattern(redaction._URL_USER_INFO)
    monkeypatch.setattr(redaction, "_URL_USER_INFO", counter)
    assert redaction.secret_values(config) == ("x",)
    assert counter.calls <= 2 * 9  # the leaf list's strings, once outside and once under the secret key


def test_a_container_that_holds_itself_ends_the_walk() -> None:
    looped: list[Any] = ["redis://:hunter2@host"]
    looped.append(looped)
    assert redaction.secret_values({"urls": looped}) == ("hunter2",)


def test_any_yaml_a_user_hands_over_goes_through_the_same_limits() -> None:
    with pytest.raises(ValueError) as raised:
        load_text(BOMB, "yaml", field_name="--known-failures", shown="known.yaml")
    assert str(raised.value) == (
        "--known-failures: must hold at most 100000 values once its YAML aliases are expanded (got 'more than 100000')"
    )
    assert load_text("- {clause: BE-1}\n", "yaml", field_name="--known-failures") == [{"clause": "BE-1"}]
