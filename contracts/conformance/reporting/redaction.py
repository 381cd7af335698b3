"""Secrets never reach a report: URL passwords, password options and tokens are replaced by ``***``.

A vendor's extra config may hold a password (``redis_url =
"redis://:hunter2@host"``, ``redis_password``, an API token) and a failing
check's reproduction text shows the config it built the backend with. Every
rendering of a report (terminal, JSON, JUnit XML, Markdown) and every usage
error goes through ``redact``:

- the password part of a URL's user info: ``scheme://user:***@host``;
- the value after an option whose name marks a secret (it contains
  ``password``, ``passwd``, ``secret``, ``credential``, ``api_key``,
  ``access_key``, ``private_key``, ``auth_token`` and the like, or is
  ``token``), in dict reprs, JSON, ``key=value``, ``key: value`` and
  ``--key value`` forms;
- every secret value collected from the extra config (``secret_values``),
  wherever it appears, when it is at least ``MIN_SECRET_LENGTH`` long.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Iterable

__all__ = ["MASK", "MIN_SECRET_LENGTH", "is_secret_key", "redact", "redact_value", "secret_values"]

MASK = "***"
"""What a secret is replaced with."""
MIN_SECRET_LENGTH = 4
"""Shorter secret values are not replaced wherever they appear (they would blank out ordinary text); the URL and
key rules still hide them."""

_SECRET_WORDS = (
    r"(?:password|passwd|secret|credential|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|(?:auth|access|refresh|session|bearer|api|id)[_-]?token|bearer)"
)
"""Parts of an option name that mark its value as a secret; a bare ``token`` counts only as the whole name (the
contract's own ``tokens`` and ``per_ki_token`` are counts, not secrets)."""
_SECRET_NAME = r"(?:[\w.-]*" + _SECRET_WORDS + r"[\w.-]*|token)"
_SECRET_KEY = re.compile(_SECRET_NAME, re.IGNORECASE)
_URL_USER_INFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)(?P<secret>[^\s@/'\"]+)(?=@)")
_VALUE = r"(?P<secret>(?(open)(?:(?!(?P=open))(?:\\.|.))*|[^\s,;&}\])'\"]+))"
_KEYED_VALUE = re.compile(
    r"(?P<head>(?<![\w.-])" + _SECRET_NAME + r"(?![\w.-])\\?['\"]?\s*[:=]\s*(?P<open>\\?['\"])?)" + _VALUE,
    re.IGNORECASE,
)
_FLAG_VALUE = re.compile(r"(?P<head>--" + _SECRET_NAME + r"(?:\s+|=)(?P<open>['\"])?)" + _VALUE, re.IGNORECASE)


def is_secret_key(name: Any) -> bool:
    """Whether an option named ``name`` holds a secret (its name contains password, token, secret, ...)."""
    return isinstance(name, str) and _SECRET_KEY.fullmatch(name) is not None


def _mask_keyed(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if not secret or secret == MASK:
        return match.group(0)
    return match.group("head") + MASK


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Return ``text`` with every secret replaced by ``***`` (see the module docstring)."""
    if not isinstance(text, str) or not text:
        return text
    for value in sorted(
        {item for item in secrets if isinstance(item, str) and len(item) >= MIN_SECRET_LENGTH}, key=len, reverse=True
    ):
        text = text.replace(value, MASK)
    text = _URL_USER_INFO.sub(lambda match: match.group("head") + MASK, text)
    text = _FLAG_VALUE.sub(_mask_keyed, text)
    return _KEYED_VALUE.sub(_mask_keyed, text)


def redact_value(value: Any, secrets: Iterable[str] = ()) -> Any:
    """Return ``value`` (str, list, tuple, dict of those) with its strings redacted and secret-named keys masked."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {
            key: (
                MASK
                if is_secret_key(key) and item is not None and not isinstance(item, (bool, Mapping))
                else redact_value(item, secrets)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_value(item, secrets) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_value(item, secrets) for item in value)
    return value


def secret_values(config: Any) -> tuple[str, ...]:
    """Return the secrets in an extra config: values of secret-named keys and URL passwords, nested ones too.

    Each container is walked once under a secret key and once elsewhere, however often it is referred to: a YAML
    alias is one object (a few lines of aliases stand for billions of values once expanded), and a container
    that holds itself ends the walk instead of the interpreter's stack.
    """
    found: list[str] = []
    walked: set[tuple[int, bool]] = set()
    stack: list[tuple[Any, bool]] = [(config, False)]
    while stack:
        value, secret = stack.pop()
        if isinstance(value, (Mapping, list, tuple)):
            if (id(value), secret) in walked:
                continue
            walked.add((id(value), secret))
            if isinstance(value, Mapping):
                children = [(item, secret or is_secret_key(key)) for key, item in value.items()]
            else:
                children = [(item, secret) for item in value]
            stack.extend(reversed(children))  # popped in their order
        elif isinstance(value, str):
            if secret:
                found.append(value)
            found.extend(match.group("secret") for match in _URL_USER_INFO.finditer(value))
        elif secret and isinstance(value, (int, float)) and not isinstance(value, bool):
            found.append(str(value))
    return tuple(dict.fromkeys(found))
