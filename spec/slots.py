"""Slot completeness (HYB-10): every piece of state a KV slot owns travels with its page.

A model stack keeps state per KV slot beside the KV itself: a compressed-K
index, an NSA or DSA index buffer, draft-model and draft-SWA state, Mamba
state. Each must live in a host pool registered with the backend, and the
backup that writes a page, like the prefetch that restores it, must carry
every such pool. ``missing_slot_state`` names what an operation leaves behind.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple, Optional

__all__ = ["SlotStateGap", "missing_slot_state"]


class SlotStateGap(NamedTuple):
    """One piece of slot state an operation leaves behind."""

    component: str
    """The slot state's name (``compressed_k_index``, ``nsa_index``, ``draft_swa``, ...)."""
    why: str
    """Why it is left behind: no pool stores it, its pool is not registered, or the operation omits it."""


def missing_slot_state(
    slot_state: Mapping[str, Optional[str]], registered_pools: Iterable[str], transferred_pools: Iterable[str]
) -> tuple[SlotStateGap, ...]:
    """Return the slot state an operation leaves behind, in ``slot_state``'s order. Clause: HYB-10.

    ``slot_state`` maps each component a KV slot owns beside its KV to the
    host pool that stores it (None when no pool does); ``registered_pools``
    are the pools registered with the backend; ``transferred_pools`` those
    the operation (a backup or a prefetch) carries. A component is left
    behind when no pool stores it, when its pool is not registered, or when
    the operation does not carry its pool. Raises ValueError naming the
    field when a name is not a non-empty str.
    """
    registered = _names("registered_pools", registered_pools)
    transferred = _names("transferred_pools", transferred_pools)
    gaps: list[SlotStateGap] = []
    for component, pool in slot_state.items():
        if not isinstance(component, str) or not component:
            raise ValueError(f"slot_state: a component must be a non-empty str (HYB-10) (got {component!r})")
        if pool is None:
            gaps.append(SlotStateGap(component, "no host pool stores it"))
        elif not isinstance(pool, str) or not pool:
            raise ValueError(
                f"slot_state[{component!r}]: the pool must be a non-empty str or None (HYB-10) (got {pool!r})"
            )
        elif pool not in registered:
            gaps.append(SlotStateGap(component, f"its pool {pool!r} is not registered with the backend"))
        elif pool not in transferred:
            gaps.append(SlotStateGap(component, f"the operation does not carry its pool {pool!r}"))
    return tuple(gaps)


def _names(field: str, names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, (str, bytes)):
        raise ValueError(f"{field}: must be a collection of pool names, not one str (HYB-10) (got {names!r})")
    found = frozenset(names)
    for name in found:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{field}: a pool name must be a non-empty str (HYB-10) (got {name!r})")
    return found
