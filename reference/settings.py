"""The reference controller's options, checked in one place: ``ControllerSettings``.

``CacheController(backend, host_pool, settings=ControllerSettings(...))``, or
the same options as keywords (which build the settings). Callables (``clock``,
``on_ack``, ``on_backup_done``) and live objects (``storage_config``,
``sidecar_pools``, ``rank_group``) stay constructor keywords: they are
behaviour and state, not values to compare, copy or print. See docs/controller.md.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Optional

from pydantic import ConfigDict, PlainValidator

from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import FIELD_CLAUSE, ContractModel
from hicache_reference.calls import DEFAULT_CALL_DEADLINE
from hicache_spec import (
    DEFAULT_PREFETCH_THRESHOLD_TOKENS,
    DEFAULT_PREFETCH_TIMEOUT_BASE,
    DEFAULT_PREFETCH_TIMEOUT_MAX,
    DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    STORAGE_BATCH_SIZE,
)
from hicache_spec.values import is_count

__all__ = ["ControllerSettings", "SETTING_NAMES"]


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _int_at_least(minimum: int) -> PlainValidator:
    def check(value: Any) -> int:
        if not is_count(value, minimum):
            raise ContractViolation("", f"must be an int >= {minimum}", value, FIELD_CLAUSE)
        return value

    return PlainValidator(check)


def _seconds(value: Any) -> float:
    if not _is_number(value) or not value >= 0:
        raise ContractViolation("", "must be a number >= 0", value, FIELD_CLAUSE)
    return float(value)


def _optional_seconds(value: Any) -> Optional[float]:
    return None if value is None else _seconds(value)


def _call_deadline(value: Any) -> Optional[float]:
    if value is None:
        return None
    if not _is_number(value) or not 0 < value < math.inf:
        raise ContractViolation(
            "", "must be a finite number of seconds > 0, or None to wait for ever", value, FIELD_CLAUSE
        )
    return float(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ContractViolation("", "must be a bool", value, FIELD_CLAUSE)
    return value


class ControllerSettings(ContractModel):
    """The reference controller's options: frozen, strict, unknown names rejected. Clauses named per field."""

    model_config = ConfigDict(**ContractModel.model_config, use_attribute_docstrings=True)

    batch_size: Annotated[int, _int_at_least(1)] = STORAGE_BATCH_SIZE
    """Pages per storage call (CTL-2)."""
    prefetch_threshold: Annotated[int, _int_at_least(0)] = DEFAULT_PREFETCH_THRESHOLD_TOKENS
    """Tokens: spans below max(this, page_size) are declined before any query, agreed hits below it revoked (CTL-3)."""
    prefetch_timeout_base: Annotated[float, PlainValidator(_seconds)] = DEFAULT_PREFETCH_TIMEOUT_BASE
    """Seconds of the timeout policy's budget for any span (CTL-14)."""
    prefetch_timeout_per_ki_token: Annotated[float, PlainValidator(_seconds)] = DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN
    """Seconds added per 1024 requested tokens (CTL-14)."""
    prefetch_timeout_max: Annotated[Optional[float], PlainValidator(_optional_seconds)] = DEFAULT_PREFETCH_TIMEOUT_MAX
    """A cap on the budget (CTL-10, a project option; no release caps it); None: no cap."""
    pass_prefix_keys: Annotated[bool, PlainValidator(_flag)] = False
    """Whether backends receive prefix metadata (PFX-1, PFX-3)."""
    call_deadline: Annotated[Optional[float], PlainValidator(_call_deadline)] = DEFAULT_CALL_DEADLINE
    """Seconds before a hung backend call is abandoned; None waits for ever (CTL-11)."""
    register_host_pools: Annotated[bool, PlainValidator(_flag)] = True
    """Hand the host pools to the backend at construction (BE-24, BE-27)."""

    _field_clauses: ClassVar[dict[str, str]] = {
        "batch_size": "CTL-2",
        "prefetch_threshold": "CTL-3",
        "prefetch_timeout_base": "CTL-14",
        "prefetch_timeout_per_ki_token": "CTL-14",
        "prefetch_timeout_max": "CTL-10",
        "pass_prefix_keys": "PFX-1",
        "call_deadline": "CTL-11",
        "register_host_pools": "BE-24",
    }
    _default_clause: ClassVar[str] = "CTL-2"


SETTING_NAMES: tuple[str, ...] = tuple(ControllerSettings.model_fields)
"""The option names the settings hold, in declaration order."""

ControllerSettings.__doc__ = (
    (ControllerSettings.__doc__ or "")
    + "\n\nOptions:\n"
    + "\n".join(
        f"    {name}: {' '.join((field.description or '').split())} Default {field.default!r}."
        for name, field in ControllerSettings.model_fields.items()
    )
)
