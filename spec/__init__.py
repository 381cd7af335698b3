"""hicache_spec: the executable specification of SGLang HiCache's L3 storage contract.

Standard library only. The clause registry (``clauses``, ``clause``) holds every
normative rule with a stable ID; the functions below state the semantics, each
with PEP 316 contracts that CrossHair checks and the clause IDs it defines.
"""

from hicache_spec.batching import count_leading_run, plan_batches
from hicache_spec.clauses import STORAGE_BATCH_SIZE
from hicache_spec.keys import compute_key_chain, compute_page_key, is_page_key
from hicache_spec.pools import (
    ALL_PAGES,
    KV,
    TRAILING_PAGES,
    compute_pool_hit,
    compute_trailing_window,
    count_pool_hits,
    fold_pool_hits,
)
from hicache_spec.prefix import Keys, expected_prefixes, extend_prefix, prefix_before
from hicache_spec.progress import (
    DEFAULT_PREFETCH_THRESHOLD_TOKENS,
    DEFAULT_PREFETCH_TIMEOUT_BASE,
    DEFAULT_PREFETCH_TIMEOUT_MAX,
    DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    agree_hit_pages,
    compute_backup_progress,
    compute_prefetch_acks,
    compute_prefetch_timeout,
    is_prefetch_worth_it,
)
from hicache_spec.registry import (
    FAMILIES,
    LEVELS,
    ROLES,
    Clause,
    UnknownClauseError,
    clause,
    clauses,
    clauses_for_level,
)

__all__ = [
    "ALL_PAGES",
    "Clause",
    "DEFAULT_PREFETCH_THRESHOLD_TOKENS",
    "DEFAULT_PREFETCH_TIMEOUT_BASE",
    "DEFAULT_PREFETCH_TIMEOUT_MAX",
    "DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN",
    "FAMILIES",
    "KV",
    "Keys",
    "LEVELS",
    "ROLES",
    "STORAGE_BATCH_SIZE",
    "TRAILING_PAGES",
    "UnknownClauseError",
    "agree_hit_pages",
    "clause",
    "clauses",
    "clauses_for_level",
    "compute_backup_progress",
    "compute_key_chain",
    "compute_page_key",
    "compute_pool_hit",
    "compute_prefetch_acks",
    "compute_prefetch_timeout",
    "compute_trailing_window",
    "count_leading_run",
    "count_pool_hits",
    "expected_prefixes",
    "extend_prefix",
    "fold_pool_hits",
    "is_page_key",
    "is_prefetch_worth_it",
    "plan_batches",
    "prefix_before",
]
