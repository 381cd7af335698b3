"""Hypothesis strategies shared by the spec tests."""

from __future__ import annotations

import hashlib

from hypothesis import strategies as st

page_keys = st.integers(min_value=0, max_value=10**9).map(lambda n: hashlib.sha256(str(n).encode()).hexdigest())
"""Valid 64-hex page keys."""

key_tuples = st.lists(page_keys, max_size=12).map(tuple)
"""An ordered batch of keys."""

prefixes = st.one_of(st.none(), key_tuples)
"""A tri-state prefix: None, () or a non-empty tuple."""

flags = st.lists(st.booleans(), max_size=20).map(tuple)
"""Presence flags of a batch."""
