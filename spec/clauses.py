"""Every clause of the contract. IDs are stable: append, never renumber; retire instead.

One long module on purpose: it is the registry's data, one entry per clause, read top to bottom.
"""

from __future__ import annotations

from hicache_spec._clause import Clause
from hicache_spec.clauses_linker import LINKER_CLAUSES

__all__ = ["CLAUSES", "STORAGE_BATCH_SIZE"]

STORAGE_BATCH_SIZE = 128
"""Pages per batched storage call (SGLang's ``STORAGE_BATCH_SIZE``); see CTL-2."""

C = Clause

CLAUSES: tuple[Clause, ...] = (
    # ---------------------------------------------------------------- KEY
    C(
        "KEY-1",
        "core",
        "engine",
        "Page i's key is the lowercase hex SHA-256 over the 32 raw bytes of page i-1's digest (absent for the "
        "first page of a chain without a prior hash or namespace seed) followed by each token word of page i as 4"
        " bytes little-endian unsigned, when every word of the page fits in 32 bits (a wider page: KEY-5; "
        "releases before 0.5.23 refuse it). A token word is a token, or an element of a bigram pair or tuple "
        "token (KEY-6).",
        "Engines and backends that compute keys independently must agree byte for byte, "
        "or a cache written by one is never hit by another.",
        "sglang mem_cache/utils.py get_hash_str, mem_cache/cpp_utils/native_hash.py _native_hash_input, "
        "mem_cache/cpp_utils/hash_binding.cpp hash_page, hash_pages_to_hex_blob; mem_cache/rust_tree_core (the "
        "mem_cache extension's get_hash_str and node hashes; the default tree core from 0.5.21, "
        "unified_cache/tree_core_registry.py)",
    ),
    C(
        "KEY-2",
        "core",
        "both",
        "A page key is a non-empty str; every key SGLang sends a backend to store, read or look up is 64 "
        "lowercase hex characters (strict mode checks it), and keys that differ in any character name different "
        "pages. A TRAILING_PAGES transfer of a hit query carries placeholder keys, which count its window only "
        "(HYB-7).",
        "Keys are used as object names and dictionary keys; a non-str or empty key is a caller bug that must be "
        "caught at the boundary, not deep in a backend, and a backend that shortens keys makes two pages one.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage (keys: List[str]); mem_cache/utils.py get_hash_str; "
        "mem_cache/cpp_utils/hash_binding.cpp digest_to_hex_chars; mem_cache/unified_cache/components/swa.py, "
        "mamba.py (the placeholder keys)",
    ),
    C(
        "KEY-3",
        "core",
        "engine",
        "The key chain of a prefetch starts from the anchor node's last page hash, or, at the root, "
        "from the request's namespace seed (KEY-4), so a key names the whole token prefix up to and "
        "including its page.",
        "Two requests share a page key only when they share every token before it; that is what "
        "makes a key safe to look up without the tokens.",
        "sglang mem_cache/utils.py get_storage_hash_str, compute_node_hash_values; managers/scheduler.py (the "
        "prefetch anchor: the last hash value of the request's last host node, or in buffer-only mode at the root"
        " its deepest device node); mem_cache/unified_radix_cache.py UnifiedRadixCache.prefetch_from_storage (the"
        " request's extra_key and cache_salt on the key); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController._storage_hit_query, pp_prefetch_command_thread_func (0.5.21-0.5.22's other "
        "stages); mem_cache/rust_tree_core/adapter.py RustUnifiedTreeCore.get_last_hash_value, "
        "backfill_missing_hash_values (the default tree core from 0.5.21); "
        "mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinkerWrapper._tail_hashes (the linker's own"
        " chain)",
    ),
    C(
        "KEY-4",
        "core",
        "engine",
        "A chain without a prior hash whose request has an extra_key or a cache_salt starts from the "
        "namespace seed: SHA-256 over b'sglang-cache-namespace-v1' then, per part (extra_key, "
        "cache_salt), 0x00 when absent or 0x01, its UTF-8 length as 8 bytes little-endian and its "
        "bytes; a request with neither has no seed. An empty extra_key or cache_salt reaches the seed "
        "as absent (the request drops it first).",
        "Requests with different LoRA adapters or salts must never share pages, and absent and "
        "joined parts must give different seeds.",
        "sglang mem_cache/utils.py storage_namespace_seed, get_storage_hash_str (0.5.21+: the default Rust tree "
        "core's node hashes too, byte for byte the same); managers/io_struct.py "
        "GenerateReqInput._normalize_single_inputs and, for a batch, _normalize_extra_key and "
        "_normalize_cache_salt (an empty part becomes None); managers/schedule_batch.py Req.__init__ and "
        "mem_cache/radix_cache.py RadixKey.__init__ (an empty cache_salt becomes None)",
    ),
    C(
        "KEY-5",
        "core",
        "engine",
        "A page holding a token word above 2**32-1 is hashed as the prior digest, the byte 0xFF, then "
        "every word of the page as 8 bytes little-endian unsigned; words must be below 2**63.",
        "Vocabularies and multimodal ids beyond 32 bits must hash without colliding with 4-byte pages; "
        "the odd tag byte keeps the two encodings apart. Releases before 0.5.23 refuse such tokens.",
        "sglang 0.5.23 mem_cache/cpp_utils/hash_binding.cpp hash_wide_page, has_wide_tokens; "
        "mem_cache/rust_tree_core get_hash_str (the same bytes)",
        releases="0.5.23",
    ),
    C(
        "KEY-6",
        "core",
        "engine",
        "A bigram (EAGLE) page of n tokens is hashed over the pairs (t[i], t[i+1]) of its tokens, reading one "
        "token past the page; a tuple token contributes each of its elements in order. This holds for the radix "
        "cache's keys (the Python and the Rust tree core); the PD-decode offload hashes plain tokens under EAGLE "
        "(DIV-40, recorded under CTL-17).",
        "Speculative-decoding caches key a token together with its successor; a different word "
        "order would give keys no other engine computes.",
        "sglang mem_cache/cpp_utils/native_hash.py _native_hash_input, hash_binding.cpp fill_bigram_page; the "
        "Rust tree core's node hashes (the default from 0.5.21), the same pairs",
    ),
    # ---------------------------------------------------------------- PFX
    C(
        "PFX-1",
        "prefix",
        "both",
        "prefix_keys is tri-state: None means the feature is off, [] means it is on and no page "
        "precedes the call's first key, a non-empty list holds the key of every page before the "
        "call's first key, root first.",
        "A backend uses the prefix to place or look up pages; it must be able to tell 'off' from 'on, at the "
        "root'. No pinned release keeps it: the prefetch prefix leaves out the anchor node's own pages, so [] or "
        "a short list is sent while more pages precede the first key (DIV-20), and the divergences of PFX-2, "
        "PFX-4 and PFX-7 break it too.",
        "sglang mem_cache/hicache_storage.py HiCacheStorageExtraInfo; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._storage_hit_query, "
        "_trailing_chain_groups (0.5.21+); managers/cache_controller.py _page_transfer, _page_backup; "
        "mem_cache/unified_cache/unified_tree_core.py UnifiedTreeCore.get_prefix_hash_values and "
        "mem_cache/rust_tree_core/adapter.py RustUnifiedTreeCore.get_prefix_hash_values (the prefetch prefix; the"
        " Rust tree core is the default from 0.5.21), build_storage_backup_spec (the backup prefix)",
    ),
    C(
        "PFX-2",
        "prefix",
        "engine",
        "The prefix a call receives equals the operation's prefix followed by every key of the "
        "operation's chain before that call's first key; pages dropped from the head of an operation "
        "after its hit query (a head already resident on the device) stay in that chain, so their keys "
        "precede the keys of every later call.",
        "A prefix that skips or repeats keys tells the backend a different token history than the "
        "one the keys stand for. SGLang's buffer-only mode trims such a head from the KV keys but not "
        "from the prefix, so the KV reads skip the trimmed pages while the sidecar reads carry them "
        "(recorded as a divergence).",
        "sglang managers/cache_controller.py _page_transfer, _page_transfer_kv_batch, _page_backup (prefix_keys +"
        " batch_hashes per batch); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController._storage_hit_query, _trailing_chain_groups (0.5.21+), trim_prefetch_full_head; "
        "mem_cache/buffer_mode/pipeline.py BufferModePipeline.finish_backup_ack (extend_storage_prefix, 0.5.23); "
        "the rule where releases differ is the spec's (docs/divergences.md)",
    ),
    C(
        "PFX-3",
        "prefix",
        "engine",
        "When the operation's prefix is None, no call carries prefix metadata: extra_info is None "
        "or its prefix_keys is None.",
        "None means the feature is off; a backend must not receive a list it did not ask for.",
        "sglang managers/cache_controller.py _page_transfer, _page_backup; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._storage_hit_query, "
        "_trailing_chain_groups (0.5.21+), submit_prefetch (0.5.21+); the rule where releases differ is the "
        "spec's (docs/divergences.md)",
    ),
    C(
        "PFX-4",
        "prefix",
        "engine",
        "An empty prefix [] accumulates like any list, and a list is never turned into None.",
        "0.5.20 extended the prefix only when it was non-empty, so [] never grew and backends saw [] for every "
        "batch; the hybrid hit query of every release and the pipeline ticket (0.5.21+) turn [] into None (DIV-1,"
        " DIV-2); collapsing [] to None switches the feature off silently.",
        "sglang managers/cache_controller.py _storage_hit_query, _page_transfer, _page_backup (prefix_keys + "
        "batch_hashes per batch); mem_cache/hybrid_cache/hybrid_cache_controller.py _storage_hit_query, "
        "submit_prefetch (DIV-1, DIV-2); the rule where releases differ is the spec's (docs/divergences.md)",
    ),
    C(
        "PFX-5",
        "prefix",
        "engine",
        "The engine never changes a prefix object after handing it to a backend, nor the "
        "operation's own prefix; a call may receive the operation's own list (0.5.21+ hands it to the "
        "first KV batch) and every later batch a new list.",
        "An in-place += rewrote metadata a backend had already received and possibly queued; 0.5.21+ "
        "builds each later prefix as prefix_keys + batch_hashes, leaving the first list untouched.",
        "sglang managers/cache_controller.py _page_transfer, _page_backup (prefix_keys + batch_hashes per batch; "
        "0.5.20's += in place: DIV-3, DIV-4); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController._storage_hit_query (a copy of the prefix), _trailing_chain_groups (0.5.21+: a new "
        "list for each sidecar call); the rule where releases differ is the spec's (docs/divergences.md)",
    ),
    C(
        "PFX-6",
        "prefix",
        "backend",
        "A backend never mutates prefix_keys and copies it if it keeps it after the call returns.",
        "The engine may reuse the object; a backend that holds the reference reads a history that is not its call's.",
        "sglang mem_cache/hicache_storage.py HiCacheStorageExtraInfo; managers/cache_controller.py "
        "_page_transfer, _page_backup (the operation's own list goes to the first slice; 0.5.20 extends it in "
        "place, DIV-3, DIV-4, DIV-12); mem_cache/hybrid_cache/hybrid_cache_controller.py _trailing_chain_groups "
        "(0.5.21+); 0.5.23 mem_cache/buffer_mode/pipeline.py (one snapshot prefix for several writes)",
    ),
    C(
        "PFX-7",
        "prefix",
        "engine",
        "When the feature is on, every call that accepts extra_info receives one carrying the "
        "prefix: hit query, v1 get and set, the KV-derived v2 read, the sidecar v2 read and the "
        "v2 write.",
        "SGLang's v2 calls omitted the prefix, so hybrid backends lost the context v1 backends had. "
        "SGLang's PD-decode offload controller, built from the raw JSON config, never passes a prefix "
        "and leaves hicache_storage_pass_prefix_keys in the backend's extra_config (a divergence).",
        "sglang managers/cache_controller.py _storage_hit_query, _page_transfer, _page_backup; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _storage_hit_query, _page_transfer_sidecar, "
        "_page_backup_with_stable_layout; disaggregation/decode_kvcache_offload_manager.py "
        "DecodeKVCacheOffloadManager._trigger_backup",
    ),
    C(
        "PFX-8",
        "prefix",
        "engine",
        "The KV-derived v2 read of a slice carries the same prefix as the KV read of that slice where that "
        "read takes extra_info (batch_get_v1); on the legacy path the KV read (batch_get) takes none and only "
        "the derived read carries the prefix.",
        "A KV page and its derived sidecar are one logical page; they must be described by the same history.",
        "sglang managers/cache_controller.py HiCacheController._page_transfer_kv_batch (page_get_func: "
        "_page_get_zero_copy with extra_info, _generic_page_get without)",
    ),
    C(
        "PFX-9",
        "prefix",
        "engine",
        "Sidecar v2 writes, and the sidecar v2 reads of pools not derived from KV (a KV-derived read "
        "goes with its KV batch: PFX-8), are grouped by the number of span keys a transfer covers: "
        "each group's call carries prefix P + span[:covered], covered being len(span) minus the "
        "transfer's key count, so the prefix joins that call's keys; with the feature off one call "
        "carries every transfer and no prefix.",
        "A trailing-window transfer starts past the span's first key; a prefix that does not join its keys names "
        "a different token history. Re-decided from the wheel (it was an operation-level prefix): 0.5.21+ "
        "documents prefix_keys + keys as one chain for sidecars. Buffer-only mode's writes of a pool alone (no KV"
        " span) break it where their prefix is not extended: SWA and Mamba in 0.5.22 (DIV-32), Mamba in 0.5.23 "
        "(DIV-148), recorded under PFX-2.",
        "sglang 0.5.21+ mem_cache/hybrid_cache/hybrid_cache_controller.py _trailing_chain_groups "
        "(its callers _page_transfer_sidecar, _page_backup_with_stable_layout); 0.5.22's buffer-only "
        "write of a trailing pool alone leaves the window's prefix short (DIV-32)",
        releases="0.5.21+",
    ),
    C(
        "PFX-10",
        "prefix",
        "engine",
        "Decision: the prefix of a prefetch holds the keys of every page before the operation's "
        "first page, the anchor node's own pages included, root first.",
        "Re-decided and kept: 0.5.21+ documents prefix_keys + keys as one contiguous chain, which "
        "only this prefix satisfies; SGLang builds it from the anchor's ancestors without the "
        "anchor's own pages, recorded as a divergence.",
        "decision on sglang 0.5.21+ mem_cache/hicache_storage.py HiCacheStorageExtraInfo",
        releases="decision",
    ),
    # ---------------------------------------------------------------- BE
    C(
        "BE-1",
        "core",
        "backend",
        "A backend accepts an extra_config holding keys it does not know, and one that is None when it needs no "
        "configuration (read as {}; the type allows None and no pinned release passes it, so that half is the "
        "project's hardening rule).",
        "The engine passes its loading keys (backend_name, module_path, class_name) and other vendors' keys "
        "through the same object; the controller turns a missing extra config into {}.",
        "sglang mem_cache/storage/backend_factory.py StorageBackendFactory._create_dynamic_backend "
        "(cls(storage_config, kwargs), the loading keys left in); managers/cache_controller.py "
        "HiCacheController._generate_storage_config (None becomes {}); mem_cache/hicache_storage.py "
        "HiCacheStorageConfig.extra_config (Optional[dict])",
    ),
    C(
        "BE-2",
        "core",
        "backend",
        "batch_exists returns a count n with 0 <= n <= len(keys): the length of the leading run of keys that "
        "exist, counted in pages. The count is an int (a bool included) or an integer scalar at least 32 bits "
        "wide that a slice takes as an index (numpy's integers from int32, a 0-d integer tensor; never a float, "
        "numpy's bool or a narrower integer): the engine cuts the key list with it and multiplies it by the page "
        "size in the count's own type, nothing more.",
        "Backends that counted component objects (K and V halves) reported 2N hits and made the engine read pages"
        " that were never written. A narrower integer overflows in the engine's product (numpy's int8 3 times a "
        "page of 64 tokens is -64 tokens), and a value that is only an index has no product at all.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.batch_exists; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._storage_hit_query (the "
        "in-tree caller: the hit in pages, MIN-reduced, cuts the key list)",
    ),
    C(
        "BE-3",
        "core",
        "backend",
        "batch_exists has no side effects, and an empty key list gives the count 0 (BE-2).",
        "The hit query runs for every request, may run again for the same request (retries; in 0.5.20-0.5.22 also"
        " the PD-decode probe before the prefetch, which 0.5.23's prefetch trusts instead of asking again) and "
        "gets an empty list when the extra config's prefetch_threshold is 0 and a span is shorter than a page.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.batch_exists; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._storage_hit_query "
        "(the in-tree caller; it overrides managers/cache_controller.py "
        "HiCacheController._storage_hit_query)",
    ),
    C(
        "BE-4",
        "core",
        "backend",
        "A missing key yields the call's miss (None from a batch_get entry, False from a v1 or v2 entry, a "
        "batch_exists count that stops before it), never an exception; exists, which the engine reaches only "
        "through HiCacheStorage's own batch_exists (asking it key by key), is judged through that batch_exists.",
        "In 0.5.20-0.5.21 an exception kills the engine's IO thread and every later prefetch with it "
        "(DIV-22..DIV-26; 0.5.21's pipeline ticket mode catches its own query), and a backup thread whose write "
        "looks a key up first (DIV-45); from 0.5.22 the controller's threads catch it and the whole slice or "
        "query counts as missed, losing the hits before the missing key; the PD-decode probe, on the scheduler "
        "thread, never catches it (DIV-118).",
        "sglang mem_cache/hicache_storage.py HiCacheFile.get, _read_page; managers/cache_controller.py "
        "_generic_page_get, _page_get_zero_copy, _page_transfer, prefetch_thread_func; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._storage_hit_query",
    ),
    C(
        "BE-5",
        "core",
        "backend",
        "A storage error in an IO or lookup call (the legacy, v1 and v2 methods, batch_exists, clear aside: "
        "BE-11) is reported in the method's own result, never by raising: False entries for the flags of a read "
        "or write (and a False from a legacy batch_set), a shorter count from batch_exists (0 for none), a "
        "shorter boundary from batch_exists_v2, None for a page get or batch_get cannot give; never None where "
        "the result is a count, a list of flags or a pool mapping (BE-2, BE-14, BE-19). A refusal at attach time "
        "(the constructor, register_mem_pool_host) raises instead.",
        "In 0.5.20-0.5.21 an exception ends the engine's IO or backup thread and every later operation with it "
        "(DIV-22..DIV-26, DIV-45); from 0.5.22 the prefetch and backup threads catch it and the whole slice or "
        "query counts as failed, losing the pages before the error, while the PD-decode probe's batch_exists "
        "still ends the decode scheduler (DIV-118) and 0.5.23's trailing-pool hit conversion its thread "
        "(DIV-117). SGLang's own file backend raises on a short page (DIV-56). At attach time the base controller"
        " rolls a raise back, so a refusal belongs there (BE-27).",
        "sglang managers/cache_controller.py _page_transfer, prefetch_thread_func, prefetch_io_aux_func, "
        "backup_thread_func, _page_backup_or_log (0.5.22+); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "_page_transfer_sidecar",
    ),
    C(
        "BE-6",
        "core",
        "backend",
        "Writing an existing key returns True and leaves correct bytes, whether it skips or overwrites.",
        "The engine backs up the same prefix from many requests; a second write must not fail or corrupt the first.",
        "sglang mem_cache/hicache_storage.py HiCacheFile.set, _write_page; the in-tree backends under "
        "mem_cache/storage/",
    ),
    C(
        "BE-7",
        "core",
        "backend",
        "A page is never visible to exists or get before it is fully written.",
        "A reader that sees a half-written page loads garbage into the KV cache.",
        "sglang mem_cache/hicache_storage.py HiCacheFile.set (a temp file renamed into place), _write_page, "
        "exists (the final name alone); HiCacheNixl's file plugins break it (DIV-59)",
    ),
    C(
        "BE-8",
        "core",
        "backend",
        "Every method that takes extra_info accepts it in each form the release hands it to that method "
        "(positionally to batch_exists, batch_exists_v2 and the v1 calls; by keyword to batch_get_v2 and "
        "batch_set_v2, which 0.5.20 calls without it, and positionally to them under 0.5.23's failure injector, "
        "BE-33; hicache_spec.call_forms), and accepts None, an empty info, prefix_keys None, [] or a list, and "
        "extra_info None or a dict with the keys SGLang defines (BE-31) or with keys it does not know (no pinned "
        "release sends one: that half is the project's forward-compatibility rule).",
        "A backend without the parameter, or with it under another name where the release passes it "
        "by keyword, raises TypeError on the first such call. 0.5.23's failure injector passes every "
        "argument on positionally (BE-33).",
        "sglang mem_cache/hicache_storage.py HiCacheStorageExtraInfo; managers/cache_controller.py "
        "_storage_hit_query, _page_get_zero_copy, _page_set_zero_copy, _page_transfer_kv_batch (the KV-derived "
        "batch_get_v2); hybrid_cache/hybrid_cache_controller.py (batch_get_v2/batch_set_v2 calls), "
        "HybridCacheController._storage_hit_query; 0.5.23 mem_cache/hicache_storage.py "
        "HiCacheStorageFailureInjector (extra_info positional to every method it forwards)",
    ),
    C(
        "BE-9",
        "legacy",
        "backend",
        "Legacy batch_get gives None (every key missed) or a list holding, for each key asked, a tensor or None "
        "(None for a miss; entries past the keys are ignored); batch_set gives a bool (numpy's included: the "
        "interface's declared type; the engine reads its truth). A tensor holds the page's bytes as stored, and a"
        " key whose batch_set returned True reads back until evicted (the legacy path's BE-15 and BE-17; SGLang's"
        " sim and shm backends, which store no bytes, are outside it: docs/in-tree-verdicts.md). get and set, "
        "which the engine never calls, are not judged.",
        "The engine indexes the results up to the first None and copies each tensor into host "
        "memory; a different shape is a crash or a silent miscount.",
        "sglang managers/cache_controller.py HiCacheController._generic_page_get, _generic_page_set; "
        "mem_cache/hicache_storage.py HiCacheStorage.batch_get, batch_set",
    ),
    C(
        "BE-10",
        "core",
        "backend",
        "Batches of STORAGE_BATCH_SIZE (128) pages work, and so does a sidecar pool's batch_set_v2 or "
        "batch_get_v2 of a whole span, longer than that.",
        "KV reads and writes carry up to 128 pages a call (CTL-2), the KV-derived sidecar reads with their KV "
        "slice; a backend tested only on a few pages may break on a full slice. The hit query (BE-2 checks a "
        "whole chain), every sidecar write and the other sidecar reads carry the whole operation's span, however "
        "long.",
        "sglang mem_cache/hicache_storage.py STORAGE_BATCH_SIZE; managers/cache_controller.py _page_transfer, "
        "_page_transfer_kv_batch, _page_backup; mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController._storage_hit_query, _resolve_sidecar_kv_derived_pool_transfers, "
        "_page_transfer_sidecar (the whole span, unsliced)",
    ),
    C(
        "BE-11",
        "core",
        "backend",
        "After a clear() that returns (whatever it returns, False included) batch_exists is 0 for every key "
        "written before, in every pool; a clear() that cannot do that raises.",
        "clear() is how an operator drops a stale cache. SGLang ignores what clear() returns and forgets what "
        "it believed stored, so keys left behind are served as hits; a raise is its only sign of a failed "
        "clear (it catches it, reports the clear failed and keeps its beliefs).",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.clear, HiCacheFile.clear; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py clear_storage_backend; "
        "mem_cache/unified_cache/storage_attachment.py StorageAttachment.clear",
    ),
    C(
        "BE-12",
        "core",
        "backend",
        "get_stats() returns None or a metrics object, never a dict; under SGLang the object is an "
        "instance of SGLang's StorageMetrics.",
        "With storage metrics on, the scheduler calls it every step, sets prefetch_stats on the "
        "object (a dict raises AttributeError there) and every pinned release asserts "
        "isinstance(storage_metrics, StorageMetrics) before logging it.",
        "sglang mem_cache/unified_radix_cache.py UnifiedRadixCache.check_hicache_events; "
        "observability/metrics_collector.py StorageMetricsCollector.log_storage_metrics; "
        "mem_cache/hicache_storage.py HiCacheStorage.get_stats (the None default)",
    ),
    C(
        "BE-13",
        "legacy",
        "backend",
        "A stored object that is empty, shorter or longer than a page is a miss, never a hit: no lookup counts it"
        " (exists, batch_exists, batch_exists_v2) and no read returns or reports it (get, batch_get, and the v1 "
        "and v2 reads). The suite's check plants one through the legacy set, or through a backdoor; SGLang's sim "
        "backend, which stores keys and no bytes, is outside it (docs/in-tree-verdicts.md).",
        "A zero-length file left by a crashed writer is counted as a hit by every pinned release's lookups "
        "(HiCacheFile, and the v1 backends SeaweedFS and NIXL's file plugin, recorded here too: DIV-9, DIV-57, "
        "DIV-76, DIV-139), and HiCacheFile then refuses it when it reads the page, by raising (DIV-56); no pinned"
        " release checks an object's size when it looks a page up, so the hit half is the project's hardening "
        "rule.",
        "sglang mem_cache/hicache_storage.py HiCacheFile.get (a short page is refused, by raising: DIV-56); "
        "HiCacheFile.exists, _collect_existing_component_keys (any file counts)",
    ),
    C(
        "BE-14",
        "v1",
        "backend",
        "batch_get_v1 and batch_set_v1 return a list of exactly len(keys) entries, entry i for page i, each with "
        "a truth value (a bool, numpy's included).",
        "The interface documents one success flag per key. The engine reads get's entries 0..len(keys)-1 by their"
        " truth and set's by their AND, checking no length (a bare True raises); SGLang's 3FS and EIC backends "
        "return 2N entries from an MHA write (recorded as divergences), which a reader of the flags takes as "
        "other pages'.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.batch_get_v1, batch_set_v1; "
        "managers/cache_controller.py _page_get_zero_copy, _page_set_zero_copy",
    ),
    C(
        "BE-15",
        "v1",
        "backend",
        "Every entry of batch_get_v1's leading run of True (a truthy entry, up to the first false "
        "one) means page i's whole byte range landed in host slots "
        "host_indices[i*page_size:(i+1)*page_size], page_size being the controller's page size "
        "(the logical one under 0.5.23's DCP); an entry after the first false one is never read.",
        "A True for a page that did not land makes the engine attend over garbage. SGLang counts "
        "the leading run and stops at the first miss, releasing the rest of the span's slots.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.batch_get_v1; managers/cache_controller.py "
        "HiCacheController._page_get_zero_copy (stops at the first miss), _page_transfer_kv_batch",
    ),
    C(
        "BE-16",
        "v1",
        "backend",
        "A read writes nothing outside the addressed host slots, also when it fails.",
        "Host pages around the addressed ones belong to other requests.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.batch_get_v1; managers/cache_controller.py "
        "_page_transfer_kv_batch",
    ),
    C(
        "BE-17",
        "v1",
        "backend",
        "A batch_set_v1 call whose every result is True has stored every one of its pages: each can be "
        "read back from then on (until evicted). A True beside a False in one call promises nothing.",
        "The interface documents one success flag per key, but SGLang reads only their AND "
        "(_page_set_zero_copy), to decide whether the operation's slice was written and its next slice is "
        "sent, and decides later hits by a fresh lookup; a slice reported written whose pages cannot be "
        "read is a prefix the cache believes it kept and loses for every later request. A backend may so "
        "roll a failed call back whole.",
        "sglang managers/cache_controller.py _page_set_zero_copy, _page_backup; mem_cache/hicache_storage.py "
        "HiCacheStorage.batch_set_v1",
    ),
    C(
        "BE-18",
        "core",
        "backend",
        "The base class's v1 methods return None, so a backend that declares interface_v1 implements "
        "batch_get_v1 and batch_set_v1 (a stub raises NotImplementedError). A v2 method a backend "
        "does not implement raises NotImplementedError, as the base class's do, rather than return "
        "None (the project's rule: SGLang calls v2 only for an operation with pool transfers, where "
        "a None fails the call as a raise does, so the raise is what names the gap).",
        "The engine picks the zero-copy path by backend type name (the in-tree hf3fs, mooncake, nixl, "
        "...) or, for a dynamic backend, from extra_config interface_v1 alone, never by asking the "
        "backend what it implements; a declared but missing v1 method returns None where a list of "
        "bools is read.",
        "sglang 0.5.20-0.5.23 mem_cache/hicache_storage.py HiCacheStorage.batch_get_v1/batch_exists_v2; "
        "managers/cache_controller.py attach_storage_backend (page_get_func / page_set_func)",
    ),
    C(
        "BE-19",
        "v2",
        "backend",
        "batch_get_v2 and batch_set_v2 return one entry per transfer name, holding len(keys) bools.",
        "The controller looks each pool up by name and counts its list: the leading run for a read, "
        "and on a rank that skips a replicated write, every entry of a list exactly len(keys) long.",
        "sglang mem_cache/hicache_storage.py HiCacheStorage.batch_get_v2, batch_set_v2, count_pool_hits, "
        "HiCacheFile._batch_io_v2; managers/cache_controller.py _page_transfer_kv_batch; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _page_transfer_sidecar, "
        "HybridCacheController._page_backup (0.5.20), _page_backup_with_stable_layout (0.5.21+): the "
        "length check of a skipped write",
    ),
    C(
        "BE-20",
        "robustness",
        "backend",
        "A transfer for an unregistered pool yields all False for that pool, never an exception.",
        "A pool the backend cannot serve is a miss, not a crash of the IO thread. No pinned release "
        "sends such a transfer (every pool is registered before a transfer names it), so the rule "
        "binds only a backend that claims robustness.",
        "sglang mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController.attach_storage_backend, "
        "register_host_pool_entry; mem_cache/unified_cache/storage_attachment.py (every pool registered before a "
        "transfer names it); mem_cache/hicache_storage.py HiCacheFile._batch_io_v2 raises for such a pool, "
        "harmless only because none is sent",
    ),
    C(
        "BE-21",
        "v2",
        "backend",
        "batch_exists_v2 returns as kv_hit_pages the largest prefix length that KV and every gating pool can "
        "restore (the maximum of the intersection of their restorable lengths, HYB-6, HYB-7), never the minimum "
        "of each pool's largest hit; an entry of extra_pool_hit_pages, KV's included, is that pool's own boundary"
        " (read from 0.5.22: an entry above it harms, one below only costs rewrites, so exactness below is the "
        "project's rule), and an entry may be left out (KV then counts as the folded hit, another pool as no "
        "verdict).",
        "The min-of-maxima fold (SGLang #39147) names prefix lengths a trailing pool cannot restore. From 0.5.22 "
        "the engine records each reported entry as what storage holds of that pool (buffer-only mode), so an "
        "entry above the pool's boundary makes it skip writing pages storage lacks.",
        "sglang 0.5.23 mem_cache/hicache_storage.py HiCacheFile.batch_exists_v2; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._storage_hit_query (0.5.22+: the"
        " entries read, a missing one no verdict)",
    ),
    C(
        "BE-26",
        "v2",
        "backend",
        "Every length restorable_prefix_pages lists within 1..kv_hit_pages can be restored by KV and every gating"
        " pool; it is read as a set (order, repeats and lengths outside 1..kv_hit_pages carry no meaning); None "
        "says every length 1..kv_hit_pages can be restored. The HiCache controller reads it when the query "
        "carries a TRAILING_PAGES pool.",
        "Ranks intersect these sets (RANK-6) and load the largest common length; a length listed that a pool "
        "cannot restore loads a prefix without its trailing state on every rank. A length left out only shortens "
        "the hit, so listing every restorable length (as 0.5.23's HiCacheFile does) is what gives the longest "
        "one. SGLang's sim, 3FS, NPU memcache, UMBP, NIXL and SeaweedFS backends answer None while folding with "
        "the minimum (DIV-6, DIV-51..DIV-55, recorded under BE-21). The Mooncake direct linker also reads the "
        "field, from the MooncakeStore it builds, with None as no hit (LNK-8).",
        "sglang 0.5.23 mem_cache/hicache_storage.py PoolTransferResult, HiCacheFile.batch_exists_v2; "
        "hybrid_cache/hybrid_cache_controller.py _sync_prefetch_hit_query (a flag per listed length "
        "in 1..the hit, read only for a TRAILING_PAGES query)",
        releases="0.5.23",
    ),
    C(
        "BE-27",
        "core",
        "backend",
        "on_host_pools_registered is called once per attach, after register_mem_pool_host and the initial "
        "register_mem_host_pool_v2 burst and before any IO; pools registered later arrive through "
        "register_mem_host_pool_v2 alone. A backend does not raise from it (the project's rule: SGLang's "
        "docstring lets a raise refuse the attach).",
        "Backends that register with a remote manager must finalize once the pool set is known. The hybrid "
        "controller, the one every cache with storage uses, calls it after its base attach started the storage "
        "threads, so a raise fails the attach with storage left enabled and its threads running: a refusal "
        "belongs in the constructor or register_mem_pool_host, where the attach still rolls back.",
        "sglang 0.5.23 mem_cache/hicache_storage.py HiCacheStorage.on_host_pools_registered; "
        "managers/cache_controller.py attach_storage_backend; hybrid_cache_controller.py "
        "HybridCacheController.attach_storage_backend (_registers_host_pools_after_super_attach)",
        releases="0.5.23",
    ),
    C(
        "BE-22",
        "v2",
        "backend",
        "A KV-derived sidecar page is written and dropped together with its KV page, or reported missing by "
        "batch_exists_v2: a page batch_get_v2 reports loaded holds its bytes, and one whose write returned True "
        "reads back while its KV page does, until the backend evicts it. A lookup may still count a page that "
        "vanished (SGLang's HiCacheFile with its metadata cache does): SGLang clamps each slice's hit to the "
        "derived pages batch_get_v2 loads, so such a count costs hit length, not correctness.",
        "An indexer page that was never persisted, restored beside its KV page, corrupted attention silently. "
        "SGLang clamps each slice's hit to the derived pages batch_get_v2 loads, so a page counted or confirmed "
        "but not read costs the hit the lookup promised.",
        "sglang mem_cache/hicache_storage.py HiCacheFile.batch_exists_v2, _collect_existing_component_keys; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _resolve_sidecar_kv_derived_pool_transfers, "
        "_page_backup (0.5.20), _page_backup_with_stable_layout (0.5.21+); managers/cache_controller.py "
        "_page_transfer_kv_batch (a missing derived page shortens the slice's hit)",
    ),
    C(
        "BE-23",
        "concurrency",
        "backend",
        "A backend is safe under concurrent calls from at least three threads (hit query, IO, backup) plus the "
        "scheduler thread's: get_stats (with storage metrics on), clear() (the admin clear, which does not stop "
        "the storage threads) and the hit queries of BE-30.",
        "The engine runs these threads for real; a race corrupts pages or results. Hit queries also come from "
        "other engine threads (BE-30), so the count is a floor.",
        "sglang managers/cache_controller.py prefetch_thread_func, prefetch_io_aux_func, backup_thread_func "
        "(three threads on one backend); mem_cache/unified_radix_cache.py UnifiedRadixCache.check_hicache_events "
        "(get_stats, on the scheduler thread); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController.clear_storage_backend and mem_cache/unified_cache/storage_attachment.py clear (the"
        " admin clear, on the scheduler thread)",
    ),
    C(
        "BE-24",
        "core",
        "backend",
        "register_mem_pool_host is called once, after construction and before any IO. The hybrid controller "
        "(every UnifiedRadixCache path, and from 0.5.21 the PD-decode offload of an SWA model) then registers "
        "every pool of its host pool group with register_mem_host_pool_v2, KV included; a plain HiCacheController"
        " (the PD-decode offload of an MHA or MLA KV cache, and every PD-decode offload in 0.5.20) registers no "
        "v2 pool.",
        "Backends size their buffers from the host pool; IO before registration has nowhere to go.",
        "sglang managers/cache_controller.py HiCacheController.attach_storage_backend; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController.attach_storage_backend (every "
        "pool of the group), register_host_pool_entry (a pool added later); "
        "disaggregation/decode_kvcache_offload_manager.py DecodeKVCacheOffloadManager.__init__ (a plain "
        "HiCacheController, or from 0.5.21 for an SWA model hybrid_cache/hybrid_pool_assembler.py "
        "build_hybrid_swa_stack)",
    ),
    C(
        "BE-25",
        "core",
        "both",
        "A storage config has every rank inside its group (0 <= rank < size, size >= 1) for the TP, PP and "
        "attention-CP groups, dp_rank >= 0 (there is no dp_size), tp_lcm_size, when set, a positive multiple of "
        "tp_size, and a valid DCP setup: 0 <= dcp_rank < dcp_size and, for dcp_size > 1, is_mla_model "
        "(rank-replicated KV: MLA or DeepSeek-V4's compressed pool), tp_rank % dcp_size == dcp_rank with tp_size "
        "a multiple of dcp_size, and a logical_page_size that is a positive multiple of dcp_size.",
        "Backends derive namespaces and shard layouts from these numbers; an impossible coordinate must be "
        "rejected at the boundary rather than become a key. SGLang itself checks only the DCP part (0.5.23, the "
        "only release with DCP fields) and, by an assert, tp_lcm_size % tp_size when tp_lcm_size is truthy (0 and"
        " negative multiples pass: DIV-143); the range checks are the project's validation of its own models "
        "(dp_rank exists from 0.5.21). 0.5.23 attaches storage under DCP only for its file and Mooncake backends,"
        " with a materialized MLA host pool and outside buffer_only, so a dynamic backend never sees dcp_size > "
        "1.",
        "sglang 0.5.23 mem_cache/hicache_storage.py HiCacheStorageConfig.__post_init__ (DCP); "
        "managers/cache_controller.py _generate_storage_config (tp_lcm_size), 0.5.23 "
        "HiCacheController.attach_storage_backend (the backends attached under DCP)",
    ),
    C(
        "BE-28",
        "robustness",
        "backend",
        "An instance given a second, different host pool under a name that already has one either "
        "serves both (pages written and read through each pool carry that pool's bytes) or refuses "
        "the second registration by raising an error with a message; it never silently replaces "
        "the first.",
        "Two controllers sharing one instance otherwise read and write each other's host slots: "
        "wrong pages and no error. No pinned release does this (each attach builds its own backend), "
        "so the rule binds only a backend that claims robustness.",
        "sglang managers/cache_controller.py attach_storage_backend (StorageBackendFactory.create_backend per attach)",
        releases="decision",
    ),
    # ---------------------------------------------------------------- NS
    C(
        "NS-1",
        "namespacing",
        "backend",
        "Two instances that differ only in tp_rank (same tp_size) never see each other's pages of a pool sharded "
        "by TP rank: every pool without is_mla_model, and beside MLA KV the pools still sharded (Mamba state, an "
        "MHA draft or draft-SWA pool); the pages of pools every TP rank holds whole (MLA KV and what derives from"
        " it) are shared instead (NS-5).",
        "Each TP rank holds a different shard of the heads; reading another rank's shard is silent corruption. "
        "SGLang's UMBP backend keys an MHA draft pool beside MLA KV without the TP rank, but its reads and writes"
        " of such a pool raise (DIV-119), so no shard crosses ranks there.",
        "sglang mem_cache/hicache_storage.py HiCacheStorageConfig.tp_rank, HiCacheFile.__init__ (the TP rank in "
        "the key suffix), _get_suffixed_key (Mamba state under MLA without it: DIV-29; 0.5.23 draft pools: "
        "DIV-96); mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController.should_backup (the "
        "pools every rank writes beside MLA KV)",
    ),
    C(
        "NS-2",
        "namespacing",
        "backend",
        "Two instances that differ only in pp_rank never see each other's pages, except through a hit query whose"
        " extra_info names the other stage (BE-31: 0.5.21-0.5.22's pipeline ticket mode), which a backend may "
        "answer about that stage.",
        "Pipeline stages hold different layers; a backend without PP in its keys let stages overwrite each other.",
        "sglang mem_cache/hicache_storage.py HiCacheStorageConfig.pp_rank, pp_size, HiCacheFile.__init__ (the "
        "'_{pp_size}_{pp_rank}' suffix when pp_size > 1), _get_suffixed_key; "
        "storage/mooncake_store/mooncake_store.py MooncakeStore.__init__ (mha_suffix and mla_suffix carry pp_rank"
        " when pp_size > 1), 0.5.21-0.5.22 MooncakeStore._batch_exist (a query naming another stage answered "
        "about it)",
    ),
    C(
        "NS-3",
        "namespacing",
        "backend",
        "Two instances that differ only in attn_cp_rank never see each other's pages.",
        "Context-parallel ranks may hold different slices of a page, and a storage config cannot tell whether "
        "they do, so a backend keeps them apart (SGLang's file backend gives each CP rank its own key; "
        "MooncakeStore and other in-tree backends do not: DIV-50 and the NS-3 divergences).",
        "sglang mem_cache/hicache_storage.py HiCacheStorageConfig.attn_cp_rank, attn_cp_size, "
        "HiCacheFile.__init__ (the '_cp{attn_cp_rank}_{attn_cp_size}' suffix when attn_cp_size > 1); "
        "managers/cache_controller.py HiCacheController._generate_storage_config (where the rank comes from)",
    ),
    C(
        "NS-4",
        "namespacing",
        "backend",
        "Two instances that differ only in model_name never see each other's pages.",
        "Keys carry no model; two models sharing a store must not read each other's KV. SGLang's file and "
        "Mooncake backends put the model in the key, with '/' made '-' (DIV-30, DIV-31; NIXL, SeaweedFS and "
        "UMBP's sidecars alike: DIV-83, DIV-72, DIV-78); its 3FS, AIBrix, NPU memcache and SiMM backends and "
        "UMBP's KV keys leave it out (DIV-60..DIV-62, DIV-70, DIV-77), and its TensorCast backend keys by a "
        "configured model id in its place (DIV-144).",
        "sglang mem_cache/hicache_storage.py HiCacheStorageConfig.model_name, HiCacheFile.__init__ (the model "
        "leads the key suffix), _get_suffixed_key; storage/mooncake_store/mooncake_store.py "
        "MooncakeStore.__init__ (the model in the key prefix); managers/cache_controller.py "
        "HiCacheController._generate_storage_config (0.5.22+: the host pool's storage format tag appended)",
    ),
    C(
        "NS-5",
        "namespacing",
        "backend",
        "With is_mla_model=True a KV page written by the storage writer (CTL-8: tp_rank == dcp_rank in 0.5.23, "
        "tp_rank == 0 before) is visible to every TP rank with the same PP, CP and DCP coordinates that shares "
        "the backend's store (a store every rank reaches: for a file backend, a directory every rank's host "
        "sees).",
        "Replicated KV is written once per DCP shard; other ranks that cannot see it never hit. SGLang 0.5.23 "
        "attaches storage under DCP only for its file and Mooncake backends, so only they, and a backend that "
        "says SGLang drives it so, are asked to keep the DCP shards apart.",
        "sglang managers/cache_controller.py HiCacheController.attach_storage_backend (backup_skip: tp_rank != 0 "
        "before 0.5.23); 0.5.23 mem_cache/hicache_storage.py HiCacheStorageConfig.is_storage_writer; "
        "HiCacheFile.__init__ (the MLA suffix leaves tp_rank out; 0.5.23's DCP suffix); "
        "storage/mooncake_store/mooncake_store.py MooncakeStore.__init__ (mla_suffix)",
    ),
    C(
        "NS-6",
        "namespacing",
        "backend",
        "The hit query (batch_exists, batch_exists_v2) finds a page under the same key the backend's reads and "
        "writes (batch_get*, batch_set*) use for it. exists, get and set are judged only as the base class's "
        "batch methods call them.",
        "A tag applied in set but not in exists meant L3 never hit. The engine never calls exists, get or set "
        "itself (BE-9).",
        "sglang mem_cache/hicache_storage.py HiCacheFile._get_suffixed_key (one scheme for get, set and exists), "
        "HiCacheStorage.batch_exists (exists per key); a bug class of in-tree backends (#17265)",
    ),
    C(
        "NS-7",
        "durability",
        "backend",
        "A persistent backend rebuilt with the same configuration finds the pages it wrote before.",
        "A restart must not throw away the cache, nor derive keys from process-local state. A backend opts in by "
        "declaring itself persistent (3FS's default local metadata client keeps its index in process memory).",
        "sglang mem_cache/hicache_storage.py HiCacheFile.__init__ (a key suffix from the configuration alone), "
        "_get_suffixed_key, exists (looked up on disk); _scan_existing_files_to_metadata_cache and "
        "storage/file/lru_file_evictor.py LRUFileEvictor._scan_existing_files re-index a restart",
    ),
    C(
        "NS-8",
        "namespacing",
        "backend",
        "clear() removes only this instance's namespace: pages of other models and ranks survive.",
        "A shared store serves many engines; one operator's clear must not flush the others.",
        "project decision",
        releases="decision",
    ),
    C(
        "NS-9",
        "format",
        "backend",
        "A page written from a host pool of one page format (layout, dtype, page size, elements per page) is "
        "never read as a hit into a pool of another format: the format is part of the namespace, or stored "
        "with the page and checked before a read counts.",
        "Two deployments of one model name with another layout (page_first, layer_first) or dtype (bf16, fp16) "
        "store pages of the same size under the same keys; without the format in the name each serves the "
        "other's pages as hits holding scrambled bytes. SGLang requires no such guard of a backend, so the rule "
        "binds only a backend that claims format.",
        "project decision; sglang managers/cache_controller.py storage_model_name tags the model name with the host "
        "pool's storage_format_tag (mem_cache/pool_host/base.py HostKVCache.storage_format_tag, set only by "
        "mem_cache/pool_host/unified.py UnifiedPageEnvelopeHostPool) since 0.5.22, and mem_cache/hicache_storage.py "
        "HiCacheFile.__init__ leaves the KV dtype and layout out of its keys (a TODO in 0.5.23)",
        releases="decision",
    ),
    # ---------------------------------------------------------------- CTL
    C(
        "CTL-1",
        "controller",
        "engine",
        "The hit query asks about the chain from its first key and never past a known miss: either "
        "one call over the whole chain (batch_exists_v2 with the pool transfers, else batch_exists), "
        "or batch_exists slice by slice stopping after the first slice not fully hit; a span a prior "
        "hit proved stored may be taken as hit without a query.",
        "Keys after a miss cannot be loaded, so querying them wastes round trips. Every pinned release sends "
        "every in-tree hit query through the hybrid controller's single whole-chain query (in 0.5.21-0.5.22's "
        "pipeline ticket mode one per stage asked, DIV-140); the plain controller's slice-by-slice query is "
        "called by no in-tree path (0.5.20's HiRadixCache is never built, and the decode offload controller only "
        "writes).",
        "sglang hybrid_cache_controller.py HybridCacheController._storage_hit_query; managers/cache_controller.py"
        " HiCacheController._storage_hit_query; 0.5.21-0.5.22 hybrid_cache_controller.py "
        "HybridCacheController.submit_prefetch (the ticket mode's per-stage queries)",
    ),
    C(
        "CTL-2",
        "controller",
        "engine",
        "KV IO and KV backup calls carry at most STORAGE_BATCH_SIZE keys and start at multiples of it within the "
        "operation's KV span (after any buffer-mode head trim), as does the KV-derived v2 read beside each KV "
        "read; the hit query (CTL-1's whole-chain form, the only one any release sends) and the other sidecar v2 "
        "calls (0.5.21+: one per trailing-length group when prefixes are on, PFX-9; 0.5.20: one call for all) are"
        " not sliced.",
        "Backends size their batches by it; acks and prefixes are computed per slice.",
        "sglang managers/cache_controller.py _page_transfer, _page_backup; "
        "hybrid_cache_controller.py _page_transfer_sidecar, _page_backup (0.5.20), "
        "_page_backup_with_stable_layout (0.5.21+)",
    ),
    C(
        "CTL-3",
        "controller",
        "engine",
        "The effective threshold is prefetch_threshold tokens (default 256; in buffer-only host mode a model with"
        " a sliding window first raises it to the window rounded up to whole pages; any value from 1 to page_size"
        " acts as one page, spans and hits being whole pages): a page-aligned span shorter than it is declined "
        "before any query (the PD-decode probe's too), and a prefetch whose agreed hit is below it is revoked "
        "before any IO. When host memory is short, cache mode cuts the hit to the largest page-aligned length "
        "that fits and revokes only if that is below the threshold or a component's own host pool (an SWA window,"
        " Mamba state) cannot stage it; buffer-only mode parks the hit until memory frees (0.5.22+ revoke one "
        "that the KV host pool, or a shared host arena, could never hold; 0.5.23's window is the retained one: "
        "the larger of the model's and the draft's, and the auxiliary SWA component's).",
        "A tiny hit is cheaper to recompute than to fetch, and a span that cannot reach the "
        "threshold is not worth a round trip.",
        "sglang mem_cache/unified_radix_cache.py prefetch_from_storage, query_storage_hit_length (the PD-decode "
        "probe), the drain's _try_alloc_storage_hit and _alloc_prefetch_aux_staging (every release: 0.5.20's "
        "HiRadixCache is never built); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController.allocate_storage_hit (0.5.22+: the cut); mem_cache/buffer_mode/pipeline.py "
        "allocate_and_queue_prefetch, _reject_oversized_prefetch (0.5.22+); unified_cache/storage_attachment.py "
        "resolve_prefetch_threshold, apply_runtime_config; managers/cache_controller.py attach_storage_backend "
        "(the controller's own copy, floored at page_size, read only by the ticket path from 0.5.21)",
    ),
    C(
        "CTL-4",
        "controller",
        "engine",
        "Prefetch IO reads each slice of the agreed keys in order; a slice that loads fewer pages "
        "than requested, or termination, stops further reads.",
        "Pages after a hole are unusable; reading them wastes bandwidth and host memory.",
        "sglang managers/cache_controller.py _page_transfer, prefetch_io_aux_func; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._page_transfer (0.5.20), "
        "_page_transfer_with_stable_layout (0.5.21+)",
    ),
    C(
        "CTL-5",
        "controller",
        "engine",
        "Prefetch emits exactly one progress ack per slice of the agreed keys: cumulative loaded "
        "tokens, non-decreasing, frozen after the first short slice or termination.",
        "Every ack is all-reduced across ranks; a rank that emits fewer acks hangs the others (in 0.5.20-0.5.21 a"
        " read that raises ends the IO thread and its acks: DIV-23). Termination is seen at the start of a slice;"
        " on the v1 read a slice already reading when it comes still counts, while the legacy batch_get read also"
        " stops between the page copies of a slice that already returned, so that slice is short.",
        "sglang managers/cache_controller.py _page_transfer, prefetch_io_aux_func, _generic_page_get (termination"
        " between page copies); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController._page_transfer (0.5.20), _page_transfer_with_stable_layout (0.5.21+)",
    ),
    C(
        "CTL-6",
        "controller",
        "engine",
        "Every prefetch admitted to IO (put on the prefetch buffer) ends with exactly one final ack, also when "
        "the backend raises or the operation was terminated; a prefetch revoked before that (terminated or under "
        "the threshold at its hit query, or declined at allocation) gets none and is released without it, except "
        "in the pipeline ticket mode, which puts a prefetch whose allocation failed (0.5.21+) or whose hit missed"
        " or fell under the threshold (0.5.23) on the buffer terminated, so that it gets its final ack.",
        "The final ack's drain frees the operation's unloaded tail, and under wait_complete and in the pipeline "
        "ticket mode it is also what admits the request; a prefetch that never gets it leaks those host pages (or"
        " hangs the request). A backend call that never returns withholds it too (DIV-136, recorded under "
        "CTL-11).",
        "sglang managers/cache_controller.py _page_transfer, prefetch_io_aux_func; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._page_transfer (0.5.20), "
        "_page_transfer_with_stable_layout (0.5.21+), pp_prefetch_command_thread_func (0.5.21+: the ticket mode);"
        " mem_cache/buffer_mode/pipeline.py BufferModePipeline._queue_prefetch (0.5.22+); "
        "mem_cache/unified_radix_cache.py revoke_pending_prefetch, _try_alloc_storage_hit",
    ),
    C(
        "CTL-7",
        "controller",
        "engine",
        "On the storage writer, the KV backup writes slice by slice, counts a slice only if every page of it "
        "succeeded (the AND of its flags), stops at the first failed slice, and reports completed tokens as the "
        "successful slices' pages times page_size. Within one backup operation the sidecar pools are written "
        "before the KV slices, unsliced, each over its own keys (a KV-derived pool the span, a trailing pool its "
        "tail), in one batch_set_v2 per trailing-length group (PFX-9; 0.5.20 one call), each pool's leading run "
        "of True recorded for that pool without touching the KV count (SGLang's count_pool_hits counts entries "
        "that are not False: DIV-27, DIV-46; 0.5.22+'s buffer-only mode writes a node's pools as separate "
        "operations, KV first: DIV-126); a rank that is not the writer reports as CTL-15 says.",
        "A node is backed up only as far as its prefix is contiguous in storage; the completed tokens feed the "
        "backup metrics, and a failed sidecar write does not hide the KV slices written.",
        "sglang managers/cache_controller.py _page_backup, backup_thread_func, _page_backup_or_log (0.5.22+); "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController._page_backup (0.5.20), "
        "_page_backup_with_stable_layout (0.5.21+), _resolve_sidecar_kv_derived_pool_transfers; "
        "mem_cache/hicache_storage.py count_pool_hits",
    ),
    C(
        "CTL-8",
        "controller",
        "engine",
        "With replicated KV (is_mla_model: an MLA device pool or DeepSeek-V4's compressed pool) only "
        "the storage writer (the attention-TP rank: tp_rank == dcp_rank in 0.5.23, TP rank 0 without "
        "DCP; tp_rank == 0 before; one writer per data-parallel group) writes KV pages and KV-derived and other replicated sidecars; a rank that is not the "
        "writer writes only the rank-sharded sidecars: MAMBA state and, for a Mooncake backend, the "
        "DRAFT and DRAFT_SWA pools held in an MHA host pool (with other backends those shards are "
        "never written: DIV-35); every rank still acks the backup.",
        "Replicated KV written by every rank multiplies traffic; TP-sharded state that only one rank "
        "writes is lost for the others; acks must still match across ranks.",
        "sglang managers/cache_controller.py attach_storage_backend (backup_skip, 0.5.20-0.5.22), "
        "HiCacheController.backup_skip (0.5.23), _generate_storage_config (is_rank_replicated); "
        "mem_cache/hicache_storage.py HiCacheStorageConfig.is_storage_writer (0.5.23); "
        "hybrid_cache_controller.py should_backup",
    ),
    C(
        "CTL-9",
        "controller",
        "engine",
        "Prefetch policies: best_effort terminates when the scheduler asks, wait_complete never "
        "terminates early, timeout terminates after the prefetch timeout (CTL-16; CTL-14 in 0.5.23).",
        "The engine trades time-to-first-token against hit length; the policy names the trade.",
        "sglang managers/cache_controller.py terminate_prefetch; mem_cache/unified_radix_cache.py "
        "prefetch_stop_policy, _can_terminate_prefetch, check_prefetch_progress (where the scheduler's admission "
        "poll applies it)",
    ),
    C(
        "CTL-10",
        "controller",
        "engine",
        "A controller may cap the prefetch timeout: with a maximum set, the budget is min(max, the "
        "release's budget: CTL-14 or CTL-16); without one (the default) it is not capped.",
        "No pinned release's engine caps the budget; the cap is an operator's bound on a slow store. "
        "0.5.20 still ships HiRadixCache's capped budget (defaults base 2.0 s, 0.1 s per 1024 tokens, "
        "max 30 s), but its cache registry builds UnifiedRadixCache, which follows CTL-16, so the cap "
        "is a project decision, not a fact of any release.",
        "project decision; the capped form as sglang 0.5.20 mem_cache/hicache_storage.py "
        "PrefetchTimeoutConfig and hiradix_cache.py HiRadixCache._prefetch_timeout_check_linear_func "
        "(never built by 0.5.20's cache registry)",
        releases="decision",
    ),
    C(
        "CTL-11",
        "controller",
        "engine",
        "A backend that raises, returns None, returns the wrong number of results or misses its deadline never "
        "kills a controller thread (nor the scheduler thread, which makes the PD-decode hit probe and "
        "0.5.21-0.5.22's ticket-mode queries and calls get_stats and, in 0.5.23, describe_l3_object_layout) and "
        "never has a page counted as loaded that it did not confirm: a read confirms the leading run of its "
        "entries that are a true flag (True, numpy's included) in a result of exactly len(keys) entries (of a "
        "legacy batch_get, the leading run of entries that are not None), a hit query a count as BE-2 reads one, "
        "and a pool a v2 result leaves out confirms none of its pages; anything else counts as a failure at or "
        "before that page (from 0.5.22 SGLang fails the whole slice on a raise).",
        "Storage is outside the engine's control; the engine must degrade to recomputation, not to garbage or a "
        "hang. Released SGLang reads a result more leniently (a v1 read's entries by truth with no length check, "
        "a v2 read's by anything but False, DIV-27 and DIV-46, a KV-derived pool left out lowering nothing): the "
        "divergences record it, and the reading above is the project's (hicache_spec.confirmation, which the "
        "reference controller counts by and the trace checker judges by).",
        "sglang managers/cache_controller.py prefetch_io_aux_func, backup_thread_func, _page_transfer, "
        "_page_get_zero_copy, _generic_page_get (the legacy read), _page_transfer_kv_batch; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _sync_prefetch_hit_query (0.5.22+: outside the hit "
        "query's try), 0.5.21-0.5.22 submit_prefetch (the ticket-mode queries, on the scheduler thread); "
        "mem_cache/unified_radix_cache.py UnifiedRadixCache.query_storage_hit_length (the PD-decode probe, on the"
        " scheduler thread); 0.5.23 managers/scheduler.py Scheduler._hicache_l3_layout; "
        "disaggregation/decode_kvcache_offload_manager.py DecodeKVCacheOffloadManager (a plain HiCacheController "
        "backs up the decode offload of an MHA or MLA model; an SWA model's, from 0.5.21, the hybrid one); a bug "
        "class of SGLang's controller (#38428)",
    ),
    C(
        "CTL-12",
        "controller",
        "engine",
        "Host pages allocated for a prefetch are freed exactly once: the unloaded tail when IO "
        "stops, everything when the operation is revoked.",
        "A double free corrupts the allocator; a missing free leaks host memory.",
        "project decision",
        releases="decision",
    ),
    C(
        "CTL-13",
        "controller",
        "engine",
        "Backup is never cancelled once started.",
        "A half-written node would leave a hole that the hit query cannot see past.",
        "sglang managers/cache_controller.py _page_backup, backup_thread_func, _page_backup_or_log (0.5.22+); "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py HybridCacheController.backup_thread_func (the one "
        "every in-tree prefill path runs), _page_backup (0.5.20), _page_backup_with_stable_layout (0.5.21+); a "
        "0.5.20-0.5.21 backup that raises ends the thread instead (DIV-26, DIV-45)",
    ),
    C(
        "CTL-14",
        "controller",
        "engine",
        "The prefetch timeout is base + requested pages * page_size / 1024 * per_ki_token seconds, defaults 1.0 s"
        " and 0.25 s, with no maximum; it starts at the first blocked admission poll, and a deadline never cuts a"
        " prefetch whose KV already landed. A prefetch of the pipeline-parallel ticket mode is never timed out "
        "(DIV-43).",
        "The wait budget scales with the span asked for; cutting a prefetch whose KV is loaded salvages nothing.",
        "sglang 0.5.23 mem_cache/unified_radix_cache.py check_prefetch_progress, _can_terminate_prefetch, "
        "_start_storage_prefetch_wait, _prefetch_deadline_expired, _check_pp_prefetch_progress (the ticket mode);"
        " unified_cache/storage_attachment.py apply_runtime_config; hybrid_cache_controller.py "
        "parse_storage_backend_extra_config (0.5.20-0.5.22: CTL-16)",
        releases="0.5.23",
    ),
    C(
        "CTL-15",
        "controller",
        "engine",
        "A rank that is not the storage writer skips the KV backup and reports the whole span as completed if and"
        " only if it had at least one sidecar to write and every sidecar write returned a list or tuple of "
        "len(keys) true flags (CTL-11's reading; for a transfer carrying no keys, as many as its host slots); "
        "otherwise it reports 0 tokens.",
        "Completion must not claim pages the rank never confirmed, and ranks must still ack.",
        "sglang mem_cache/hybrid_cache/hybrid_cache_controller.py _page_backup_with_stable_layout (0.5.20: "
        "_page_backup); managers/cache_controller.py HiCacheController.backup_thread_func (a plain controller's "
        "non-writer, the decode offload of an MHA or MLA model, reports 0)",
    ),
    C(
        "CTL-16",
        "controller",
        "engine",
        "The prefetch timeout is base + pages * page_size / 1024 * per_ki_token seconds, defaults "
        "1.0 s and 0.25 s, with no maximum, where pages is the length of the operation's key list "
        "when the deadline is checked (empty before the hit query answers; then the agreed hit, cut "
        "to the host allocation and, in buffer-only mode, less the trimmed device-resident head); it "
        "is timed from the operation's creation. A prefetch of the pipeline-parallel ticket mode is "
        "never timed out (DIV-43).",
        "Before 0.5.23 the unified cache's wait budget follows what is being loaded, not the span "
        "asked for, as 0.5.23's does.",
        "sglang 0.5.20-0.5.22 mem_cache/unified_radix_cache.py _prefetch_timeout_check_linear_func; "
        "unified_cache/storage_attachment.py apply_runtime_config; managers/cache_controller.py "
        "prefetch_thread_func (hash_value cut to the hit); hybrid_cache_controller.py "
        "PrefetchOperation.__init__ (start_time), trim_prefetch_full_head",
        releases="0.5.20-0.5.22",
    ),
    # ---------------------------------------------------------------- HYB
    C(
        "HYB-1",
        "hybrid",
        "engine",
        "A KV-derived sidecar (indices_from_pool=KV) is read in the same slice as the KV pages it derives from, "
        "and the slice's loaded count is the minimum of the KV count and each KV-derived pool's count in the "
        "result; a pool the result leaves out confirms none of its pages (CTL-11; a backend answers every pool it"
        " is asked, BE-19; SGLang lowers nothing for it: DIV-116).",
        "A KV page without its derived sidecar is unusable.",
        "sglang managers/cache_controller.py HiCacheController._page_transfer, _page_transfer_kv_batch; "
        "mem_cache/hicache_storage.py PoolTransfer.indices_from_pool, count_pool_hits",
    ),
    C(
        "HYB-2",
        "hybrid",
        "engine",
        "Other sidecars (SWA, Mamba) are read once, after KV fully completed and only for an operation not "
        "terminated, in one batch_get_v2 per trailing-length group (PFX-9; 0.5.20 makes one call carrying every "
        "transfer), their TRAILING_PAGES keys re-aligned to the hit, and acked with their per-pool hits; "
        "otherwise they are not read and the ack carries no hits. Where every sidecar is KV-derived the call "
        "carries no transfer (0.5.20 always; 0.5.21+ when the operation carries no prefix: the feature off, or a "
        "ticketed prefetch whose prefix was [] (DIV-2)), answered with an empty result (BE-19).",
        "Their windows are defined relative to the final hit, known only at the end.",
        "sglang mem_cache/hybrid_cache/hybrid_cache_controller.py _page_transfer_sidecar, _sync_trailing_keys, "
        "_trailing_chain_groups (0.5.21+)",
    ),
    C(
        "HYB-3",
        "hybrid",
        "engine",
        "A TRAILING_PAGES transfer reads the window of up to its N pages ending at the KV hit the "
        "operation loads: the agreed hit cut to the rank's host allocation (with a head trimmed in "
        "buffer-only mode, its untrimmed end); fewer than N when that hit is shorter.",
        "The window must end where the prefix ends, not where the query began.",
        "sglang mem_cache/hicache_storage.py PoolHitPolicy.TRAILING_PAGES; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _page_transfer_sidecar, _sync_trailing_keys",
    ),
    C(
        "HYB-4",
        "hybrid",
        "engine",
        "A read of the sidecars that are not KV-derived succeeds only if every pool is present in the result with"
        " exactly len(keys) entries, none of them False; a pool missing from the result is a failure (SGLang "
        "counts any entry but False as loaded, None included: HYB-8, DIV-27; it never compares a list's length "
        "with the keys: DIV-46; a backend returns bools, BE-19). KV-derived pools are read as HYB-1 says.",
        "A missing pool counted as a hit restored KV beside stale sidecar state.",
        "sglang mem_cache/unified_radix_cache.py UnifiedRadixCache._check_hybrid_prefetch_result (a pool "
        "absent from the acked hits counts 0); mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "_page_transfer_sidecar",
    ),
    C(
        "HYB-5",
        "hybrid",
        "engine",
        "A hybrid backup operation writes its sidecars first, in one batch_set_v2 per trailing-length group "
        "(PFX-9; 0.5.20 makes one call carrying every transfer) over the whole span, then, on the KV writer "
        "(CTL-15 for the others), KV in STORAGE_BATCH_SIZE slices; a failed sidecar write may stop the KV write "
        "or not.",
        "KV is what makes a page visible to the hit query; it goes last so a reader never finds KV without "
        "sidecars that were attempted. Every pinned release writes KV whatever the sidecar writes returned (when "
        "count_pool_hits can read them; a None result, or entries that are None, numbers, strings or arrays "
        "holding a False, raise before KV), relying on the hit query's pool verdicts (BE-21) to keep such a page "
        "from being restored without its sidecar; an engine may also skip KV then.",
        "sglang hybrid_cache_controller.py _page_backup_with_stable_layout (0.5.20: _page_backup)",
    ),
    C(
        "HYB-6",
        "v2",
        "both",
        "An ALL_PAGES pool's hit is the leading run of its pages present within the KV hit; a backend that "
        "reports the pool's entry reports that run exactly (the project's rule, as BE-21's: SGLang reads the "
        "entries only from 0.5.22, in buffer-only mode, where one too low costs rewrites).",
        "Every page of the prefix needs that pool's state.",
        "sglang mem_cache/hicache_storage.py PoolHitPolicy.ALL_PAGES, HiCacheFile.batch_exists_v2",
    ),
    C(
        "HYB-7",
        "v2",
        "both",
        "A TRAILING_PAGES pool can restore every length n within the KV hit whose window of the last min(n, "
        "max(1, N)) pages ending at n is present (the window stops at the first page), N being "
        "len(transfer.keys); its own boundary is the largest such n, 0 if none, and a backend that reports the "
        "pool's entry reports that boundary exactly (the project's rule, as BE-21's).",
        "Sliding-window and recurrent state is needed only for the last pages of a prefix, so "
        "5 may be restorable while 3 and 4 are not.",
        "sglang 0.5.23 mem_cache/hicache_storage.py HiCacheFile.batch_exists_v2, PoolTransferResult; "
        "0.5.20-0.5.22 HiCacheFile.batch_exists_v2; storage/mooncake_store/mooncake_store.py "
        "MooncakeStore.batch_exists_v2",
    ),
    C(
        "HYB-8",
        "v2",
        "both",
        "count_pool_hits maps each pool to the length of the leading run of True in its results, and a True entry"
        " says that page's bytes landed in the slots the transfer named (BE-22).",
        "Loaded pages count only up to the first failure. SGLang's count stops only at an entry "
        "equal to False, so None or '' from a backend count as loaded (a divergence); a backend "
        "returns bools (BE-19).",
        "sglang mem_cache/hicache_storage.py count_pool_hits",
    ),
    C(
        "HYB-9",
        "hybrid",
        "engine",
        "A BLOCK_GROUPS pool never gates the hit nor the restorable lengths; its entry, where "
        "reported, is the pages its leading complete groups cover.",
        "Compressed blocks are a second form of the FULL pages; their absence must not shrink the KV hit. The "
        "rule restates PoolHitPolicy.BLOCK_GROUPS's documented meaning and binds an engine that sends such a "
        "transfer: no engine code of a pinned release builds one, so what a backend does with one is never "
        "reached and the suite checks no backend for it. HiCacheFile's handling is recorded (it folds one as "
        "trailing in 0.5.22, DIV-7, and refuses it in 0.5.23, DIV-8); SGLang's other v2 backends gate on it or "
        "raise too (Mooncake raises, 3FS, NIXL, NPU memcache and UMBP answer no pages for it, sim and SeaweedFS "
        "fold it as trailing).",
        "sglang 0.5.22+ mem_cache/hicache_storage.py PoolHitPolicy.BLOCK_GROUPS",
        releases="0.5.22+",
    ),
    # ---------------------------------------------------------------- RANK
    C(
        "RANK-1",
        "ranks",
        "engine",
        "The hit of each prefetch operation's hit query is all-reduced with MIN across the attention-TP (else "
        "TP), attention-CP and PP groups exactly once per operation, also for terminated operations and misses.",
        "A rank that skips the collective hangs the others (in 0.5.20-0.5.21 a hit query that raises ends the "
        "rank's prefetch thread: DIV-25). The PD-decode side's earlier storage probe is reduced without PP "
        "(DIV-63).",
        "sglang managers/cache_controller.py _create_sync_groups, prefetch_thread_func, _all_reduce; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _sync_prefetch_hit_query (0.5.22+), submit_prefetch "
        "(0.5.21-0.5.22's ticket mode, DIV-33), pp_prefetch_command_thread_func (0.5.23)",
    ),
    C(
        "RANK-2",
        "ranks",
        "engine",
        "Every rank cuts its key list to the agreed count, or fewer where its host memory holds "
        "less, before reading, and never reads past it; a rank that allocates host pages before the "
        "ranks agree frees those past the agreed count before any read; the MIN over the ranks' "
        "completed tokens then decides the cached prefix.",
        "Ranks that load different lengths disagree on the cached prefix. 0.5.23's pipeline-parallel ticket path "
        "allocates for the rank's own hit, then frees the KV tail after the MIN, and a trailing pool's surplus "
        "window slots before the sidecar read.",
        "sglang managers/cache_controller.py prefetch_thread_func, _all_reduce, _reduce_prefetch_ack; "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _sync_prefetch_hit_query (0.5.22+), "
        "_reduce_prefetch_ack, allocate_storage_hit (0.5.22+), _sync_trailing_keys, "
        "pp_prefetch_command_thread_func and _allocate_pp_prefetch_buffers (0.5.21+); "
        "mem_cache/unified_radix_cache.py _try_alloc_storage_hit; mem_cache/buffer_mode/pipeline.py "
        "BufferModePipeline._queue_prefetch (0.5.22+)",
    ),
    C(
        "RANK-3",
        "ranks",
        "engine",
        "Every rank emits the same acks per operation - one per slice, one sidecar ack when the operation's pool "
        "transfers are not None, one final ack - and each progress and sidecar ack is all-reduced with MIN (the "
        "final ack carries no count to reduce).",
        "A mismatched count leaves a collective waiting forever.",
        "sglang managers/cache_controller.py _page_transfer (one ack per slice), prefetch_io_aux_func (the final "
        "ack), prefetch_sync_thread_func, _reduce_prefetch_ack (reduces); "
        "mem_cache/hybrid_cache/hybrid_cache_controller.py _page_transfer_sidecar (the sidecar ack), "
        "_reduce_prefetch_ack, prefetch_sync_thread_func (0.5.21+, the sync thread that runs)",
    ),
    C(
        "RANK-4",
        "ranks",
        "engine",
        "If any rank terminates a prefetch (timeout or request), every rank terminates it.",
        "Ranks must stop at the same slice to keep their caches equal.",
        "sglang mem_cache/unified_radix_cache.py _can_terminate_prefetch, check_prefetch_progress, "
        "release_aborted_request, UnifiedRadixCache._all_reduce, prefetch_stop_policy",
    ),
    C(
        "RANK-5",
        "ranks",
        "engine",
        "The hit agreement is one packed vector MIN-reduced over each prefetch sync group in turn (RANK-1's "
        "groups): the hit (or the restorable flags, RANK-6) followed by every PoolName's own boundary, -1 for a "
        "pool without a verdict; a pool any rank left out carries no verdict afterwards.",
        "Per-pool beliefs must stay identical on every rank: the hit and every pool's boundary travel in one "
        "vector, so no rank can agree on one without the others.",
        "sglang 0.5.22+ mem_cache/hybrid_cache/hybrid_cache_controller.py _sync_prefetch_hit_query",
        releases="0.5.22+",
    ),
    C(
        "RANK-6",
        "ranks",
        "engine",
        "When any pool is TRAILING_PAGES the vector holds one flag per prefix length 0..span pages (0 always set;"
        " a length set if the rank can restore it and it is within the rank's hit, a backend without "
        "restorable_prefix_pages counting as 1..hit, as does a query skipped on a span a prior hit proved "
        "stored), and the agreed hit is the largest length set on every rank.",
        "Taking MIN of each rank's largest hit can pick a length one rank cannot restore.",
        "sglang 0.5.23 mem_cache/hybrid_cache/hybrid_cache_controller.py _sync_prefetch_hit_query",
        releases="0.5.23",
    ),
    # ---------------------------------------------------------------- the calls no clause covered
    C(
        "BE-29",
        "core",
        "backend",
        "close(), where a backend defines it, comes at most once: on detach after the engine's "
        "storage threads stopped, or right after an attach that failed in the base controller "
        "(possibly after a register_mem_pool_host that raised); it returns without hanging and "
        "leaves the pages already stored to the instances that read them later. What it raises "
        "SGLang logs and ignores.",
        "SGLang keeps its existence cache across a detach and a new attach, so the store must "
        "outlive the instance; a close that drops the store loses the cache, one that hangs hangs "
        "the detach. An attach that fails in the hybrid controller's own registration is not "
        "closed.",
        "sglang managers/cache_controller.py HiCacheController.attach_storage_backend (the failed "
        "attach's cleanup), detach_storage_backend; mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController.attach_storage_backend; mem_cache/unified_cache/storage_attachment.py "
        "StorageAttachment.detach, shutdown",
    ),
    C(
        "BE-30",
        "concurrency",
        "backend",
        "batch_exists and batch_exists_v2 may come from any engine thread - the hit-query thread, the scheduler "
        "thread (the PD-decode probe; in 0.5.21-0.5.22, with the mooncake backend in buffer-only host mode and "
        "more than one pipeline stage, also the pipeline-parallel submission, one query per stage, extra_info "
        "naming the stage asked about: BE-31) and, in 0.5.23 in buffer-only host mode with more than one stage, "
        "the pipeline-parallel ticket thread - while other threads read and write; the answer for the same stored"
        " keys is the same from every thread, with no state kept per thread.",
        "BE-23 counts three threads plus get_stats; hit queries from a thread that never wrote "
        "must still find what the backup thread stored.",
        "sglang mem_cache/unified_radix_cache.py UnifiedRadixCache.query_storage_hit_length; "
        "disaggregation/decode_hicache_mixin.py (the PD-decode probe); managers/cache_controller.py "
        "prefetch_thread_func; hybrid_cache_controller.py submit_prefetch (0.5.21-0.5.22, Mooncake "
        "only: attach_storage_backend's ticket mode), pp_prefetch_command_thread_func (0.5.23, any "
        "backend)",
    ),
    C(
        "BE-31",
        "core",
        "backend",
        "extra_info.extra_info, when a dict, may hold the keys SGLang defines: 'session_id' (a str, on "
        "batch_set_v2 from 0.5.23's Mooncake direct linker to the store it builds) and 'pp_rank' (an int, on the "
        "hit queries of 0.5.21-0.5.22's pipeline-parallel ticket mode, Mooncake with buffer-only host memory and "
        "more than one stage: stage 0's TP rank r asks stages r, r+tp_size, ..., naming the stage asked about); a"
        " backend reads them or ignores them: session_id never changes which pages are stored or found, and a "
        "pp_rank naming the instance's own stage is answered as a query without it.",
        "A backend that keys pages by a session or a stage taken from extra_info hides them from the calls that "
        "do not carry it (the same pages are written and queried by paths that differ in extra_info). SGLang "
        "sends these keys only to its own MooncakeStore (the ticket mode asks for the Mooncake backend, the "
        "direct linker builds its store); that any other backend may meet them is the project's rule.",
        "sglang 0.5.21-0.5.22 mem_cache/hybrid_cache/hybrid_cache_controller.py "
        "HybridCacheController.submit_prefetch, _storage_hit_query (pp_rank); 0.5.23 "
        "mem_cache/storage/mooncake_store/mooncake_direct_linker.py offload_thread_func (session_id)",
        releases="0.5.21+",
    ),
    C(
        "BE-32",
        "core",
        "backend",
        "A backend that offers describe_l3_object_layout(sidecar_pool_specs=..., swa_trailing_pages=..., "
        "page_size=...) returns a dict with enabled (a bool), backend, page_size and hicache_object_layout, a "
        "dict holding a pools list; a layout it cannot describe has enabled False and a reason, and nothing more "
        "of such a reply is relied on. When every scheduler's reply is enabled, merge_l3_layouts joins them: the "
        "schedulers of one pipeline stage return equal dicts, the stages' replies differ only in pp_rank and "
        "pools, pp_size, where given, is an int (absent, 1), and the stages of replies that give pp_rank are "
        "exactly 0..pp_size-1.",
        "merge_l3_layouts joins the schedulers' replies and reports the whole layout inconsistent or incomplete "
        "where they do not join, so a layout every scheduler could describe is lost. Where a reply is disabled "
        "the joined layout is disabled whatever the others hold (only its reason changes), so nothing else of it "
        "matters: MooncakeStore lists its pools, a TP-sharded pool's suffixes with the TP rank in them, before it"
        " finds one it cannot describe, and its disabled replicas differ. 0.5.23 asks only a MooncakeStore, never"
        " behind the failure injector; that the rule binds any backend that offers the method is the project's "
        "rule.",
        "sglang 0.5.23 mem_cache/hicache_storage.py merge_l3_layouts, _l3_layout_stage_independent, "
        "disabled_l3_layout; managers/scheduler.py Scheduler._hicache_l3_layout; "
        "storage/mooncake_store/mooncake_store.py MooncakeStore.describe_l3_object_layout",
        releases="0.5.23",
    ),
    C(
        "BE-33",
        "core",
        "both",
        "Under SGLang's failure injector (SGLANG_TEST_HICACHE_BACKEND_RANDOM_DELAY or _FAILURE set) the backend "
        "the cache controller attaches through StorageBackendFactory.create_backend is held by a proxy that "
        "passes register_mem_pool_host, register_mem_host_pool_v2, on_host_pools_registered, clear, get_stats and"
        " close through unchanged (close whether or not the backend defines it: the detach logs the "
        "AttributeError), and exists, get, set, batch_get, batch_set, batch_exists and the v1 and v2 batch "
        "methods after an injected delay, or answers them itself with a miss or a failed write; it passes every "
        "argument on positionally, the legacy methods' optional targets (target_location(s), target_sizes) as "
        "None included; no other method reaches the backend (a direct linker's own store is not wrapped).",
        "A backend tested under injection sees misses it never produced and never sees a call the "
        "proxy does not forward (describe_l3_object_layout, backend-specific methods); its pages "
        "must stay consistent when a write is reported failed without reaching it.",
        "sglang 0.5.23 mem_cache/hicache_storage.py HiCacheStorageFailureInjector, "
        "_maybe_wrap_hicache_storage_failure_injector; mem_cache/storage/backend_factory.py "
        "StorageBackendFactory.create_backend",
        releases="0.5.23",
    ),
    C(
        "CTL-17",
        "controller",
        "engine",
        "A PD-decode offload backs up each offload_stride-aligned increment of a request's decoded pages through "
        "the backup path (CTL-7, CTL-8) under the keys a prefill of the same tokens computes: the first "
        "increment's chain continues from the key of the prompt's last full page (computed from the request's "
        "namespace seed, KEY-3, KEY-4; the seed itself when the prompt is shorter than a page), each later one "
        "from the last key the previous increment was queued under; an unaligned tail is freed unwritten.",
        "A later prefill of the same conversation looks the pages up by its own chain; keys that "
        "restart per increment are never hit.",
        "sglang disaggregation/decode_kvcache_offload_manager.py DecodeKVCacheOffloadManager.offload_kv_cache, "
        "_compute_prefix_hash, _check_offload_progress, _trigger_backup, finalize_release_on_finish",
    ),
    C(
        "HYB-10",
        "hybrid",
        "engine",
        "Every piece of state a KV slot owns beside its KV (a compressed-K index, the NSA or DSA "
        "index buffer, draft-model and draft-SWA state, Mamba state) lives in a host pool registered "
        "with the backend and travels with its page: the backup that writes the page writes it, the "
        "prefetch that restores the page reads it; a page whose slot state no registered pool holds "
        "is neither backed up nor restored.",
        "A page restored without its compressed-K index, its index buffer or its draft SWA state "
        "attends over stale state: users report answers that differ after every restart.",
        "decision on sglang mem_cache/hybrid_cache/hybrid_pool_assembler.py (the host pools each "
        "model stack registers), speculative/base_spec_worker.py BaseSpecWorker._build_hicache_draft_plan "
        "and mem_cache/kv_cache_builder.py maybe_register_hicache_draft (the draft state registered), "
        "mem_cache/hicache_storage.py PoolName",
        releases="decision",
    ),
)

CLAUSES += LINKER_CLAUSES  # the linker family (LNK) lives in its own module
