"""The record of one clause; the registry (``hicache_spec.registry``) holds and checks them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Clause"]


@dataclass(frozen=True)
class Clause:
    """One normative rule of the contract."""

    id: str
    """Stable identifier, ``FAMILY-N``."""
    level: str
    """The capability the clause belongs to (a key of ``LEVELS``)."""
    role: str
    """Whom the clause binds (one of ``ROLES``)."""
    statement: str
    """One normative sentence."""
    rationale: str
    """Why the rule exists: the failure it prevents."""
    source: str
    """Where the rule comes from: the SGLang source it was read from, or a project decision."""
    retired: bool = False
    """A retired clause keeps its ID and is no longer checked."""
    releases: str = "0.5.20+"
    """The SGLang releases the rule holds for: ``"0.5.21+"`` (since), ``"0.5.20-0.5.22"`` (a range),
    ``"0.5.23"`` (one release) or ``"decision"`` (a project decision, every release)."""

    @property
    def family(self) -> str:
        """The family prefix of the ID (``PFX`` for ``PFX-2``)."""
        return self.id.rsplit("-", 1)[0]

    @property
    def number(self) -> int:
        """The number of the clause within its family."""
        return int(self.id.rsplit("-", 1)[1])
