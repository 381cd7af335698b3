"""The divergence registry: where a pinned SGLang release breaks a clause the project keeps.

A divergence is recorded, not copied: the clause stays as it is, and a test on
each release the entry names shows the divergence is still there (so an
upstream fix is noticed and the entry retired). ``evidence`` is a regular
expression that must match the source of ``function`` in ``file`` of that
release's wheel; ``tests/spec/test_divergences.py`` checks it. Rendered as
``docs/divergences.md`` by ``hicache-conform divergences``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hicache_spec.registry import _release_bounds, clause
from hicache_spec.releases import SGLANG_RELEASES, release_key

__all__ = ["DIVERGENCES", "Divergence", "divergences", "divergences_for_release", "render_divergences"]


@dataclass(frozen=True)
class Divergence:
    """One place where released SGLang does not follow a clause."""

    id: str
    """Stable identifier, ``DIV-N``."""
    releases: str
    """The releases that diverge, in the ``Clause.releases`` notation (``0.5.20+``, ``0.5.20-0.5.22``, ``0.5.23``)."""
    clause_id: str
    """The clause SGLang breaks."""
    file: str
    """The module, relative to the wheel's ``sglang/srt`` folder."""
    function: str
    """The function or ``Class.method`` that diverges."""
    behaviour: str
    """What SGLang does instead, in one sentence."""
    evidence: str
    """A regular expression that matches the diverging code in ``function``'s source."""
    upstream: str = ""
    """The upstream issue or pull request, when there is one."""

    def holds_for(self, version: str) -> bool:
        """Return whether pinned release ``version`` shows this divergence."""
        first, last = _release_bounds(self.releases)
        return release_key(first) <= release_key(version) <= release_key(last)


D = Divergence

DIVERGENCES: tuple[Divergence, ...] = (
    D(
        "DIV-1",
        "0.5.20+",
        "PFX-4",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._storage_hit_query",
        "The hit query passes prefix_keys None when the operation's prefix is [] (copy only if truthy), "
        "switching the feature off at the root.",
        r"prefix_keys=operation\.prefix_keys\.copy\(\) if operation\.prefix_keys else None",
    ),
    D(
        "DIV-2",
        "0.5.21+",
        "PFX-4",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.submit_prefetch",
        "The pipeline-parallel ticket keeps prefix_keys only when non-empty, so [] becomes None for "
        "every call of a ticketed prefetch.",
        r"prefix_keys=list\(prefix_keys\) if prefix_keys else None",
    ),
    D(
        "DIV-3",
        "0.5.20",
        "PFX-5",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer",
        "The prefix is extended in place with += after each batch, rewriting the list a backend already received.",
        r"prefix_keys \+= batch_hashes",
    ),
    D(
        "DIV-4",
        "0.5.20",
        "PFX-5",
        "managers/cache_controller.py",
        "HiCacheController._page_backup",
        "Backup extends the prefix in place with += after each batch.",
        r"prefix_keys \+= batch_hashes",
    ),
    D(
        "DIV-5",
        "0.5.20-0.5.22",
        "BE-21",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.batch_exists_v2",
        "The hit is the minimum of each pool's largest hit, not the largest length every pool can "
        "restore, and no restorable_prefix_pages are reported.",
        r"final_pages = min\(final_pages, boundary\)",
        "sgl-project/sglang#39147",
    ),
    D(
        "DIV-6",
        "0.5.20+",
        "BE-21",
        "mem_cache/storage/sim_storage.py",
        "SimHiCacheStorage.batch_exists_v2",
        "The simulated backend folds with the minimum of each pool's largest hit and reports no "
        "restorable_prefix_pages.",
        r"final_pages = min\(final_pages, boundary\)",
        "sgl-project/sglang#39147",
    ),
    D(
        "DIV-7",
        "0.5.22",
        "HYB-9",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.batch_exists_v2",
        "Any policy other than ALL_PAGES, BLOCK_GROUPS included, is folded as TRAILING_PAGES and gates the hit.",
        r"else:\s*# trailing_pages",
    ),
    D(
        "DIV-8",
        "0.5.23",
        "HYB-9",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.batch_exists_v2",
        "A BLOCK_GROUPS transfer raises ValueError instead of being answered with the pages its leading "
        "complete groups cover (no controller sends one yet).",
        r"raise ValueError\(f\"Unsupported pool hit policy",
    ),
    D(
        "DIV-9",
        "0.5.20+",
        "BE-13",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.exists",
        "exists counts any file under the key's name as a hit, an empty or short one included.",
        r"os\.path\.exists\(",
    ),
    D(
        "DIV-10",
        "0.5.20+",
        "NS-8",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.clear",
        "clear removes every file in the storage directory, other models' and ranks' pages included.",
        r"for filename in os\.listdir\(self\.file_path\)",
    ),
    D(
        "DIV-11",
        "0.5.20+",
        "PFX-10",
        "mem_cache/unified_cache/unified_tree_core.py",
        "UnifiedTreeCore.get_prefix_hash_values",
        "The prefetch prefix is built from the anchor node's ancestors, without the anchor's own pages.",
        r"return node\.get_prefix_hash_values\(node\.parent\)",
    ),
    D(
        "DIV-12",
        "0.5.20",
        "PFX-5",
        "managers/cache_controller.py",
        "HiCacheController._storage_hit_query",
        "The hit query extends its copy of the prefix in place with += after each slice, rewriting the list "
        "the previous batch_exists received (a query no in-tree path of 0.5.20 calls: its HiRadixCache is "
        "never built and the decode offload controller only writes).",
        r"prefix_keys \+= batch_hashes",
    ),
    D(
        "DIV-13",
        "0.5.20",
        "PFX-4",
        "managers/cache_controller.py",
        "HiCacheController._storage_hit_query",
        "The hit query passes prefix_keys None when the operation's prefix is [] (copy only if truthy; a "
        "query no in-tree path of 0.5.20 calls).",
        r"prefix_keys = operation\.prefix_keys\.copy\(\) if operation\.prefix_keys else None",
    ),
    D(
        "DIV-14",
        "0.5.20",
        "PFX-4",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer",
        "An empty prefix is never extended (only a non-empty one grows), so every read after the first "
        "slice receives [].",
        r"if prefix_keys and len\(prefix_keys\) > 0:",
    ),
    D(
        "DIV-15",
        "0.5.20",
        "PFX-4",
        "managers/cache_controller.py",
        "HiCacheController._page_backup",
        "An empty prefix is never extended, so every write after the first slice receives [].",
        r"if prefix_keys and len\(prefix_keys\) > 0:",
    ),
    D(
        "DIV-16",
        "0.5.20",
        "PFX-7",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer_kv_batch",
        "The KV-derived batch_get_v2 of each slice is called without extra_info.",
        r"batch_get_v2\(\s*current_kv_derived_transfers\s*\)",
    ),
    D(
        "DIV-17",
        "0.5.20",
        "PFX-8",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer_kv_batch",
        "The KV-derived batch_get_v2 of a slice carries no prefix while that slice's KV read carries one.",
        r"batch_get_v2\(\s*current_kv_derived_transfers\s*\)",
    ),
    D(
        "DIV-18",
        "0.5.20",
        "PFX-7",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._page_transfer_sidecar",
        "The sidecar batch_get_v2 after KV IO is called without extra_info.",
        r"batch_get_v2\(transfers_nonkv\)",
    ),
    D(
        "DIV-19",
        "0.5.20",
        "PFX-7",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._page_backup",
        "The sidecar batch_set_v2 of a backup is called without extra_info.",
        r"batch_set_v2\(backup_transfers\)",
    ),
    D(
        "DIV-20",
        "0.5.20+",
        "PFX-1",
        "mem_cache/unified_cache/unified_tree_core.py",
        "UnifiedTreeCore.get_prefix_hash_values",
        "The prefetch prefix is built from the anchor node's ancestors without the anchor's own pages: [] "
        "while the anchor's pages precede the call's first key (an anchor under the root), else a list "
        "missing the anchor's pages.",
        r"return node\.get_prefix_hash_values\(node\.parent\)",
    ),
    D(
        "DIV-21",
        "0.5.20+",
        "PFX-2",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.trim_prefetch_full_head",
        "Buffer-only mode trims a device-resident head from the KV keys but not from the prefix: the KV "
        "reads receive the operation's prefix, skipping the trimmed pages' keys, while the sidecar reads "
        "receive the full chain.",
        r"(?s)\A(?!.*prefix_keys).*operation\.hash_value = original_hashes\[trim_pages:\]",
    ),
    D(
        "DIV-22",
        "0.5.20-0.5.21",
        "CTL-6",
        "managers/cache_controller.py",
        "HiCacheController.prefetch_io_aux_func",
        "The final ack is put only after _page_transfer returns and the loop catches only queue.Empty: a "
        "backend that raises ends the prefetch IO thread and the prefetch never gets its final ack.",
        r"self\._page_transfer\(operation\)\s+self\.prefetch_sync_queue\.put\(",
    ),
    D(
        "DIV-23",
        "0.5.20-0.5.21",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer",
        "A KV read that raises is not caught: the exception ends the prefetch IO thread, and no later "
        "prefetch is read.",
        r"(?s)\A(?!.*except Exception).*self\._page_transfer_kv_batch\(",
    ),
    D(
        "DIV-24",
        "0.5.20-0.5.21",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._page_transfer_sidecar",
        "A sidecar read that raises is not caught: the exception ends the prefetch IO thread before the sidecar ack.",
        r"(?s)\A(?!.*except Exception).*self\.storage_backend\.batch_get_v2\(",
    ),
    D(
        "DIV-25",
        "0.5.20-0.5.21",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController.prefetch_thread_func",
        "A hit query that raises is not caught (the loop catches only queue.Empty): the exception ends "
        "the hit-query thread, and no later prefetch is queried or acked.",
        r"(?s)\A(?!.*except Exception).*self\._storage_hit_query\(",
    ),
    D(
        "DIV-26",
        "0.5.20-0.5.21",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.backup_thread_func",
        "A write that raises is not caught (the loop catches only queue.Empty): the exception ends the "
        "backup thread, and no backup ack follows.",
        r"(?s)\A(?!.*_page_backup_or_log).*self\._page_backup\(operation\)",
    ),
    D(
        "DIV-27",
        "0.5.20+",
        "HYB-8",
        "mem_cache/hicache_storage.py",
        "count_pool_hits",
        "A pool's hits stop only at an entry equal to False, so None, '' or any other entry that is not "
        "False counts as a loaded page.",
        r"rs\.index\(False\) if False in rs",
    ),
    D(
        "DIV-28",
        "0.5.20+",
        "PFX-7",
        "disaggregation/decode_kvcache_offload_manager.py",
        "DecodeKVCacheOffloadManager._trigger_backup",
        "The PD-decode offload writes pass no prefix (the controller is built from the raw JSON config, "
        "which keeps hicache_storage_pass_prefix_keys in the backend's extra_config), so every write "
        "carries prefix_keys None with the feature on.",
        r"write_storage\(\s*host_indices,\s*incremental_tokens,\s*hash_value=page_hashes,(?!\s*prefix_keys)",
    ),
    D(
        "DIV-29",
        "0.5.20-0.5.22",
        "NS-1",
        "mem_cache/hicache_storage.py",
        "HiCacheFile._get_suffixed_key",
        "With is_mla_model every key gets the suffix without the TP rank, Mamba state's included, so the Mamba "
        "state every TP rank writes under one key (HybridCacheController.should_backup) lands in one file, the "
        "last rank's replacing the others'.",
        r"(?s)\A(?!.*MAMBA).*return key \+ self\.config_suffix",
    ),
    D(
        "DIV-30",
        "0.5.20+",
        "NS-4",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.__init__",
        "The model name goes into the key suffix with every '/' replaced by '-', so a model 'org/model' and a "
        "model 'org-model' share one namespace and read each other's pages.",
        r'"-"\.join\(model_name\.split\("/"\)\)',
    ),
    D(
        "DIV-31",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.__init__",
        "The model name goes into the key prefix with every '/' replaced by '-', so a model 'org/model' and a "
        "model 'org-model' share one namespace.",
        r'"-"\.join\(storage_config\.model_name\.split\("/"\)\)',
    ),
    D(
        "DIV-32",
        "0.5.22",
        "PFX-2",
        "mem_cache/buffer_mode/pipeline.py",
        "BufferModePipeline.finish_backup_ack",
        "In buffer-only mode a write-through of a trailing pool alone (SWA) stores only the node's window "
        "pages, with the node's ancestor prefix and no KV span, so its prefix leaves out the node's pages "
        "before the window (0.5.23 extends it with them).",
        r"(?s)\A(?!.*extend_storage_prefix).*if intent\.pool == PoolName\.KV else \[\].*snapshot\.prefix_keys",
    ),
    D(
        "DIV-33",
        "0.5.21-0.5.22",
        "RANK-1",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.submit_prefetch",
        "In the pipeline ticket mode (buffer-only host memory, Mooncake, more than one PP stage) the first stage "
        "queries the hit for every stage and reduces it with MIN across its TP and CP groups only, then hands "
        "the agreed hit to the other stages in the ticket: the PP group never joins the reduction.",
        r"self\._all_reduce\(hit_tensor, torch\.distributed\.ReduceOp\.MIN, local_groups\)",
    ),
    D(
        "DIV-34",
        "0.5.22",
        "RANK-5",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.submit_prefetch",
        "In the pipeline ticket mode the hit agreement is a MIN of the hit alone: the pools' own boundaries the "
        "query returned are never reduced, so ranks may keep different per-pool beliefs.",
        r"self\._all_reduce\(hit_tensor, torch\.distributed\.ReduceOp\.MIN, local_groups\)",
    ),
    D(
        "DIV-35",
        "0.5.20+",
        "HYB-10",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.should_backup",
        "With replicated KV (an MLA model) a rank that is not the storage writer backs up the TP-sharded pages "
        "of an MHA draft or draft-SWA pool only when the backend is Mooncake; with any other backend its shard "
        "is never written, so the rank restores the writer's (HiCacheFile keys those pools without the TP rank) "
        "or nothing.",
        r'if self\.storage_backend_type == "mooncake" and transfer\.name in \(',
    ),
    D(
        "DIV-36",
        "0.5.20+",
        "NS-6",
        "mem_cache/storage/simm/hicache_simm.py",
        "HiCacheSiMM.batch_exists",
        "With an extra_backend_tag in the extra config, batch_get_v1 and batch_set_v1 prefix every key with the "
        "tag but batch_exists and exists look the untagged keys up, so the hit query never finds a page the "
        "backend stored.",
        r"(?s)\A(?!.*extra_backend_tag).*query_keys",
    ),
    D(
        "DIV-37",
        "0.5.20+",
        "LNK-21",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.__init__",
        "The Mooncake direct linker's store (a MooncakeStore that MooncakeDirectLinker builds from the model "
        "path) puts the model name into its key prefix with every '/' replaced by '-', so a linker for a model "
        "'org/model' finds the pages of a model 'org-model'.",
        r'"-"\.join\(storage_config\.model_name\.split\("/"\)\)',
    ),
    D(
        "DIV-38",
        "0.5.20+",
        "LNK-20",
        "mem_cache/storage/umbp/umbp_direct_linker.py",
        "UMBPDirectLinker.offload",
        "The UMBP direct linker has no owner rank: every tensor-parallel rank queues the offload of rank-"
        "replicated (MLA) pools and writes them to the store.",
        r"(?s)\A(?!.*owner).*_offload_queue\.put",
    ),
    D(
        "DIV-39",
        "0.5.20",
        "LNK-21",
        "mem_cache/storage/umbp/umbp_direct_linker.py",
        "UMBPDirectLinker.__init__",
        "The UMBP direct linker names every object with the TP rank, rank-replicated (MLA) pools included, so a "
        "rank never finds the pages another rank stored for the same replicated pool (0.5.21 leaves the TP rank "
        "out when the pools are replicated).",
        r'rank_suffix = f"tp\{tp_rank\}_cp',
    ),
    D(
        "DIV-40",
        "0.5.20+",
        "CTL-17",
        "disaggregation/decode_kvcache_offload_manager.py",
        "DecodeKVCacheOffloadManager._compute_prefix_hash",
        "The decode offload hashes the plain token list of each page, while a prefill with EAGLE speculative "
        "decoding keys its pages by bigram tokens (UnifiedRadixCache's is_bigram), so under EAGLE no page the "
        "decode offload writes is ever found by a later prefill.",
        r"(?s)\A(?!.*bigram).*page_tokens = tokens\[offset : offset \+ self\.page_size\]",
    ),
    D(
        "DIV-41",
        "0.5.20+",
        "NS-8",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.clear",
        "clear() removes every object of the Mooncake store, the pages of other models and ranks that share it "
        "included.",
        r"self\.store\.remove_all\(\)",
    ),
    D(
        "DIV-42",
        "0.5.20+",
        "NS-8",
        "mem_cache/storage/npu_memcache/npu_memcache_store.py",
        "NpuMemcacheStore.clear",
        "clear() removes every object of the memcache store, the pages of other models and ranks that share it "
        "included.",
        r"self\.store\.remove_all\(\)",
    ),
    D(
        "DIV-43",
        "0.5.21+",
        "CTL-9",
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache._check_pp_prefetch_progress",
        "In pipeline-parallel ticket mode (buffer-only host memory, more than one stage; Mooncake only before "
        "0.5.23) a ticketed prefetch is admitted only once its final ack came: the stop policy is never read, so "
        "best_effort and timeout wait for the whole load as wait_complete does.",
        r"(?s)\A(?!.*prefetch_stop_policy).*is_pp_prefetch_ready",
    ),
    D(
        "DIV-44",
        "0.5.20+",
        "HYB-10",
        "speculative/base_spec_worker.py",
        "BaseSpecWorker._build_hicache_draft_plan",
        "A draft that cannot be packed (EAGLE3, or a multi-layer EAGLE draft whose model config names no nextn "
        "layers) registers only its first draft runner's KV pool as the sidecar, so the draft KV of later "
        "speculative steps is neither backed up nor restored while its pages are.",
        r"device_pools=draft_pools\[:1\]",
    ),
    D(
        "DIV-45",
        "0.5.20-0.5.21",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController.backup_thread_func",
        "The PD-decode offload's controller (a plain HiCacheController, DecodeKVCacheOffloadManager) catches only "
        "queue.Empty around _page_backup: a write that raises ends its backup thread, so no later offload is "
        "acked or has its host pages freed.",
        r"self\._page_backup\(operation\)",
    ),
    D(
        "DIV-46",
        "0.5.20+",
        "HYB-4",
        "mem_cache/hicache_storage.py",
        "count_pool_hits",
        "A pool's hit is the index of its first False, else the list's length, and the list's length is never "
        "compared with the keys: a list longer than len(keys) whose first False sits at index len(keys) counts as "
        "every page loaded.",
        r"rs\.index\(False\) if False in rs else len\(rs\)",
    ),
    D(
        "DIV-47",
        "0.5.20+",
        "HYB-6",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.batch_exists_v2",
        "Each pool is judged over the keys of the running fold (keys[:final_pages]), not of the KV hit, so a "
        "pool listed after one that shortened the fold (DeepSeek-V4's ALL_PAGES KV-derived sidecars after its "
        "SWA window; a trailing pool likewise, HYB-7) reports a boundary shorter than its own; the folded hit "
        "is unaffected.",
        r"(?s)_get_hybrid_page_component_keys\(\s*keys\[:final_pages\].*ALL_PAGES:\s*boundary = \(\s*"
        r"page_exists\.index\(False\) if False in page_exists else final_pages",
    ),
    D(
        "DIV-48",
        "0.5.20+",
        "NS-8",
        "mem_cache/storage/nixl/nixl_utils.py",
        "NixlFileManager.clear",
        "HiCacheNixl's clear() (file plugins) removes every file below the configured storage directories, which "
        "every model and rank on the host shares, so one rank's clear removes the pages of all.",
        r"for root, _dirs, files in os\.walk\(base\)",
    ),
    D(
        "DIV-49",
        "0.5.20-0.5.21",
        "LNK-10",
        "mem_cache/unified_cache/unified_cache_linker.py",
        "UnifiedCacheLinkerWrapper._queue_load",
        "A load that returns False raises RuntimeError after the loaded tail was inserted into the tree, instead "
        "of the request recomputing (0.5.22 asks the linker before it prepares the tail and aborts on False).",
        r"if not queued:[^\n]*\n[^\n]*\n\s*raise RuntimeError",
    ),
    D(
        "DIV-50",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.__init__",
        "Object keys carry no attention-CP rank (0.5.23: only with decode context parallelism, dcp_size > 1), so "
        "CP ranks that hold different slices of a page (an MLA or DSA model, or MHA under DP attention) read and "
        "write one object.",
        r'self\.mla_suffix = f"\{self\.pp_rank\}"',
    ),
    D(
        "DIV-51",
        "0.5.20+",
        "BE-21",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.batch_exists_v2",
        "The 3FS backend folds with the minimum of each pool's largest hit (a trailing pool's longest complete window) "
        "and reports no restorable_prefix_pages, so it can name a length a trailing pool cannot restore.",
        r"final_pages = min\(final_pages, boundary\)",
    ),
    D(
        "DIV-52",
        "0.5.20+",
        "BE-21",
        "mem_cache/storage/npu_memcache/npu_memcache_store.py",
        "NpuMemcacheStore.batch_exists_v2",
        "The NPU memcache backend folds with the minimum of each pool's largest hit (a trailing pool's longest complete window) "
        "and reports no restorable_prefix_pages, so it can name a length a trailing pool cannot restore.",
        r"final_pages = min\(final_pages, boundary\)",
    ),
    D(
        "DIV-53",
        "0.5.20+",
        "BE-21",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.batch_exists_v2",
        "The UMBP backend folds with the minimum of each pool's largest hit (a trailing pool's longest complete window) "
        "and reports no restorable_prefix_pages, so it can name a length a trailing pool cannot restore.",
        r"final_pages = min\(final_pages, boundary\)",
    ),
    D(
        "DIV-54",
        "0.5.20+",
        "BE-21",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.batch_exists_v2",
        "The NIXL backend folds with the minimum of each pool's largest hit (a trailing pool's longest complete window) "
        "and reports no restorable_prefix_pages, so it can name a length a trailing pool cannot restore.",
        r"final_pages = min\(final_pages, boundary\)",
    ),
    D(
        "DIV-55",
        "0.5.22+",
        "BE-21",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "SeaweedFSStore.batch_exists_v2",
        "The SeaweedFS backend folds with the minimum of each pool's largest hit (a trailing pool's longest complete window) "
        "and reports no restorable_prefix_pages, so it can name a length a trailing pool cannot restore.",
        r"final_pages = min\(final_pages, boundary\)",
    ),
    D(
        "DIV-56",
        "0.5.20+",
        "BE-5",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.get",
        "A page file shorter than the page, or one that cannot be opened for another reason than being absent, "
        "raises OSError out of get (and batch_get, batch_get_v2) instead of answering a miss.",
        r'raise IOError\(f"Short read',
    ),
    D(
        "DIV-57",
        "0.5.20+",
        "BE-13",
        "mem_cache/hicache_storage.py",
        "HiCacheFile._collect_existing_component_keys",
        "batch_exists_v2 counts any file under a page's name as present, an empty or short one included.",
        r"if os\.path\.exists\(path\):",
    ),
    D(
        "DIV-58",
        "0.5.20+",
        "HYB-7",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.batch_exists_v2",
        "A TRAILING_PAGES pool listed after a pool that shortened the fold is judged within the running fold "
        "(prefix lengths from final_pages down), not within the KV hit, so it reports the largest length "
        "within the fold (DeepSeek-V4's state pools after its KV-derived sidecars); the folded hit is "
        "unaffected.",
        r"for prefix_len in range\(final_pages, 0, -1\)",
    ),
    D(
        "DIV-59",
        "0.5.20+",
        "BE-7",
        "mem_cache/storage/nixl/nixl_utils.py",
        "NixlFileManager.open_file",
        "With a file plugin, HiCacheNixl opens each page's file under its final name with O_CREAT before the "
        "transfer writes it, and never removes it when the write fails; batch_exists counts a page by its "
        "file, so a page is visible half-written, and stays visible after a failed write.",
        r"os\.O_RDWR \| os\.O_CREAT if create",
    ),
    D(
        "DIV-60",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.from_env_config",
        "The 3FS backend names its data file and metadata by TP rank and page key alone, never by the model: "
        "two models sharing one 3FS store and metadata server read each other's pages (with the local "
        "metadata client they overwrite each other's data file).",
        r"(?s)\A(?!.*model_name).*file_path_prefix'\]\}\.\{rank",
    ),
    D(
        "DIV-61",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/aibrix_kvcache/aibrix_kvcache_storage.py",
        "AibrixKVCacheStorage.batch_set",
        "The AIBrix backend keys blocks by the page keys and the tensor shape alone, never by the model.",
        r"BlockHashes\(keys, self\.page_size\)",
    ),
    D(
        "DIV-62",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/npu_memcache/npu_memcache_store.py",
        "NpuMemcacheStore._init_runtime_fields",
        "The NPU memcache backend's key suffixes carry the TP, PP and CP ranks but never the model.",
        r'(?s)\A(?!.*model_name).*self\.mha_suffix = f"\{self\.local_rank\}',
    ),
    D(
        "DIV-63",
        "0.5.20+",
        "RANK-1",
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.query_storage_hit_length",
        "The PD-decode side's storage probe, which sizes the request's restore and the span of its prefetch, "
        "reduces its hit with MIN over the attention CP and TP groups only, never the PP group (the prefetch "
        "that follows is reduced again, over PP too).",
        r"_all_reduce_attn_groups",
    ),
)
"""Every recorded divergence, oldest release first within a clause."""


def divergences() -> tuple[Divergence, ...]:
    """Return every divergence, after checking that each names a known clause and valid releases."""
    seen: set[str] = set()
    for item in DIVERGENCES:
        if item.id in seen:
            raise ValueError(f"Divergence.id: duplicate ID (got {item.id!r})")
        seen.add(item.id)
        clause(item.clause_id)
        _release_bounds(item.releases)
    return DIVERGENCES


def divergences_for_release(version: str) -> tuple[Divergence, ...]:
    """Return the divergences pinned release ``version`` shows."""
    return tuple(item for item in divergences() if item.holds_for(version))


def render_divergences() -> str:
    """Return ``docs/divergences.md``: every recorded divergence, and which release shows which."""
    lines = [
        "# Where released SGLang diverges from the contract",
        "",
        "<!-- Generated by `hicache-conform divergences --write docs/divergences.md`; do not edit by hand. -->",
        "",
        "The clause stays; the divergence is recorded here, and a test on each release named reads "
        "that release's code and shows the divergence is still there, so an upstream fix is noticed. "
        "Machine-readable: `hicache_spec.divergences.DIVERGENCES`.",
        "",
        "| id | releases | clause | where in SGLang | what SGLang does | upstream |",
        "|---|---|---|---|---|---|",
    ]
    for item in divergences():
        releases = ", ".join(v for v in SGLANG_RELEASES if item.holds_for(v))
        lines.append(
            f"| {item.id} | {releases} | {item.clause_id} | `{item.file}` `{item.function}` | "
            f"{item.behaviour} | {item.upstream or '–'} |"
        )
    return "\n".join(lines) + "\n"
