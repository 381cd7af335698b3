"""How each pinned SGLang release hands ``extra_info`` to the storage methods that take it (BE-8).

A form is ``positional`` (after the method's other arguments), ``keyword`` (``extra_info=...``) or
``absent`` (the release calls the method without it). Read from each release's controllers and tree;
``docs/call-shapes/<release>.json`` records the same calls from the wheels, and a test holds the two
together.
"""

from __future__ import annotations

from typing import Optional

from hicache_spec.releases import SGLANG_RELEASES, UnknownReleaseError, check_release, release_key

__all__ = ["ABSENT", "EXTRA_INFO_FORMS", "KEYWORD", "POSITIONAL", "UnknownReleaseError", "extra_info_forms"]

POSITIONAL = "positional"
KEYWORD = "keyword"
ABSENT = "absent"

EXTRA_INFO_FORMS: dict[str, tuple[tuple[str, str], ...]] = {
    "batch_exists": (("0.5.20", POSITIONAL),),
    "batch_get_v1": (("0.5.20", POSITIONAL),),
    "batch_set_v1": (("0.5.20", POSITIONAL),),
    "batch_exists_v2": (("0.5.20", POSITIONAL),),
    "batch_get_v2": (("0.5.20", ABSENT), ("0.5.21", KEYWORD)),
    "batch_set_v2": (("0.5.20", ABSENT), ("0.5.21", KEYWORD)),
}
"""Per method: ``(first release, form)`` steps, oldest first; a form holds until the next step."""


def extra_info_forms(method: str, release: Optional[str] = None) -> tuple[str, ...]:
    """Return the forms in which ``release`` hands ``extra_info`` to ``method``; every pinned release's when None,
    the newest release's first.

    pre: method in EXTRA_INFO_FORMS
    raises: UnknownReleaseError
    post: len(__return__) >= 1
    post: release is None or len(__return__) == 1
    post: len(set(__return__)) == len(__return__)
    post: all(form in (POSITIONAL, KEYWORD, ABSENT) for form in __return__)
    """
    steps = EXTRA_INFO_FORMS[method]
    releases = tuple(reversed(SGLANG_RELEASES)) if release is None else (check_release(release),)
    forms: list[str] = []
    for version in releases:
        form = [item for first, item in steps if release_key(first) <= release_key(version)][-1]
        if form not in forms:
            forms.append(form)
    return tuple(forms)
