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
    suite_meets: bool = True
    """Whether the conformance suite's run of the in-tree class meets the divergence's condition, so that its
    clause fails there (False for one that needs several processes, a missing storage directory or a pool the suite
    does not build); a run expects a failure only where it does."""

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
        "The prefetch prefix is built from the anchor node's ancestors, without the anchor's own pages (the Rust "
        "tree core's binding, the default from 0.5.21, builds it the same way).",
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
        "The KV-derived batch_get_v2 of a slice is called without extra_info, so it carries no prefix: with "
        "batch_get_v1 the slice's KV read carries one, on the legacy batch_get path neither read does.",
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
        "The prefetch prefix is built from the anchor node's ancestors without the anchor's own pages: [] while "
        "the anchor's pages precede the call's first key (an anchor under the root), else a list missing the "
        "anchor's pages (the Rust tree core's binding, the default from 0.5.21, builds it the same way).",
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
        "receive the full chain (0.5.21+; 0.5.20's carry no prefix, DIV-18).",
        r"(?s)\A(?!.*prefix_keys).*operation\.hash_value = original_hashes\[trim_pages:\]",
    ),
    D(
        "DIV-22",
        "0.5.20-0.5.21",
        "CTL-6",
        "managers/cache_controller.py",
        "HiCacheController.prefetch_io_aux_func",
        "The final ack is put only after _page_transfer returns and the loop catches only queue.Empty: a backend "
        "that raises, or returns a result the controller cannot read (a short v1 list, a None v2 result or "
        "entry), ends the prefetch IO thread, and neither that prefetch nor any later one on the buffer gets its "
        "final ack.",
        r"self\._page_transfer\(operation\)\s+self\.prefetch_sync_queue\.put\(",
    ),
    D(
        "DIV-23",
        "0.5.20-0.5.21",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer",
        "A KV read that raises, or returns a result the controller cannot read (None, a v1 list shorter than the "
        "keys), is not caught: the exception ends the prefetch IO thread, and no later prefetch is read.",
        r"(?s)\A(?!.*except Exception).*self\._page_transfer_kv_batch\(",
    ),
    D(
        "DIV-24",
        "0.5.20-0.5.21",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._page_transfer_sidecar",
        "A sidecar read that raises, or returns a result the controller cannot read (None, a None entry), is not "
        "caught: the exception ends the prefetch IO thread before the sidecar ack.",
        r"(?s)\A(?!.*except Exception).*self\.storage_backend\.batch_get_v2\(",
    ),
    D(
        "DIV-25",
        "0.5.20-0.5.21",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController.prefetch_thread_func",
        "A hit query that raises, or returns a hit the controller cannot use (None), is not caught (the loop "
        "catches only queue.Empty): the exception ends the hit-query thread, and no later prefetch is queried or "
        "acked.",
        r"(?s)\A(?!.*except Exception).*self\._storage_hit_query\(",
    ),
    D(
        "DIV-26",
        "0.5.20-0.5.21",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.backup_thread_func",
        "A write that raises, or returns a result the controller cannot read (None, a non-mapping, a None entry),"
        " is not caught (the loop catches only queue.Empty): the exception ends the backup thread, and no backup "
        "ack follows.",
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
        "With is_mla_model every key gets the suffix without the TP rank, Mamba state's and an MHA draft or "
        "draft-SWA pool's included, so the Mamba state every TP rank writes under one key "
        "(HybridCacheController.should_backup) lands in one file, the first rank's shard kept (set skips an "
        "existing key) unless ranks race to the rename, and every rank reads that shard, as it reads the writer's"
        " shard of a draft pool.",
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
        "In buffer-only mode a write-through of a pool alone (SWA, or Mamba state) stores only that pool's pages "
        "of the node (SWA's window, Mamba's last page), with the node's ancestor prefix and no KV span, so its "
        "prefix leaves out the node's pages before those keys (0.5.23 extends it for SWA alone: DIV-148).",
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
        "The PD-decode offload's controller for an MHA or MLA model (a plain HiCacheController, "
        "DecodeKVCacheOffloadManager) catches only queue.Empty around _page_backup: a write that raises, or a "
        "batch_set_v1 that returns None, ends its backup thread, so no later offload is acked or has its host "
        "pages freed.",
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
        "The UMBP backend folds with the minimum of each pool's largest hit (a trailing pool's longest complete "
        "window) and reports no restorable_prefix_pages, so it can name a length a trailing pool cannot restore; "
        "and it asks each pool only over the pages the earlier pools left, so a later pool's extra_pool_hit_pages"
        " entry falls below that pool's own boundary.",
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
    D(
        "DIV-64",
        "0.5.20+",
        "BE-11",
        "mem_cache/storage/eic/eic_storage.py",
        "EICStorage.clear",
        "clear() returns at once and removes nothing, without raising, so SGLang takes the clear as done while "
        "batch_exists still counts every page written before.",
        r"(?s)\Adef clear\(self\)[^:]*:\s*return\s*\Z",
    ),
    D(
        "DIV-65",
        "0.5.20+",
        "BE-14",
        "mem_cache/storage/eic/eic_storage.py",
        "EICStorage.batch_set_v1",
        "For an MHA model with the page_first layout (zero copy) each page is written as a _k and a _v object and"
        " the flags of both come back, 2·len(keys) entries (the read folds them back to len(keys); SGLang takes "
        "only the AND of the write's).",
        r"results = self\.batch_set\(keys, values\)\s+return results",
    ),
    D(
        "DIV-66",
        "0.5.20+",
        "BE-17",
        "mem_cache/storage/eic/eic_storage.py",
        "EICStorage.generic_batch_set",
        "The copying write path (every layout but page_first) logs a failed mset and reports every page written "
        "when the first key's status is SUCCESS, so a partly failed slice counts as stored.",
        r"(?s)err_code = set_outcome\.status_codes\[0\]\s+if err_code != eic\.StatusCode\.SUCCESS:.*return \[True\] \* len\(keys\)",
    ),
    D(
        "DIV-67",
        "0.5.20+",
        "NS-2",
        "mem_cache/storage/eic/eic_storage.py",
        "EICStorage._init_eic_prefix",
        "Object names carry no pipeline stage: with more than one stage every stage writes its own layers under "
        "the same names and reads the others' as hits.",
        r"(?s)\A(?!.*pp_rank).*_mha_attn_\{self\.host_kvcache_layout\}_\{self\.rank\}_\{self\.world_size\}_@sglang",
    ),
    D(
        "DIV-68",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/eic/eic_storage.py",
        "EICStorage._init_eic_prefix",
        "Object names carry no attention-CP rank, so CP ranks that hold different slices of a page (an MLA or DSA"
        " model, or MHA under DP attention) read and write one object.",
        r"(?s)\A(?!.*attn_cp_rank).*_mla_att_\{self\.host_kvcache_layout\}@sglang",
    ),
    D(
        "DIV-69",
        "0.5.20+",
        "BE-11",
        "mem_cache/hicache_storage.py",
        "HiCacheStorage.clear",
        "HiCacheSiMM and AibrixKVCacheStorage define no clear(), so the base class's, which removes nothing and "
        "raises nothing, answers: "
        "SGLang takes the clear as done while every page is still found.",
        r"def clear\(self\) -> None:\s+pass",
    ),
    D(
        "DIV-70",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/simm/hicache_simm.py",
        "HiCacheSiMM.__init__",
        "Keys carry the TP and PP ranks but never the model name, so two models sharing one SiMM cluster read "
        "each other's pages.",
        r'(?s)\A(?!.*\{self\.model_name\}).*self\.mha_suffix = f"\{self\.local_rank\}"',
    ),
    D(
        "DIV-71",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/simm/hicache_simm.py",
        "HiCacheSiMM.__init__",
        "Keys carry no attention-CP rank, so CP ranks that hold different slices of a page (an MLA or DSA model, "
        "or MHA under DP attention) share one object.",
        r'(?s)\A(?!.*attn_cp_rank).*self\.mla_suffix = f"\{self\.pp_rank\}"',
    ),
    D(
        "DIV-72",
        "0.5.22+",
        "NS-4",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "key_scope",
        "The model name enters the object-key prefix with every '/' made '-', so the models 'org/model' and "
        "'org-model' share one namespace.",
        r'"-"\.join\(storage_config\.model_name\.split\("/"\)\)',
    ),
    D(
        "DIV-73",
        "0.5.22",
        "NS-1",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "SeaweedFSStore._component_key",
        "With is_mla_model every sidecar, Mamba state included, is named <key>.<pool> under a prefix without the "
        "TP rank, so every TP rank writes its Mamba shard to one object and reads another rank's.",
        r'else f"\{key\}\.\{name\}"',
    ),
    D(
        "DIV-74",
        "0.5.22+",
        "NS-8",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "SeaweedFSStore.clear",
        "clear() deletes every object under its key prefix, which adds the PP and CP parts only above one and the"
        " TP part only for MHA, so it also deletes the pages of instances of the same model with more stages or "
        "CP ranks (and an MLA instance's, every MLA deployment of the model).",
        r'prefix = f"\{self\.key_prefix\}/" if self\.key_prefix',
    ),
    D(
        "DIV-75",
        "0.5.22+",
        "BE-11",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "SeaweedFSStore.clear",
        "clear() discards what delete_objects returns, whose per-object Errors a partly failed delete reports "
        "without raising, so it returns normally with pages left for batch_exists to find.",
        r"^(?![\s\S]*Errors)[\s\S]*self\._s3\.delete_objects\(",
    ),
    D(
        "DIV-76",
        "0.5.22+",
        "BE-13",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "SeaweedFSStore.exists",
        "A page counts as present when head_object succeeds, whatever its length, so an empty or short object is "
        "a hit of batch_exists and batch_exists_v2 (only the read refuses it).",
        r"^(?![\s\S]*ContentLength)[\s\S]*self\._s3\.head_object\(",
    ),
    D(
        "DIV-77",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.batch_exists",
        "KV objects are named by page key and rank suffix alone, without the model (the model prefix reaches only"
        " sidecar keys), so two models sharing one UMBP store read each other's KV pages.",
        r"^(?![\s\S]*config_prefix)[\s\S]*batch_exists_consecutive\(query_keys\)",
    ),
    D(
        "DIV-78",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.__init__",
        "The sidecar key prefix carries the model name with every '/' made '-', so the models 'org/model' and "
        "'org-model' share the sidecar namespace.",
        r'prefix_parts\.append\("-"\.join\(storage_config\.model_name\.split\("/"\)\)\)',
    ),
    D(
        "DIV-79",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.__init__",
        "Object keys carry no attention-CP rank, so CP ranks that hold different slices of a page (an MLA or DSA "
        "model, or MHA under DP attention) read and write one object in the shared modes.",
        r'self\.mla_suffix = f"\{self\.pp_rank\}"',
    ),
    D(
        "DIV-80",
        "0.5.20+",
        "LNK-21",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.__init__",
        "The UMBP direct linker's store puts the model path in its object keys with every '/' made '-', so a "
        "linker for 'a/b' finds the pages stored for 'a-b'.",
        r'prefix_parts\.append\("-"\.join\(storage_config\.model_name\.split\("/"\)\)\)',
    ),
    D(
        "DIV-81",
        "0.5.20+",
        "NS-2",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.__init__",
        "The key suffix is _{model}_{tp_rank}_{tp_size} (MLA: _{model}) with no pipeline stage, so the same TP "
        "rank of two stages reads and writes one object for pages of different layers.",
        r'f"_\{model_name\}_\{tp_rank\}_\{tp_size\}"',
    ),
    D(
        "DIV-82",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.__init__",
        "The key suffix carries no attention-CP rank, so CP ranks that hold different slices of a page (an MLA or"
        " DSA model, or MHA under DP attention) read and write one object.",
        r'f"_\{model_name\}_\{tp_rank\}_\{tp_size\}"',
    ),
    D(
        "DIV-83",
        "0.5.20+",
        "NS-4",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.__init__",
        "The model name enters the key suffix with every '/' made '-', so the models 'org/model' and 'org-model' "
        "share one namespace.",
        r'"-"\.join\(model_name\.split\("/"\)\)',
    ),
    D(
        "DIV-84",
        "0.5.20+",
        "NS-1",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl._get_suffixed_key",
        "With is_mla_model every pool's key ends in the TP-less suffix, so a TP-sharded pool beside MLA KV (Mamba"
        " state in 0.5.20-0.5.21, an MHA draft pool in every release) is one object for every TP rank, each "
        "reading another rank's shard.",
        r"return key \+ self\.config_suffix",
    ),
    D(
        "DIV-85",
        "0.5.20+",
        "NS-6",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl._get_hybrid_key_multiplier",
        "batch_exists_v2 names a Mamba page's objects from the conv buffers (1 + their count) while the zero-copy"
        " writes and reads name them from the pool's page pointers, which leave out the temporal state of a "
        "conv-only model, so the lookup asks for objects never written and the pool's hit is always 0.",
        r'if pool_name == PoolName\.MAMBA:\s+return 1 \+ len\(getattr\(host_pool, "conv_buffer", \[\]\) or \[\]\)',
    ),
    D(
        "DIV-86",
        "0.5.20+",
        "BE-11",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.clear",
        "With the object (S3) plugin clear() returns at once, removing nothing and raising nothing, so SGLang "
        "takes the clear as done while batch_exists still counts every object.",
        r"if self\.file_manager is None:\s+return\s*\n",
    ),
    D(
        "DIV-87",
        "0.5.20+",
        "BE-11",
        "mem_cache/storage/nixl/nixl_utils.py",
        "NixlFileManager.clear",
        "A page file that cannot be removed is logged and clear() returns normally, leaving it for batch_exists "
        "to find.",
        r'except OSError as e:\s+logger\.warning\(f"Failed to remove file',
    ),
    D(
        "DIV-88",
        "0.5.20-0.5.21",
        "BE-22",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.register_mem_host_pool_v2",
        "The bounce buffers of a sidecar pool are allocated in the pool's dtype but addressed by the flat page's "
        "byte size, so for a pool whose flat page is bytes (the DSA indexer) the object stored under a key does "
        "not hold that page's bytes while the write and the read both report True.",
        r"page_numel, host_pool\.dtype, pin_memory",
    ),
    D(
        "DIV-89",
        "0.5.20-0.5.21",
        "HYB-8",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl.register_mem_host_pool_v2",
        "The bounce buffers of a sidecar pool are allocated in the pool's dtype but addressed by the flat page's "
        "byte size, so a Mamba state page read back reports True with other bytes than were written.",
        r"page_numel, host_pool\.dtype, pin_memory",
    ),
    D(
        "DIV-90",
        "0.5.20+",
        "BE-19",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl._hybrid_pool_supports_zero_copy",
        "Zero copy is chosen for a sidecar pool without checking the host layout, so with direct IO off and the "
        "layer_first layout the pool's page pointers raise and batch_get_v2 and batch_set_v2 raise instead of "
        "returning a flag per page.",
        r'if not \(\s*hasattr\(host_pool, "get_page_buffer_meta"\)\s*and hasattr\(host_pool, "get_hybrid_pool_buffer"\)\s*\):\s*return False\s*buffers = host_pool\.get_hybrid_pool_buffer\(\)',
    ),
    D(
        "DIV-91",
        "0.5.20+",
        "BE-7",
        "mem_cache/storage/nixl/nixl_registry.py",
        "NixlRegistry.storage",
        "In path mode a page file is registered as rw,create under its final name, so the file exists before the "
        "transfer writes it and stays after a failed write.",
        r'parts = \["rw", "create"\] if direction == "WRITE" else \["ro"\]',
    ),
    D(
        "DIV-92",
        "0.5.20+",
        "BE-19",
        "mem_cache/storage/npu_memcache/npu_memcache_store.py",
        "NpuMemcacheStore._get_hybrid_page_component_keys",
        "Any sidecar pool but the indexer, Mamba and DRAFT pools (SWA, DRAFT_SWA, the DeepSeek-V4 pools) is "
        "accepted at registration and then makes batch_exists_v2, batch_get_v2 and batch_set_v2 raise instead of "
        "answering.",
        r'else:\s+raise ValueError\(f"Unsupported hybrid pool for batch v2 I/O: \{name\}"\)',
    ),
    D(
        "DIV-93",
        "0.5.23",
        "BE-32",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.describe_l3_object_layout",
        "Under decode context parallelism (an MLA model, dcp_size > 1) the layout is described through a one-page"
        " preprocessing of the host pool's physical page, whose assertion fails, so the call raises "
        "AssertionError instead of returning a layout.",
        r'self\._batch_preprocess\(\s*\[""\],\s*torch\.arange\(\s*self\.mem_pool_host\.page_size',
    ),
    D(
        "DIV-94",
        "0.5.20+",
        "BE-2",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.batch_exists",
        "With a logical KV anchor (DeepSeek-V4: no KV buffer) no KV object is ever stored and the v1 and v2 calls"
        " answer every page present, but batch_exists still looks the KV objects up, so it answers 0 for pages "
        "the backend reported stored (the PD-decode probe's query).",
        r'keys = self\._tag_keys\(keys\)\s*\n\s*if self\.is_mla_backend:\s*\n\s*query_keys = \[f"\{key\}_\{self\.mla_suffix\}_k"',
    ),
    D(
        "DIV-95",
        "0.5.20+",
        "BE-11",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.clear",
        "One failed removal (a file another rank removed first, every rank clearing one shared directory) ends "
        "clear() with False, the remaining files and the metadata cache left in place, and it never raises, so "
        "SGLang takes the clear as done.",
        r'except Exception as e:\s*\n\s*logger\.error\(f?"Failed to clear HiCacheFile storage: \{e\}"\)\s*\n\s*return False',
        suite_meets=False,
    ),
    D(
        "DIV-96",
        "0.5.23",
        "NS-1",
        "mem_cache/hicache_storage.py",
        "HiCacheFile._get_suffixed_key",
        "Only Mamba state gets the TP-rank suffix under is_mla_model: a TP-sharded MHA draft or draft-SWA pool "
        "beside MLA KV is one file for every TP rank, each reading the writer's shard.",
        r'if key\.endswith\(f"\.\{PoolName\.MAMBA\.value\}"\):\s*\n\s*return key \+ self\.tp_config_suffix\s*\n\s*return key \+ self\.config_suffix',
        suite_meets=False,
    ),
    D(
        "DIV-97",
        "0.5.20-0.5.21",
        "BE-4",
        "mem_cache/hicache_storage.py",
        "HiCacheFile._collect_existing_component_keys",
        "With the metadata cache off, batch_exists_v2 lists the storage directory, which only TP rank 0 creates, "
        "so on a host without it the lookup raises FileNotFoundError instead of answering a miss.",
        r"if self\.metadata_cache is None:\s*\n\s*existing_files = set\(\)\s*\n\s*with os\.scandir\(self\.file_path\) as entries:",
        suite_meets=False,
    ),
    D(
        "DIV-98",
        "0.5.20+",
        "NS-2",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.from_env_config",
        "The data file and metadata namespace are named by the TP rank alone (0 under MLA), never the pipeline "
        "stage, so stages with one TP rank read each other's layers as hits (global metadata) or overwrite each "
        "other's pages (local metadata).",
        r"^(?![\s\S]*pp_rank)[\s\S]*rank_for_path = 0 if is_mla_model else rank",
    ),
    D(
        "DIV-99",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.from_env_config",
        "The data file and metadata namespace are named by the TP rank alone, never the attention-CP rank, so CP "
        "ranks that hold different slices of a page (an MLA model, or MHA under DP attention) share them.",
        r"^(?![\s\S]*attn_cp_rank)[\s\S]*rank_for_path = 0 if is_mla_model else rank",
    ),
    D(
        "DIV-100",
        "0.5.20-0.5.22",
        "NS-1",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS._pool_batch_set",
        "Under is_mla_model every TP rank uses rank 0's namespace and a sidecar key without the TP rank, so every"
        " rank's Mamba shard goes to one key (the first write wins) and every rank restores that shard, as it "
        "restores the writer's shard of an MHA draft or draft-SWA pool.",
        r'component_keys = \[f"\{key\}_\{pool_name\}" for key in keys\]',
    ),
    D(
        "DIV-101",
        "0.5.23",
        "NS-1",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS._pool_component_key",
        "Under is_mla_model only Mamba state gets the TP rank: a TP-sharded MHA draft or draft-SWA pool beside "
        "MLA KV is one key in rank 0's namespace, so other ranks restore the writer's shard.",
        r'if self\.is_mla_model and pool_name == PoolName\.MAMBA:\s*return f"\{key\}_\{pool_name\}_\{self\.tp_rank\}_\{self\.tp_size\}"\s*return f"\{key\}_\{pool_name\}"',
    ),
    D(
        "DIV-102",
        "0.5.20+",
        "BE-14",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.batch_set_v1",
        "For an MHA model with a page_first layout (zero copy) each page is written as a -k and a -v object and "
        "both flags come back, 2·len(keys) entries (the read folds them; SGLang takes only the AND of the "
        "write's).",
        r"keys, values = self\._batch_set_preprocess\(keys, host_indices\)\s*results = self\._batch_set\(keys, values\)\s*return results",
    ),
    D(
        "DIV-103",
        "0.5.20+",
        "BE-5",
        "mem_cache/storage/hf3fs/mini_3fs_metadata_server.py",
        "Hf3fsGlobalMetadataClient._post",
        "A metadata-server request that fails (a lost connection after the retries, a namespace the server no "
        "longer has) raises RuntimeError, which no IO or lookup method of the 3FS backend catches.",
        r"except requests\.exceptions\.RequestException as e:[\s\S]*raise RuntimeError\(",
    ),
    D(
        "DIV-104",
        "0.5.20+",
        "BE-11",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.clear",
        "A failed metadata clear is logged and clear() returns normally, leaving the keys it could not clear for "
        "batch_exists to find.",
        r'except Exception as e:\s*logger\.error\(f"Failed to clear HiCacheHF3FS',
    ),
    D(
        "DIV-105",
        "0.5.20+",
        "NS-8",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.clear",
        "clear() empties its TP rank's whole metadata namespace, which other models, pipeline stages and CP ranks"
        " with that TP rank (and under MLA every TP rank) share.",
        r"self\.metadata_client\.clear\(self\.rank\)",
    ),
    D(
        "DIV-106",
        "0.5.20+",
        "BE-17",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.from_env_config",
        "Without a metadata server each process keeps its own page index over a data file named by TP rank alone,"
        " so processes with one TP rank (data-parallel replicas, stages, other models) allocate the same pages "
        "and a page written with True later reads back another process's bytes.",
        r"""metadata_client = Hf3fsLocalMetadataClient\(\)[\s\S]*file_path=f\"\{config\['file_path_prefix'\]\}\.\{rank_for_path\}\.bin""",
    ),
    D(
        "DIV-107",
        "0.5.20+",
        "BE-29",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.from_env_config",
        "Without a metadata server the page index lives only in the instance, so after a detach and a new attach "
        "none of the stored pages is found again and their slots are reused, while SGLang's existence cache still"
        " counts them.",
        r"file_path=f\"/data/hicache\.\{rank\}\.bin\"[\s\S]*metadata_client=Hf3fsLocalMetadataClient\(\)",
    ),
    D(
        "DIV-108",
        "0.5.20+",
        "BE-4",
        "mem_cache/storage/aibrix_kvcache/aibrix_kvcache_storage.py",
        "AibrixKVCacheStorage.batch_get",
        "A fetch that found only the leading keys (its library returns handles for the tokens fetched) fails an "
        "assertion that every key came back, so a batch whose last keys are missing raises instead of answering "
        "None for them.",
        r"assert len\(kv_blocks\) == len\(target_locations\)",
    ),
    D(
        "DIV-109",
        "0.5.20+",
        "BE-10",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl._prepare_pool_transfer",
        "On the bounce path (direct IO with a pool whose page is not 4 KiB aligned) a sidecar transfer of more "
        "than STORAGE_BATCH_SIZE keys is refused whole, so a hybrid backup or read of a longer span stores or "
        "loads none of that pool.",
        r"if len\(keys\) > STORAGE_BATCH_SIZE:",
    ),
    D(
        "DIV-110",
        "0.5.21+",
        "CTL-3",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.pp_prefetch_command_thread_func",
        "In pipeline-parallel ticket mode (buffer-only host memory, more than one stage; Mooncake only before "
        "0.5.23) a hit is never parked for host memory: 0.5.21-0.5.22 allocate it whole or drop the prefetch, "
        "0.5.23 cuts it to the free host space and drops it under the threshold.",
        r"(?s)_allocate_pp_prefetch_buffers\(.*mark_terminate\(\)",
    ),
    D(
        "DIV-111",
        "0.5.20-0.5.21",
        "CTL-12",
        "managers/cache_controller.py",
        "HiCacheController.prefetch_io_aux_func",
        "A backend that raises, or returns a result the controller cannot read, ends the prefetch IO thread "
        "before the final ack, whose drain frees the operation's unloaded tail: those host pages are never freed,"
        " nor those of every prefetch still on the buffer.",
        r"self\._page_transfer\(operation\)\s+self\.prefetch_sync_queue\.put\(",
    ),
    D(
        "DIV-112",
        "0.5.20+",
        "NS-3",
        "mem_cache/storage/aibrix_kvcache/aibrix_kvcache_storage.py",
        "AibrixKVCacheStorage.__init__",
        "A block is named by its page keys and a tensor spec of the TP rank's heads and the stage's layers, never"
        " the attention-CP rank, so under DP attention the CP ranks of an MHA model, which may hold different "
        "slices of a page, share one block.",
        r"(?s)\A(?!.*attn_cp).*KVCacheTensorSpec\(",
    ),
    D(
        "DIV-113",
        "0.5.20-0.5.21",
        "RANK-3",
        "managers/cache_controller.py",
        "HiCacheController.prefetch_io_aux_func",
        "A backend read that raises on one rank, or returns a result the controller cannot read (a v1 or legacy "
        "list shorter than the keys, a v1 result of None, a v2 result or pool entry of None, a legacy page the "
        "host pool refuses), ends that rank's prefetch IO thread: it emits no further slice, sidecar or final ack"
        " for the operation, and the other ranks wait forever in the next MIN all-reduce.",
        r"self\._page_transfer\(operation\)\s+self\.prefetch_sync_queue\.put\(",
    ),
    D(
        "DIV-114",
        "0.5.21",
        "LNK-14",
        "mem_cache/storage/mooncake_store/mooncake_direct_linker.py",
        "MooncakeDirectLinker.num_completed_loads",
        "With MLA dedup on (MLA pools, TP above 1) a broadcast batch is reported only when a poll finds its event"
        " done, while a batch whose plans differ across ranks is reported by the load thread as soon as it lands,"
        " so a later batch can be reported before an earlier one, differently on each rank.",
        r"self\.broadcast_events\[0\]\[0\]\.query\(\)",
    ),
    D(
        "DIV-115",
        "0.5.20+",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController._page_get_zero_copy",
        "A v1 read's result is read entry by entry, by truth, up to len(keys), and its length is never checked: a"
        " list longer than the keys, or entries such as 1, count as pages loaded, and a list too short counts its"
        " leading run when a False comes before its end (one that runs out raises, a failed slice from 0.5.22).",
        r"if not results\[i\]:",
    ),
    D(
        "DIV-116",
        "0.5.20+",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer_kv_batch",
        "A slice's loaded count is the minimum of the KV count and the counts of the pools the batch_get_v2 "
        "result holds (count_pool_hits), so a KV-derived pool the result leaves out lowers nothing: its pages "
        "count as loaded unread.",
        r"sidecar_hits = count_pool_hits\(sidecar_results\)[\s\S]*return min\(\[kv_hits, \*sidecar_hits\.values\(\)\]\)",
    ),
    D(
        "DIV-117",
        "0.5.23",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._sync_prefetch_hit_query",
        "With a TRAILING_PAGES pool the hit is turned into per-length flags outside the hit query's try, "
        "unchecked: a restorable_prefix_pages that is not a list of ints (an int, floats, strings) raises "
        "TypeError, and without one a kv_hit_pages above len(keys) indexes past the flags (IndexError); either "
        "ends the hit-query thread (or the pipeline ticket thread) while the other ranks wait in the MIN.",
        r"for page in pages:\s*\n\s*if 0 < page <= storage_hit_count // self\.page_size:",
    ),
    D(
        "DIV-118",
        "0.5.20+",
        "CTL-11",
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.query_storage_hit_length",
        "The PD-decode probe's hit query (always a plain batch_exists: its operation carries no pool transfers) "
        "runs on the decode scheduler thread with nothing catching it (the decode queue's prefix match calls it "
        "outside any try): a batch_exists that raises, or returns a hit the probe cannot use (None, a float, a "
        "string, or a count whose tokens do not fit an int32), ends the decode scheduler.",
        r"(?s)\A(?!.*except).*self\.cache_controller\._storage_hit_query\(operation\)",
    ),
    D(
        "DIV-119",
        "0.5.20+",
        "BE-19",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore._get_hybrid_page_component_keys",
        "With is_mla_model an MHA DRAFT or DRAFT_SWA pool (a host pool without components) is named with one "
        "object per page while its host pool gives a K and a V buffer per page, so batch_get_v2 and batch_set_v2 "
        "raise ValueError (a buffer-meta mismatch) instead of answering each page.",
        r'elif self\.is_mla_backend:\s*\n\s*suffixes = \[f"_\{mla_suffix\}_\{pool_name\}"\]\s*\n\s*elif getattr\(host_pool, "v_buffer", None\) is not None:',
        suite_meets=False,
    ),
    D(
        "DIV-120",
        "0.5.23",
        "NS-1",
        "mem_cache/storage/seaweedfs/seaweedfs_store.py",
        "SeaweedFSStore._component_key",
        "Only Mamba state gets the TP rank tag under is_mla_model: a TP-sharded MHA draft or draft-SWA pool "
        "beside MLA KV is one object for every TP rank, each reading the writer's shard.",
        r'return f"\{key\}\.\{name\}\{self\._mamba_rank_tag\}"\s*\n\s*return f"\{key\}\.\{name\}"',
        suite_meets=False,
    ),
    D(
        "DIV-121",
        "0.5.20+",
        "NS-5",
        "mem_cache/storage/sim_storage.py",
        "SimHiCacheStorage.__init__",
        "Keys are kept in the instance (one per rank process), so with is_mla_model and TP above 1 a rank other "
        "than the storage writer never sees the writer's pages and the MIN-reduced hit is always 0.",
        r"self\._keys: set\[str\] = set\(\)",
    ),
    D(
        "DIV-122",
        "0.5.20+",
        "BE-17",
        "mem_cache/storage/npu_memcache/npu_memcache_store.py",
        "NpuMemcacheStore._get_hybrid_page_component_keys",
        "An MHA draft pool's pages are named <key>_<mha suffix>_k and _v with no pool tag, the names an MHA "
        "model's KV page has: the draft's sidecar write (made before the KV write) takes the KV names, and "
        "batch_set_v1 then finds them present, skips the KV page and returns True, so a later hit reads the "
        "draft's bytes as KV.",
        r'(?s)name == PoolName\.DRAFT:.*?base_suffix = f"_\{self\.mha_suffix\}"\s*suffixes = \[f"\{base_suffix\}_k", f"\{base_suffix\}_v"\]',
        suite_meets=False,
    ),
    D(
        "DIV-123",
        "0.5.20+",
        "BE-19",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.register_mem_host_pool_v2",
        "A sidecar pool's page slot is sized from get_ksize_per_token, half the page of an MHA host pool (an MHA "
        "draft or draft-SWA pool, an MHA model's SWA pool), so batch_set_v2 and batch_get_v2 of such a pool move "
        "a whole page into half a slot: the client refuses it and they raise instead of answering each page.",
        r"pool_bytes_per_page = host_pool\.get_ksize_per_token\(\) \* pool_page_size",
        suite_meets=False,
    ),
    D(
        "DIV-124",
        "0.5.20+",
        "NS-8",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.clear",
        "clear() asks the mori client to clear with no key prefix or namespace, so where instances share one "
        "store (UMBP's standalone server, a node's shared SSD) it removes their pages too, other models' included"
        " (UMBP's keys carry no model name, DIV-77).",
        r"def clear\(self\) -> None:\s*\n\s*self\.client\.clear\(\)",
        suite_meets=False,
    ),
    D(
        "DIV-125",
        "0.5.20+",
        "BE-23",
        "mem_cache/storage/hf3fs/mini_3fs_metadata_server.py",
        "RankMetadata.reserve_and_allocate_page_indices",
        "With no free page, a write takes the least recently used key's page at once, while a read on another "
        "thread may already hold that page index; nothing in HiCacheHF3FS orders the two, so the read can report "
        "True with the new key's bytes, whole or torn (a full pool is this backend's normal state).",
        r"page_index = self\.key_to_index\.popitem\(last=False\)\[1\]",
        suite_meets=False,
    ),
    D(
        "DIV-126",
        "0.5.22+",
        "HYB-5",
        "mem_cache/buffer_mode/pipeline.py",
        "BufferModePipeline._write_intents",
        "In buffer-only host mode a node's backup becomes one storage operation per pool, the KV operation queued"
        " first (_pool_order), so KV is written before the node's SWA, Mamba or draft-SWA sidecars, and a "
        "sidecar's operation, dropped on its own, may never be attempted.",
        r"for pool in sorted\(pool_keys, key=self\._pool_order\)",
    ),
    D(
        "DIV-127",
        "0.5.20+",
        "BE-23",
        "mem_cache/hicache_storage.py",
        "HiCacheFile.exists",
        "With the metadata cache on, exists checks the file and only then adds the key to the cache, unordered "
        "against an eviction on the backup thread or a clear on the scheduler thread that removes both: a lookup "
        "landing between the two puts back a key whose file is gone, so batch_exists counts the page until the "
        "entry expires and set takes its already-stored shortcut without writing.",
        r"if os\.path\.exists\(tensor_path\):\s+if self\.metadata_cache is not None:\s+self\.metadata_cache\.add\(key\)",
        suite_meets=False,
    ),
    D(
        "DIV-128",
        "0.5.20+",
        "BE-23",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.get_stats",
        "get_stats copies the prefetch and backup page and bandwidth lists and then clears them with no lock "
        "while the IO and backup threads append to them, so a sample appended between the copy and the clear is "
        "lost and one report's lists can differ in length (the metrics only, never pages or hits).",
        r"extend\(self\.prefetch_pgs\)(?:(?!lock)[\s\S])*?self\.prefetch_pgs\.clear\(\)",
        suite_meets=False,
    ),
    D(
        "DIV-129",
        "0.5.20+",
        "BE-23",
        "mem_cache/storage/hf3fs/storage_hf3fs.py",
        "HiCacheHF3FS.get_stats",
        "get_stats copies the prefetch and backup page and bandwidth lists and then clears them with no lock "
        "while the IO and backup threads append to them, so a sample appended between the copy and the clear is "
        "lost and one report's lists can differ in length (the metrics only, never pages or hits).",
        r"extend\(self\.prefetch_pgs\)(?:(?!lock)[\s\S])*?self\.prefetch_pgs\.clear\(\)",
        suite_meets=False,
    ),
    D(
        "DIV-130",
        "0.5.20+",
        "BE-23",
        "mem_cache/storage/npu_memcache/npu_memcache_store.py",
        "NpuMemcacheStore.get_stats",
        "get_stats copies the prefetch and backup page and bandwidth lists and then clears them with no lock "
        "while the IO and backup threads append to them, so a sample appended between the copy and the clear is "
        "lost and one report's lists can differ in length (the metrics only, never pages or hits).",
        r"extend\(self\.prefetch_pgs\)(?:(?!lock)[\s\S])*?self\.prefetch_pgs\.clear\(\)",
        suite_meets=False,
    ),
    D(
        "DIV-131",
        "0.5.22+",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._sync_prefetch_hit_query",
        "The backend's extra_pool_hit_pages values are packed into an int tensor for the MIN outside the hit "
        "query's try: an entry of None or a string raises TypeError and ends the hit-query thread (in 0.5.23 also"
        " the pipeline ticket thread) while the other ranks wait in the MIN.",
        r"\[local\.get\(pool, _NO_POOL_VERDICT\) for pool in pools\]",
    ),
    D(
        "DIV-132",
        "0.5.20",
        "CTL-15",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._page_backup",
        "A non-writer reads its sidecar write flags by truth (all(bool(ok) ...)), so entries such as 1 report the"
        " whole span completed.",
        r"or not all\(bool\(ok\) for ok in result\)",
    ),
    D(
        "DIV-133",
        "0.5.21+",
        "CTL-15",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._page_backup_with_stable_layout",
        "A non-writer reads its sidecar write flags by truth (all(bool(ok) ...)), so entries such as 1 report the"
        " whole span completed.",
        r"or not all\(bool\(ok\) for ok in result\)",
    ),
    D(
        "DIV-134",
        "0.5.20+",
        "CTL-11",
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.check_hicache_events",
        "With storage metrics on, get_stats is called on the scheduler thread every step with nothing catching it"
        " and its result used unchecked: a get_stats that raises, or returns a dict or a class of its own "
        "(BE-12), ends the scheduler.",
        r"storage_metrics = self\.cache_controller\.storage_backend\.get_stats\(\)\s+if storage_metrics is None:",
    ),
    D(
        "DIV-135",
        "0.5.20+",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._storage_hit_query",
        "kv_hit_pages is never checked against len(keys): a count too large for an int32 (an unsigned -1 from a C"
        " binding) overflows the tensor of the cross-rank MIN outside any catch, ending the hit-query thread "
        "while the other ranks wait in the MIN.",
        r"kv_hit_pages = hit_result\.kv_hit_pages\s+operation\.pool_storage_result\.update_kv_hit_pages\(kv_hit_pages\)[\s\S]*?hash_value\[:kv_hit_pages\],\s*kv_hit_pages \* self\.page_size,",
    ),
    D(
        "DIV-136",
        "0.5.20+",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController._page_transfer_kv_batch",
        "No backend call has a deadline: a read that hangs on one rank keeps the other ranks in the slice's MIN "
        "with no final ack and its host pages held (a hung hit query or write likewise; on the scheduler thread a"
        " hang stalls the scheduler).",
        r"kv_hits = self\.page_get_func\(",
    ),
    D(
        "DIV-137",
        "0.5.23",
        "CTL-6",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.pp_prefetch_command_thread_func",
        "The pipeline ticket thread agrees on the hit after its try, and a raise there (DIV-117, DIV-131, "
        "DIV-135) makes its outer handler return: that ticket and every later one never reach the prefetch buffer"
        " or get a final ack, and their host pages are never freed.",
        r"storage_hit_count = self\._sync_prefetch_hit_query\(\s*operation, storage_hit_count\s*\)[\s\S]*?An unexpected failure cannot safely continue the collectives\.\s*return",
    ),
    D(
        "DIV-138",
        "0.5.23",
        "CTL-11",
        "managers/scheduler.py",
        "Scheduler._hicache_l3_layout",
        "describe_l3_object_layout is called on the scheduler thread with nothing catching it, at the startup "
        "handshake and for a runtime layout request: a raise (DIV-93's assertion under decode context "
        "parallelism) ends the scheduler.",
        r"return storage_backend\.describe_l3_object_layout\(",
    ),
    D(
        "DIV-139",
        "0.5.20+",
        "BE-13",
        "mem_cache/storage/nixl/hicache_nixl.py",
        "HiCacheNixl._query_keys_exist",
        "With a file plugin a page counts as present when its file exists, whatever its length: an empty or "
        "half-written file (created under its final name before the transfer, DIV-59) is a hit.",
        r"return \[res is not None for res in query_res\]",
        suite_meets=False,
    ),
    D(
        "DIV-140",
        "0.5.21-0.5.22",
        "CTL-1",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.submit_prefetch",
        "In the pipeline ticket mode a rank serving several stages asks each stage about the whole chain from its"
        " first key, even after an earlier stage's query found a miss, so keys past that miss, which cannot load,"
        " are queried.",
        r"_, rank_hit_count = self\._storage_hit_query\(operation, pp_rank=pp_rank\)",
    ),
    D(
        "DIV-141",
        "0.5.20+",
        "CTL-11",
        "managers/cache_controller.py",
        "HiCacheController._generic_page_get",
        "A legacy batch_get's result is read entry by entry up to len(keys) and its length is never checked: a "
        "list longer than the keys counts its leading entries that are not None as pages loaded, and a list too "
        "short raises (ending the IO thread in 0.5.20-0.5.21, failing the slice from 0.5.22).",
        r"for i in range\(len\(hash_values\)\):\s+if page_data\[i\] is None:",
    ),
    D(
        "DIV-142",
        "0.5.20+",
        "BE-2",
        "mem_cache/storage/umbp/umbp_store.py",
        "UMBPStore.batch_exists",
        "With a logical KV anchor (DeepSeek-V4: no KV buffer) the v1 writes store no KV object and "
        "batch_exists_v2 answers every page present, but batch_exists still looks the KV objects up, so it "
        "answers 0 for pages the backend reported stored (the PD-decode probe's query).",
        r"(?s)\A(?!.*_kv_anchor_is_logical).*hit_count = self\.client\.batch_exists_consecutive\(query_keys\)",
        suite_meets=False,
    ),
    D(
        "DIV-143",
        "0.5.20+",
        "BE-25",
        "managers/cache_controller.py",
        "HiCacheController._generate_storage_config",
        "tp_lcm_size from the extra config is checked only when truthy: a 0 or a negative multiple of tp_size "
        "passes into the storage config the backend receives (read as unset: should_split_heads stays False).",
        r"if tp_lcm_size:\s+assert tp_lcm_size % (?:self\.)?tp_size == 0",
    ),
    D(
        "DIV-144",
        "0.5.21+",
        "NS-4",
        "mem_cache/storage/tensorcast_store/host_allocator.py",
        "resolve_tensorcast_model_id",
        "TensorCast keys its artifacts by tensorcast.model_id when the extra config sets it, the model name left "
        "out, and otherwise by the model name stripped of surrounding whitespace, so two instances that differ "
        "only in model_name can share one keyspace.",
        r"if config\.model_id is not None:\s+return config\.model_id",
        suite_meets=False,
    ),
    D(
        "DIV-145",
        "0.5.20+",
        "HYB-10",
        "disaggregation/decode_kvcache_offload_manager.py",
        "DecodeKVCacheOffloadManager.__init__",
        "The PD-decode offload builds a KV-only host pool and a plain controller for any MHA or MLA pool (a DSA "
        "pool is one) and registers no draft pool, so with a DSA model it backs pages up without their index "
        "buffer, and under speculative decoding without their draft KV.",
        r'if not isinstance\((?:self\.)?kv_cache, \(MHATokenToKVPool, MLATokenToKVPool\)\):\s+raise ValueError\("Unsupported KV cache type for decode offload"\)\s+self\.decode_host_mem_pool = build_kv_host_pool\(',
        suite_meets=False,
    ),
    D(
        "DIV-146",
        "0.5.20+",
        "BE-11",
        "mem_cache/storage/mooncake_store/mooncake_store.py",
        "MooncakeStore.clear",
        "clear() calls the store's remove_all and drops its result; Mooncake removes only objects whose leases "
        "have expired, and a lookup or read grants a lease, so pages asked for shortly before the clear survive "
        "it, are still found, and nothing is raised.",
        r"self\.store\.remove_all\(\)",
        suite_meets=False,
    ),
    D(
        "DIV-147",
        "0.5.21-0.5.22",
        "CTL-11",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController.submit_prefetch",
        "In the pipeline ticket mode the stage-0 hit query's count is packed into the int32 tensor of the ranks' "
        "MIN outside the query's try, on the scheduler thread: min() caps it only from above, so a kv_hit_pages "
        "whose tokens fall below the int32 range raises and ends the scheduler.",
        r"storage_hit_count = min\(storage_hit_count, rank_hit_count\)[\s\S]*?hit_tensor = torch\.tensor\(storage_hit_count, dtype=torch\.int\)",
    ),
    D(
        "DIV-148",
        "0.5.23",
        "PFX-2",
        "mem_cache/buffer_mode/pipeline.py",
        "BufferModePipeline.finish_backup_ack",
        "In buffer-only mode a Mamba state write (a pool written alone: its key the node's last page, no KV span)"
        " carries only the node's ancestor prefix: the prefix is extended with the node's earlier pages for SWA "
        "and AUXILIARY_SWA alone, so it leaves out the node's pages before its key ([] for a node under the "
        "root).",
        r"if intent\.pool in \(PoolName\.SWA, PoolName\.AUXILIARY_SWA\):",
        suite_meets=False,
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
