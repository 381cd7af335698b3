"""The hypothesis profile of the differential tests, and the search that proves a comparison can fail.

``differential``: 200 examples in the ci profile, 10,000 with
``HICACHE_HYPOTHESIS_PROFILE=deep``; derandomized, so a run is repeatable.
``planted_search(strategy, disagrees)``: a planted variant of an old rule
must disagree with the release on some drawn input, else the comparison
could pass vacuously.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from hypothesis import find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

__all__ = ["DEEP", "EXAMPLES", "differential", "planted_search"]

DEEP = os.environ.get("HICACHE_HYPOTHESIS_PROFILE") == "deep"
EXAMPLES = 10_000 if DEEP else 200
"""Examples per differential function."""
differential = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)


def planted_search(strategy: st.SearchStrategy, disagrees: Callable[[Any], bool], examples: int = 2_000) -> Any:
    """Return an input on which a planted variant disagrees with the release; fail if none is found."""
    try:
        return find(
            strategy,
            disagrees,
            settings=settings(max_examples=examples, deadline=None, derandomize=True, database=None),
        )
    except NoSuchExample:
        raise AssertionError(
            f"no input among {examples} tells the planted variant from the release: the comparison cannot fail"
        ) from None
