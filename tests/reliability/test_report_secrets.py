"""Secrets in the extra config never reach any output: terminal, JSON, JUnit XML, Markdown, usage errors.

Scenario: a backend that fails to build and puts its whole extra config in
the error, as a real one did; the suite's reproduction text then repeats the
config. Expected: every output shows ``***`` where the password, the URL
password and the token were, and still shows everything else.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

from hicache_contracts.cli import main
from hicache_contracts.conformance.reporting.redaction import is_secret_key, redact, redact_value, secret_values
from tests.conformance import helpers

PASSWORD, URL_PASSWORD, TOKEN = "hunter2-pw", "s3cr3t-in-url", "tok-123456"
EXTRA = {
    "redis_url": f"redis://admin:{URL_PASSWORD}@cache.local:6379/0",
    "redis_password": PASSWORD,
    "nested": {"api_token": TOKEN},
    "endpoint": "cache.local",
}


def run_cli(tmp_path: Any, *arguments: str) -> int:
    reports = ("--json", "r.json"), ("--junit-xml", "r.xml"), ("--markdown", "r.md")
    return helpers.run_cli(*(part for option, name in reports for part in (option, str(tmp_path / name))), *arguments)


@pytest.mark.clause("BE-1")
def test_secrets_are_redacted_in_every_output(tmp_path: Any, capsys: Any) -> None:
    status = run_cli(
        tmp_path,
        "--backend",
        "tests.reliability.backends:RefusesToBuild",
        "--extra-config",
        json.dumps(EXTRA),
        "--check",
        "extra_config_with_unknown_keys_is_accepted",
    )
    assert status == 1
    captured = capsys.readouterr()
    outputs = {"terminal": captured.out + captured.err}
    for suffix in ("json", "xml", "md"):
        outputs[suffix] = (tmp_path / f"r.{suffix}").read_text(encoding="utf-8")
    for where, text in outputs.items():
        for secret in (PASSWORD, URL_PASSWORD, TOKEN):
            assert secret not in text, (where, secret)
        assert "redis://admin:***@cache.local:6379/0" in text, where  # the rest of the URL stays readable
        assert "cache.local" in text
    document = json.loads(outputs["json"])
    failure = next(
        clause for section in document["sections"] for clause in section["clauses"] if clause["status"] == "fail"
    )["failures"][0]
    assert "'redis_password': '***'" in failure["counterexample"]
    assert "'api_token': '***'" in failure["message"]
    ElementTree.fromstring(outputs["xml"].split("\n", 1)[1])  # still valid XML


def test_usage_errors_are_redacted(capsys: Any) -> None:
    assert (
        main(
            [
                "run",
                "--backend",
                "tests.reliability.backends:RefusesToBuild",
                "--extra-config",
                json.dumps({**EXTRA, "redis_port": 6379}),
                "--levels",
                "core,nonsense",
            ]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert error.startswith("hicache-conform run: --levels: ")
    bad = '{"redis_password": "' + PASSWORD + '", "x": }'
    assert main(["run", "--extra-config", bad]) == 2
    error = capsys.readouterr().err
    assert PASSWORD not in error and '"redis_password": "***"' in error


@pytest.mark.parametrize(
    "text, expected",
    [
        ("redis://:pw12345@host:6379", "redis://:***@host:6379"),
        ("rediss://user:p%40ss@host/0", "rediss://user:***@host/0"),
        ("http://host:8080/path", "http://host:8080/path"),
        ("{'redis_password': 'a b c', 'x': 1}", "{'redis_password': '***', 'x': 1}"),
        ('{"password": "x\\"y"}', '{"password": "***"}'),
        ('{\\"password\\": \\"abc\\", \\"x\\": 1}', '{\\"password\\": \\"***\\", \\"x\\": 1}'),
        ("password=abc; next", "password=***; next"),
        ("--redis-password hunter2 --seed 0", "--redis-password *** --seed 0"),
        ("aws_secret_access_key = AKIA", "aws_secret_access_key = ***"),
        ("token=abc", "token=***"),
        ("tokens: 8192", "tokens: 8192"),
        ("prefetch_timeout_per_ki_token=0.25", "prefetch_timeout_per_ki_token=0.25"),
        ("the password is wrong", "the password is wrong"),
        ("{'kind': 'final', 'tokens': 64}", "{'kind': 'final', 'tokens': 64}"),
        ("model_name='m'", "model_name='m'"),
    ],
)
def test_redaction_rules(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_known_secret_values_are_redacted_anywhere() -> None:
    assert secret_values(EXTRA) == (URL_PASSWORD, PASSWORD, TOKEN)
    assert redact(f"login failed for {PASSWORD} at {TOKEN}", secret_values(EXTRA)) == "login failed for *** at ***"
    assert redact("a 1 b", ("1",)) == "a 1 b"  # too short to replace everywhere
    assert redact_value({"redis_password": 5, "model_name": "m", "inner": ["redis://:abcd@h"]}) == {
        "redis_password": "***",
        "model_name": "m",
        "inner": ["redis://:***@h"],
    }
    assert [
        is_secret_key(name) for name in ("redis_password", "token", "tokens", "per_ki_token", "api_key", "model_name")
    ] == [True, True, False, False, True, False]


def test_planted_report_without_redaction_is_caught(tmp_path: Any, capsys: Any, monkeypatch: Any) -> None:
    from hicache_contracts.conformance.reporting import report as report_module

    monkeypatch.setattr(report_module, "redact_value", lambda value, secrets=(): value)
    with pytest.raises(AssertionError):
        test_secrets_are_redacted_in_every_output(tmp_path, capsys)
