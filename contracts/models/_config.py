"""The per-call extra info and the deployment config a backend is given."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import model_validator

from hicache_contracts.errors import ContractViolation
from hicache_spec import check_dcp_config, is_storage_writer
from hicache_contracts.models._base import (
    ContractModel,
    _set_fields_set,
    _set_model_dict,
    _set_model_extra,
    _set_model_private,
)
from hicache_contracts.models._fields import ReadOnlyMapping
from hicache_contracts.prefix_keys import KeysInput, PrefixKeys, PrefixKeysField


# ==================================================================== extra info
class HiCacheStorageExtraInfo(ContractModel):
    """Per-call metadata handed to a backend (SGLang's ``HiCacheStorageExtraInfo``). Clauses: PFX-1, BE-8."""

    prefix_keys: PrefixKeysField = None
    """None: the feature is off; empty: on, no page before the call's first key; else every such key, root first."""
    extra_info: Optional[ReadOnlyMapping] = None
    """Free-form metadata, read-only; unknown keys are kept."""

    _field_clauses: ClassVar[dict[str, str]] = {"prefix_keys": "PFX-1", "extra_info": "BE-8"}

    def extend(self, batch: KeysInput) -> HiCacheStorageExtraInfo:
        """Return a new info whose prefix is followed by ``batch``; None stays None. Clauses: PFX-2, PFX-3, PFX-4, PFX-5.

        O(len(batch)); ``self`` is unchanged.
        """
        prefix = self.prefix_keys
        if prefix is None:  # PFX-3: off stays off
            if not isinstance(batch, (list, tuple, PrefixKeys)):
                raise ContractViolation(
                    "HiCacheStorageExtraInfo.extend.batch",
                    "must be a list, tuple or key sequence of str",
                    batch,
                    "PFX-1",
                )
            return self._evolve()
        try:
            extended = prefix.extended(batch)  # PFX-4: [] grows like any list
        except ContractViolation as violation:
            raise ContractViolation(
                f"HiCacheStorageExtraInfo.extend.{violation.field}",
                violation.rule,
                violation.value,
                violation.clause_id,
            ) from None
        # Built without validation: both parts were validated already. Once per batch, so kept lean.
        new = object.__new__(HiCacheStorageExtraInfo if type(self) is HiCacheStorageExtraInfo else type(self))
        _set_model_dict(new, {"prefix_keys": extended, "extra_info": self.extra_info})
        _set_fields_set(new, self.__pydantic_fields_set__)  # prefix_keys was set: it is not None
        _set_model_extra(new, None)
        _set_model_private(new, None)
        return new


# ==================================================================== config
_RANK_GROUPS = (
    ("tp_rank", "tp_size", "BE-25"),
    ("pp_rank", "pp_size", "BE-25"),
    ("attn_cp_rank", "attn_cp_size", "BE-25"),
    ("dcp_rank", "dcp_size", "BE-25"),
)
"""(rank field, size field, clause) for each parallel group of HiCacheStorageConfig."""


class HiCacheStorageConfig(ContractModel):
    """What a backend is told about its place in the deployment (SGLang's ``HiCacheStorageConfig``). Clauses: BE-1, BE-25, NS-1..NS-5."""

    tp_rank: int
    """This rank's index in its tensor-parallel group, 0 <= tp_rank < tp_size."""
    tp_size: int
    """Tensor-parallel group size, >= 1."""
    pp_rank: int
    """This rank's pipeline stage, 0 <= pp_rank < pp_size."""
    pp_size: int
    """Pipeline stages, >= 1."""
    attn_cp_rank: int
    """This rank's attention context-parallel index, 0 <= attn_cp_rank < attn_cp_size."""
    attn_cp_size: int
    """Attention context-parallel group size, >= 1."""
    is_mla_model: bool
    """KV is replicated across TP ranks (NS-5): only TP rank 0 writes it."""
    enable_storage_metrics: bool
    """Whether the backend should collect metrics for get_stats()."""
    is_page_first_layout: bool
    """Whether the host pool is laid out page first."""
    model_name: Optional[str]
    """The served model; part of every namespace (NS-4)."""
    tp_lcm_size: Optional[int] = None
    """When set, a positive multiple of tp_size used to split heads across mixed TP sizes."""
    should_split_heads: bool = False
    """Whether pages are stored split by heads to tp_lcm_size shards."""
    dp_rank: int = 0
    """Attention data-parallel rank (tp_rank is local to its attention group), >= 0; SGLang 0.5.21+."""
    extra_config: Optional[ReadOnlyMapping] = None
    """Backend-specific configuration, read-only; unknown keys are kept (BE-1)."""
    dcp_size: int = 1
    """Decode context-parallel size, >= 1; above 1 only for MLA with contiguous groups (BE-25); 0.5.23+."""
    dcp_rank: int = 0
    """This rank's decode context-parallel shard, 0 <= dcp_rank < dcp_size; 0.5.23+."""
    logical_page_size: Optional[int] = None
    """Tokens per logical page under DCP, a positive multiple of dcp_size when dcp_size > 1; 0.5.23+."""

    _field_clauses: ClassVar[dict[str, str]] = {
        "extra_config": "BE-1",
        "tp_rank": "BE-25",
        "tp_size": "BE-25",
        "tp_lcm_size": "BE-25",
        "dp_rank": "BE-25",
        "dcp_size": "BE-25",
        "dcp_rank": "BE-25",
        "logical_page_size": "BE-25",
        "pp_rank": "BE-25",
        "pp_size": "BE-25",
        "attn_cp_rank": "BE-25",
        "attn_cp_size": "BE-25",
        "model_name": "NS-4",
        "is_mla_model": "NS-5",
    }
    _default_clause: ClassVar[str] = "BE-1"

    @model_validator(mode="after")
    def _check_ranks(self) -> HiCacheStorageConfig:
        for rank_field, size_field, clause_id in _RANK_GROUPS:
            size = getattr(self, size_field)
            if size < 1:
                raise ContractViolation(size_field, "must be >= 1", size, clause_id)
            rank = getattr(self, rank_field)
            if not 0 <= rank < size:
                raise ContractViolation(
                    rank_field, f"must satisfy 0 <= {rank_field} < {size_field} = {size}", rank, clause_id
                )
        lcm = self.tp_lcm_size
        if lcm is not None and (lcm < 1 or lcm % self.tp_size != 0):
            raise ContractViolation(
                "tp_lcm_size", f"must be a positive multiple of tp_size = {self.tp_size}", lcm, "BE-25"
            )
        if self.dp_rank < 0:
            raise ContractViolation("dp_rank", "must be >= 0", self.dp_rank, "BE-25")
        self._check_dcp()
        return self

    def _check_dcp(self) -> None:
        """SGLang 0.5.23's DCP rules (its ``__post_init__`` raises ValueError on each), as the spec decides them
        (``hicache_spec.check_dcp_config``), reported with this configuration's numbers. Clause: BE-25."""
        reason = check_dcp_config(
            self.is_mla_model, self.tp_rank, self.tp_size, self.dcp_rank, self.dcp_size, self.logical_page_size
        )
        if reason is None:
            return
        field, rule = reason.split(": ", 1)
        if field == "dcp_size":
            rule = "may exceed 1 only for an MLA model (is_mla_model=True)"
        elif field == "dcp_rank" and self.dcp_size > 0:
            rule = (
                f"must equal tp_rank % dcp_size = {self.tp_rank % self.dcp_size}, with dcp_size "
                f"dividing tp_size = {self.tp_size} (contiguous DCP groups within TP)"
            )
        elif field == "logical_page_size":
            rule = f"must be a positive multiple of dcp_size = {self.dcp_size}"
        raise ContractViolation(field, rule, getattr(self, field), "BE-25")

    @property
    def is_storage_writer(self) -> bool:
        """Whether this rank writes rank-replicated (MLA) KV (``hicache_spec.is_storage_writer``). Clause: NS-5."""
        return is_storage_writer(self.is_mla_model, self.tp_rank, self.dcp_rank)

    @classmethod
    def single_rank(cls, model_name: Optional[str] = "test-model", **overrides: Any) -> HiCacheStorageConfig:
        """Return the configuration of a lone rank (every size 1, every flag off), with ``overrides`` applied."""
        fields: dict[str, Any] = {
            **dict.fromkeys(("tp_rank", "pp_rank", "attn_cp_rank"), 0),
            **dict.fromkeys(("tp_size", "pp_size", "attn_cp_size"), 1),
            **dict.fromkeys(("is_mla_model", "enable_storage_metrics", "is_page_first_layout"), False),
            "model_name": model_name,
        }
        return cls(**{**fields, **overrides})
