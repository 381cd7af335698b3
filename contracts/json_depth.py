"""How deep a JSON text nests, found without parsing it: read before a document is parsed, so one nested too deep
is refused with a clear error instead of exhausting the parser (backend configs, engine traces)."""

from __future__ import annotations

from typing import Union

__all__ = ["nesting_depth"]

_QUOTE, _BACKSLASH = 0x22, 0x5C
_OPEN, _CLOSE = (0x5B, 0x7B), (0x5D, 0x7D)  # [ {   ] }


def nesting_depth(text: Union[str, bytes], limit: int) -> int:
    """Return how deep arrays and objects nest in JSON ``text`` (strings skipped); the count stops at the first
    depth above ``limit``, which is enough to refuse the text."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    depth = deepest = 0
    inside = escaped = False
    for byte in data:
        if inside:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                inside = False
        elif byte == _QUOTE:
            inside = True
        elif byte in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif byte in _CLOSE:
            depth -= 1
    return deepest
