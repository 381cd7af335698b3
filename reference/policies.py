"""Prefetch policies: when a prefetch stops early (CTL-9, CTL-14).

``best_effort``    terminate as soon as the scheduler asks
``wait_complete``  never terminate early; a request to terminate is ignored
``timeout``        terminate once the prefetch timeout has passed since the
                   operation was submitted (CTL-14, SGLang 0.5.21+: base plus
                   per_ki_token per 1024 tokens of the requested span, no
                   maximum unless one is given, CTL-10's 0.5.20 cap); a
                   request to terminate before then is ignored; once KV has
                   landed a deadline no longer cuts the prefetch

Termination is checked before each slice is read; a slice already being read
completes. What one rank decides, every rank follows: the progress acks are
all-reduced with MIN, so a rank that stopped freezes every rank's ack
(RANK-4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, TypeGuard

from hicache_spec import compute_prefetch_timeout
from hicache_spec.values import BEST_EFFORT, PREFETCH_POLICIES, WAIT_COMPLETE

if TYPE_CHECKING:
    from hicache_contracts.models import PrefetchPolicy
    from hicache_reference.settings import ControllerSettings

__all__ = ["PREFETCH_POLICIES", "compute_deadline", "is_prefetch_policy", "is_terminated"]


def is_prefetch_policy(value: object) -> TypeGuard[PrefetchPolicy]:
    """Whether ``value`` is one of ``PREFETCH_POLICIES`` (CTL-9)."""
    return value in PREFETCH_POLICIES


def compute_deadline(start: float, tokens: int, settings: ControllerSettings) -> float:
    """Return when a prefetch of ``tokens`` requested tokens submitted at ``start`` times out, under the controller's
    timeout settings. Clauses: CTL-10, CTL-14."""
    return start + compute_prefetch_timeout(
        tokens, settings.prefetch_timeout_base, settings.prefetch_timeout_per_ki_token, settings.prefetch_timeout_max
    )


def is_terminated(policy: str, requested: bool, now: float, deadline: Optional[float]) -> bool:
    """Return whether a prefetch under ``policy`` stops before its next slice. Clause: CTL-9.

    ``requested``: the scheduler asked to terminate; ``deadline``: when the
    timeout policy gives up (None while it is not yet known).
    """
    if policy == BEST_EFFORT:
        return requested
    if policy == WAIT_COMPLETE:
        return False
    return deadline is not None and now >= deadline
