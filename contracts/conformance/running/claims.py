"""What a backend claims (``decide_levels``):

- ``core`` always: it binds every backend and needs only ``batch_exists``;
- ``legacy`` (get/set/exists/batch_get/batch_set) when declared, and always
  for a backend without v1: SGLang's generic path moves its KV through
  ``batch_get``/``batch_set`` in every pinned release; a backend that claims
  v1 is never asked them, so it is not held to them unless it declares
  ``legacy``;
- the levels the vendor declares (``SuiteOptions.levels``, else the class
  attribute ``hicache_levels``); a declared level whose methods are absent or
  only raise NotImplementedError fails every clause of that level ("declared
  but not honoured") and its checks are not run;
- without a declaration, what probing finds (``detect_capabilities``): v1, v2
  and prefix when their methods are implemented, namespacing and concurrency
  always (every multi-rank, multi-threaded engine needs them), durability
  robustness and format never (they cannot be probed; declare them).
  Robustness holds inputs no pinned release sends (a v2 transfer for a pool
  never registered, BE-20), format a guard SGLang does not require (pages
  tagged by the host pool's format, NS-9): a backend is held to them only
  when it says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from hicache_spec import LEVELS
from hicache_contracts.capabilities import CAPABILITY_LEVELS, Capabilities
from hicache_contracts.conformance.levels import BACKEND_LEVELS
from hicache_contracts.conformance.reporting.report import LevelVerdict

__all__ = [
    "ALWAYS_PROBED",
    "DECLARED_CHECKS",
    "LEGACY_NOT_ASKED",
    "LevelDecision",
    "NOT_SUPPORTED",
    "OPT_IN_LEVELS",
    "decide_levels",
    "declared_not_supported",
    "not_applicable",
]

ALWAYS_PROBED: tuple[str, ...] = ("namespacing", "concurrency")
"""Levels claimed without a declaration: they need no method beyond core."""

CORE_METHODS: tuple[str, ...] = ("batch_exists",)
"""The methods of level core: the hit query SGLang asks of every backend."""

OPT_IN_LEVELS: tuple[str, ...] = ("durability", "robustness", "format")
"""Levels never probed: a backend claims them only by declaring them."""

LEGACY_NOT_ASKED = (
    "SGLang moves KV through batch_get_v1/batch_set_v1 on a backend that claims v1 and never calls "
    "get, set, exists, batch_get or batch_set; declare legacy to have them checked"
)
"""Why ``legacy`` is not claimed by a v1 backend that does not declare it."""

V2_FOR_SIDECAR_MODELS = (
    "SGLang asks batch_exists_v2 of any backend serving a model with sidecar pools (SWA, Mamba, indexer), "
    "whatever the backend claims: without v2 it serves models without them only"
)
"""Said with every reason ``v2`` is not claimed."""


@dataclass(frozen=True)
class LevelDecision:
    """What the backend claims, and why."""

    claimed: frozenset[str]
    """Claimed levels whose methods are there (the checks of these run)."""
    dishonoured: dict[str, str]
    """Declared levels whose methods are missing: level → why."""
    verdicts: tuple[LevelVerdict, ...]
    """One per backend level, for the report."""


def decide_levels(
    capabilities: Capabilities, declared: Optional[tuple[str, ...]], not_asked: Optional[Mapping[str, str]] = None
) -> LevelDecision:
    """Return what a backend with ``capabilities`` claims, given the levels it declares (or None).

    ``not_asked`` maps a level the engine never drives this backend in to why; such a level is not
    claimed unless declared, whatever probing finds.
    """
    claimed: set[str] = set()
    dishonoured: dict[str, str] = {}
    verdicts = []
    unasked = {level: why for level, why in (not_asked or {}).items() if declared is None or level not in declared}
    zero_copy = not capabilities.missing_for("v1") and (declared is None or "v1" in declared) and "v1" not in unasked
    legacy_missing = tuple(name for name in capabilities.missing_for("core") if name not in CORE_METHODS)
    for level in BACKEND_LEVELS:
        if level == "core":
            missing = tuple(name for name in capabilities.missing_for("core") if name in CORE_METHODS)
        elif level == "legacy":
            missing = legacy_missing
        else:
            missing = capabilities.missing_for(level) if level in CAPABILITY_LEVELS else ()
        problems = [
            capabilities.method(name).problem or f"{name} does not accept extra_info the way SGLang hands it (BE-8)"
            for name in missing
        ]
        if level in unasked:
            verdicts.append(LevelVerdict(level, False, "probed", unasked[level], LEVELS[level]))
            continue
        if level == "core":
            source, wanted = "required", True
        elif level == "legacy" and not zero_copy and not (declared is not None and level in declared):
            source, wanted = "required", True  # SGLang's generic path is the only one left
        elif declared is not None:
            source, wanted = "declared", level in declared
        else:
            source = "probed"
            wanted = level in ALWAYS_PROBED or (level in CAPABILITY_LEVELS and not missing)
        if not wanted:
            if level == "legacy":
                reason = LEGACY_NOT_ASKED
            elif declared is not None:
                reason = "not declared"
            elif level in OPT_IN_LEVELS:
                reason = "cannot be probed; declare it with --levels or hicache_levels"
            else:
                reason = "; ".join(problems) or "not found"
            if level == "v2":
                reason = f"{reason} ({V2_FOR_SIDECAR_MODELS})"
            verdicts.append(LevelVerdict(level, False, source, reason, LEVELS[level]))
            continue
        if problems:
            dishonoured[level] = "declared but not honoured: " + "; ".join(problems)
            verdicts.append(LevelVerdict(level, True, source, dishonoured[level], LEVELS[level]))
            continue
        claimed.add(level)
        verdicts.append(LevelVerdict(level, True, source, None, LEVELS[level]))
    return LevelDecision(frozenset(claimed), dishonoured, tuple(verdicts))


NOT_SUPPORTED: dict[str, str] = {
    "mla": "MLA models (is_mla_model=True, one latent per token)",
    "mha": "MHA models (K and V per token)",
    "layer_first": "the layer_first host pool layout",
    "page_first": "the page_first host pool layout",
    "indexer": "the indexer sidecar pool (all_pages)",
    "swa": "the swa sidecar pool (trailing_pages)",
}
"""What a backend may declare it does not serve (``hicache_not_supported``), each with what it is."""

DECLARED_CHECKS: dict[str, tuple[str, ...]] = {
    "mla": (
        "replicated_kv_is_shared_across_tp_ranks",
        "a_non_writer_rank_writes_what_it_reports",
        "clear_removes_a_ranks_own_state_under_replicated_kv",
    ),
    "indexer": (
        "batch_exists_v2_takes_a_whole_chain",
        "clear_removes_every_pool",
        "v2_results_have_one_entry_per_pool",
        "v2_exists_folds_pool_hits_per_policy",
        "v2_pool_hits_count_only_pages_that_landed",
        "v2_kv_derived_sidecars_travel_with_kv",
        "a_removed_kv_derived_sidecar_is_never_read_as_a_hit",
    ),
    "swa": (
        "batch_exists_v2_takes_a_whole_chain",
        "clear_removes_every_pool",
        "v2_results_have_one_entry_per_pool",
        "v2_unregistered_pool_is_all_false",
        "v2_exists_folds_pool_hits_per_policy",
        "v2_pool_hits_count_only_pages_that_landed",
    ),
}
"""The checks whose subject needs a configuration: declared not served, they are not applicable. A layout or a
model kind the run itself uses (``--layout``, ``--kind``) makes every check not applicable."""


def declared_not_supported(klass: Any) -> tuple[str, ...]:
    """Return what ``klass`` declares it does not serve (its ``hicache_not_supported``); raise ValueError naming
    the attribute and the rule when that is not a list of known names."""
    declared = getattr(klass, "hicache_not_supported", ()) if klass is not None else ()
    if isinstance(declared, str) or not isinstance(declared, (list, tuple, set, frozenset)):
        raise ValueError(
            f"hicache_not_supported: must be a tuple of names among {sorted(NOT_SUPPORTED)} (got {declared!r})"
        )
    unknown = [name for name in declared if name not in NOT_SUPPORTED]
    if unknown:
        raise ValueError(
            f"hicache_not_supported: must name only configurations among {sorted(NOT_SUPPORTED)} (got {unknown!r})"
        )
    return tuple(sorted(set(declared), key=list(NOT_SUPPORTED).index))


def not_applicable(check_name: str, declared: tuple[str, ...], layout: str, kind: str) -> Optional[str]:
    """Return why check ``check_name`` is not applicable to a backend that declares it does not serve
    ``declared``, in a run of host pool ``layout`` and ``kind`` (None: it applies)."""
    for name in (layout, kind):
        if name in declared:
            return f"not applicable: declared: the backend does not serve {NOT_SUPPORTED[name]}, which this run uses"
    for name in declared:
        if check_name in DECLARED_CHECKS.get(name, ()):
            return f"not applicable: declared: the backend does not serve {NOT_SUPPORTED[name]}"
    return None
