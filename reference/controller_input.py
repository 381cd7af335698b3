"""The checks of what a caller hands ``CacheController.prefetch`` and ``backup``: bad input raises, nothing starts."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from hicache_contracts import PoolTransfer, PrefixKeys, validate_page_keys
from hicache_contracts.errors import FieldErrors
from hicache_reference.policies import PREFETCH_POLICIES, is_prefetch_policy
from hicache_reference.sidecar_pools import SidecarPool
from hicache_spec import compute_key_chain
from hicache_spec.values import is_count

if TYPE_CHECKING:
    from hicache_contracts.models import PrefetchPolicy

__all__ = ["OperationIds", "check_policy", "check_prefix", "check_sidecar_transfers", "key_chain", "prior_key_of"]

_CLASS = "CacheController"


CONTROLLER_ERRORS = FieldErrors(_CLASS)
"""The controller's input errors: ``CacheController.<field>: rule (got value) [CLAUSE]``."""


def check_policy(policy: Any) -> PrefetchPolicy:
    if not is_prefetch_policy(policy):
        raise CONTROLLER_ERRORS.violation(
            "prefetch.policy", f"must be one of {', '.join(PREFETCH_POLICIES)}", policy, "CTL-9"
        )
    return policy


def check_prefix(field: str, prefix_keys: Optional[Sequence[str]]) -> Optional[PrefixKeys]:
    """The caller's prefix as an immutable sequence (None stays None)."""
    if prefix_keys is None:
        return None
    validate_page_keys(prefix_keys, field=f"{_CLASS}.{field}")
    return prefix_keys if isinstance(prefix_keys, PrefixKeys) else PrefixKeys(tuple(prefix_keys))


def prior_key_of(prefix: Optional[PrefixKeys], prior_key: Optional[str]) -> Optional[str]:
    """The anchor's last page key: ``prior_key``, or the prefix's last key, which it must equal. Clause: PFX-10."""
    if prefix is None:
        return prior_key
    anchor_key = prefix[-1] if len(prefix) else None  # PFX-10: the prefix ends with the anchor's last page
    if prior_key is not None and prior_key != anchor_key:
        raise CONTROLLER_ERRORS.violation(
            "prefetch.prior_key",
            "must be the last key of prefix_keys, the anchor's last page (None when prefix_keys is empty)",
            prior_key,
            "PFX-10",
        )
    return anchor_key


def key_chain(
    token_ids: Optional[Sequence[int]], keys: Optional[Sequence[str]], prior_key: Optional[str], page_size: int
) -> tuple[str, ...]:
    """The operation's key chain: ``keys``, or computed from the tokens and the anchor's last page key (KEY-1, KEY-3)."""
    if (token_ids is None) == (keys is None):
        raise CONTROLLER_ERRORS.violation(
            "prefetch.token_ids", "give exactly one of token_ids and keys", token_ids, "KEY-3"
        )
    if keys is not None:
        validate_page_keys(keys, field=f"{_CLASS}.prefetch.keys")
        return tuple(keys)
    assert token_ids is not None  # exactly one of the two was given
    tokens = tuple(token_ids)
    for index, token in enumerate(tokens):
        if not is_count(token, 0, 2**32 - 1):
            raise CONTROLLER_ERRORS.violation(
                f"prefetch.token_ids[{index}]", "must be an int in [0, 2**32)", token, "KEY-1"
            )
    if prior_key is not None:
        validate_page_keys([prior_key], strict=True, field=f"{_CLASS}.prefetch.prior_key")
    return compute_key_chain(tokens, page_size, prior_key)


def check_sidecar_transfers(
    sidecar_transfers: Sequence[PoolTransfer], separate_pools: Sequence[SidecarPool]
) -> tuple[PoolTransfer, ...]:
    """A backup's sidecar transfers: each a PoolTransfer of a non-KV-derived pool, with keys and slots. Clause: HYB-5."""
    transfers = tuple(sidecar_transfers)
    known = {pool.name for pool in separate_pools}
    for index, transfer in enumerate(transfers):
        field = f"backup.sidecar_transfers[{index}]"
        if not isinstance(transfer, PoolTransfer):
            raise CONTROLLER_ERRORS.violation(field, "must be a PoolTransfer", transfer, "HYB-5")
        if transfer.name not in known:
            rule = "must name a non-KV-derived sidecar pool of the controller"
            raise CONTROLLER_ERRORS.violation(f"{field}.name", rule, transfer.name.value, "HYB-5")
        if transfer.keys is None or transfer.host_indices is None:
            raise CONTROLLER_ERRORS.violation(field, "must have keys and host_indices", transfer, "HYB-5")
    return transfers


class OperationIds:
    """Operation ids: the caller's (an int or str) or the next of a counter from 0. Clause: CTL-6."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def next(self, operation_id: Optional[Union[int, str]]) -> Union[int, str]:
        if operation_id is None:
            return next(self._counter)
        if isinstance(operation_id, bool) or not isinstance(operation_id, (int, str)):
            raise CONTROLLER_ERRORS.violation("operation_id", "must be an int or str", operation_id, "CTL-6")
        return operation_id
