"""The v2 transfer models: one pool's part of a call, and batch_exists_v2's result."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Optional

from pydantic import AfterValidator, WithJsonSchema

from hicache_spec.values import is_count
from hicache_contracts.errors import ContractViolation
from hicache_contracts.models._base import ContractModel
from hicache_contracts.models._enums import PoolHitPolicy, PoolHitPolicyField, PoolName, PoolNameField, _plain
from hicache_contracts.models._fields import IndexTensor, NonNegativeInt, ReadOnlyMapping
from hicache_contracts.prefix_keys import PageKeysField


# ==================================================================== v2 transfers
class PoolTransfer(ContractModel):
    """One pool's part of a v2 call (SGLang's ``PoolTransfer``). Clauses: KEY-2, BE-15, BE-19, HYB-6, HYB-7."""

    name: PoolNameField
    """The pool this transfer reads or writes."""
    host_indices: Optional[IndexTensor] = None
    """Host slots, page_size per key; a 1-D integer tensor held as given (never copied)."""
    device_indices: Optional[IndexTensor] = None
    """Device slots, for transfers that also move data to the device; a 1-D integer tensor."""
    keys: PageKeysField = None
    """One key per page; immutable but list-like (``keys + other_list`` gives a list)."""
    hit_policy: PoolHitPolicyField = PoolHitPolicy.ALL_PAGES
    """How the pool's hit is measured against the KV hit."""
    nodes_to_load: Optional[Any] = None
    """Engine-side tree nodes this transfer restores; opaque to backends and kept as given."""
    indices_from_pool: Optional[PoolNameField] = None
    """KV for a KV-derived sidecar, which reuses the KV pool's slots; None for pools with their own."""
    block_pages: NonNegativeInt = 0
    """BLOCK_GROUPS geometry: full pages per block (0 when the policy is not BLOCK_GROUPS); 0.5.22+."""
    group_pages: NonNegativeInt = 0
    """BLOCK_GROUPS geometry: keys (pages) per group (0 when the policy is not BLOCK_GROUPS); 0.5.22+."""

    _field_clauses: ClassVar[dict[str, str]] = {
        "name": "BE-19",
        "keys": "KEY-2",
        "host_indices": "BE-15",
        "device_indices": "BE-15",
        "hit_policy": "HYB-7",
        "indices_from_pool": "HYB-1",
    }
    _default_clause: ClassVar[str] = "BE-19"

    @property
    def is_kv_derived(self) -> bool:
        """Whether this is a KV-derived sidecar (indices_from_pool is KV). Clause: HYB-1."""
        return self.indices_from_pool is PoolName.KV

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PoolTransfer):
            return NotImplemented
        for field in ("name", "keys", "hit_policy", "indices_from_pool", "block_pages", "group_pages"):
            if getattr(self, field) != getattr(other, field):
                return False
        for field in ("host_indices", "device_indices"):
            mine, theirs = getattr(self, field), getattr(other, field)
            if (mine is None) != (theirs is None):
                return False
            if (
                mine is not None
                and mine is not theirs
                and not (mine.shape == theirs.shape and bool((mine.cpu() == theirs.cpu()).all()))
            ):
                return False
        return self.nodes_to_load is other.nodes_to_load or self.nodes_to_load == other.nodes_to_load

    def __hash__(self) -> int:
        # Tensors compare by value in __eq__, so they stay out of the hash.
        return hash((self.name, self.keys, self.hit_policy, self.indices_from_pool))


def _check_pool_hits(value: ReadOnlyMapping, minimum: int, clause_id: str) -> ReadOnlyMapping:
    """Check a pool-name → hit-pages mapping; return it with the names as plain str."""
    names = {member.value for member in PoolName}
    clean = {}
    for name, hits in value.items():
        if name not in names:
            raise ContractViolation(f"[{name!r}]", "must be a pool name", name, clause_id)
        if not is_count(hits, minimum):
            raise ContractViolation(f"[{name!r}]", f"must be an int >= {minimum}", hits, clause_id)
        clean[str(name)] = hits
    return ReadOnlyMapping(clean)


def _check_restorable(value: Any) -> Optional[tuple[int, ...]]:
    """Return prefix lengths as an ascending tuple of distinct ints >= 0 (SGLang treats them as a set)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ContractViolation("", "must be a list of prefix lengths in pages", value, "BE-21")
    lengths = list(value)
    for length in lengths:
        if not is_count(length):
            raise ContractViolation("", "must hold only ints >= 0 (prefix lengths in pages)", length, "BE-21")
    return tuple(sorted(set(lengths)))


RestorablePages = Annotated[
    tuple[int, ...],
    _plain(_check_restorable, lambda value: None if value is None else list(value)),
    WithJsonSchema({"type": "array", "items": {"type": "integer", "minimum": 0}}),
]
"""Prefix lengths in pages: given as any iterable of ints, held as an ascending tuple of distinct values."""


class PoolTransferResult(ContractModel):
    """What batch_exists_v2 returns (SGLang's ``PoolTransferResult``). Clause: BE-21."""

    kv_hit_pages: NonNegativeInt
    """Pages hit in KV and every requested pool: the folded minimum."""
    extra_pool_hit_pages: Annotated[
        ReadOnlyMapping, AfterValidator(lambda value: _check_pool_hits(value, 1, "BE-21"))
    ] = ReadOnlyMapping()
    """Pool name → hit pages, only for pools with a nonzero hit; read-only."""
    restorable_prefix_pages: Optional[RestorablePages] = None
    """Every prefix length (pages) that KV and every gating pool can restore, ascending; None when
    the backend does not say (SGLang 0.5.20+)."""

    _default_clause: ClassVar[str] = "BE-21"

    @classmethod
    def empty(cls) -> PoolTransferResult:
        """Return the result of a complete miss: no page in any pool."""
        return cls(kv_hit_pages=0, extra_pool_hit_pages=ReadOnlyMapping())
