"""The linker clauses (LNK): SGLang's UnifiedCacheLinker, the direct device-pool-to-store plug-in point.

A linker moves pages between the engine's device pools and a store with no host tier in between;
``UnifiedCacheLinkerWrapper`` drives it from the radix tree. Appended to ``hicache_spec.clauses.CLAUSES``.
IDs are stable: append, never renumber; retire instead.
"""

from __future__ import annotations

from hicache_spec._clause import Clause

__all__ = ["LINKER_CLAUSES"]

C = Clause

_ABC = "sglang {} mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker"
_WRAPPER = "sglang {} mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinkerWrapper"

LINKER_CLAUSES: tuple[Clause, ...] = (
    C(
        "LNK-1",
        "linker",
        "backend",
        "A linker for 0.5.20 or 0.5.21 implements the eleven abstract methods lookup, load, "
        "start_layer_wise_loading, cancel_queued_load, num_completed_loads, pop_completed_load, offload, "
        "num_completed_offloads, pop_completed_offload, reset and close.",
        "An abstract method left unimplemented makes the class abstract: constructing it raises TypeError "
        "at server start.",
        _ABC.format("0.5.20, 0.5.21") + " (its abstract methods)",
        releases="0.5.20-0.5.21",
    ),
    C(
        "LNK-2",
        "linker",
        "backend",
        "A linker for 0.5.22 or later implements the ten abstract methods lookup, load, "
        "start_layer_wise_loading, finish_layer_wise_loading, cancel_queued_load, offload, "
        "num_completed_offloads, pop_completed_offload, reset and close (finish_layer_wise_loading replaced "
        "num_completed_loads and pop_completed_load).",
        "A linker written to 0.5.21's interface lacks finish_layer_wise_loading and is refused as abstract; "
        "one written to a later branch's is refused by 0.5.20's and 0.5.21's ABC.",
        _ABC.format("0.5.22, 0.5.23") + " (its abstract methods)",
        releases="0.5.22+",
    ),
    C(
        "LNK-3",
        "linker",
        "backend",
        "offload accepts a keyword argument session_id, a str or None (the wrapper passes it by "
        "keyword on every call; no caller relies on a default).",
        "A linker whose offload takes only the transfers raises TypeError on the first write-through.",
        _ABC.format("0.5.23") + ".offload; " + _WRAPPER.format("0.5.23") + "._offload_node",
        releases="0.5.23",
    ),
    C(
        "LNK-4",
        "linker",
        "backend",
        "A linker loaded by the dynamic backend is a non-abstract UnifiedCacheLinker subclass named by "
        "linker_module_path and linker (linker_extra_config an optional JSON object, no other field), and "
        "its constructor accepts (server_args, params, *, components, extra_config, forward_stream).",
        "The factory refuses a class that is not a subclass or still abstract, names the missing methods, "
        "and calls the constructor with exactly those keywords; a constructor without forward_stream= "
        "fails at server start.",
        "sglang 0.5.23 mem_cache/unified_cache/linker_factory.py create_unified_cache_linker; "
        "linker_config.py UnifiedCacheLinkerConfig.from_dict",
        releases="0.5.23",
    ),
    C(
        "LNK-5",
        "linker",
        "backend",
        "A linker has a layer_done_counter with set_consumer(index) and wait_until(layer): after set_consumer(i),"
        " wait_until(l) returns once layer l of the batch started as i has landed (at once for an index with no "
        "batch); a failed load ends the wait too (0.5.20-0.5.21's in-tree counters raise, 0.5.22+ return and "
        "finish_layer_wise_loading reports it).",
        "The KV pools wait on this counter before each layer's attention; without it the forward reads "
        "slots the load has not written.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker.layer_done_counter; "
        "sglang 0.5.20+ mem_cache/registry.py (the counter registered with the KV pool and the TP worker); "
        "managers/tp_worker.py set_hicache_consumer; sglang 0.5.20-0.5.21 "
        "storage/mooncake_store/mooncake_direct_linker.py, storage/umbp/umbp_direct_linker.py "
        "LayerWiseLoadCounter.wait_until (raises on a failed load); sglang 0.5.22+ "
        "mem_cache/unified_cache/unified_cache_linker.py LayerWiseLoadCounter",
    ),
    C(
        "LNK-6",
        "linker",
        "backend",
        "For a cache with an SWA component a linker has a pools attribute that answers whether it holds "
        "PoolName.SWA (a linker that stores SWA pages holds it, one that does not leaves it out); for a "
        "cache without SWA, pools is not read.",
        "The wrapper asks PoolName.SWA in pools at construction, only when the cache has an SWA tree "
        "component, to decide whether restored tails keep their SWA state; a missing attribute fails the "
        "attach there.",
        _ABC.format("0.5.23") + ".pools; " + _WRAPPER.format("0.5.23") + ".__init__ (_skip_swa)",
        releases="0.5.23",
    ),
    C(
        "LNK-7",
        "linker",
        "backend",
        "lookup(rid, transfers) returns, among 1..len(the KV transfer's keys), exactly the prefix lengths every "
        "pool can restore by its hit policy (ALL_PAGES: every page before the length; TRAILING_PAGES: the pages "
        "of the window of len(its keys) pages ending at the length that lie in the tail, pages max(0, L - "
        "len(keys))..L-1; BLOCK_GROUPS, defined from 0.5.22, is never sent to a linker and nothing is asked of a "
        "linker for it), counting a page once it is stored whole (LNK-8); the lengths are ints, order and repeats"
        " carry no meaning and ints outside 1..len(keys) are ignored (a length that is not an int raises on the "
        "scheduler thread).",
        "The wrapper marks each listed length in a mask and intersects the masks across ranks; a listed "
        "length a pool cannot restore loads a prefix without its trailing state, and an omitted one is a "
        "lost hit on every rank.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker.lookup; sglang 0.5.20+"
        " mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinkerWrapper._sync_restorable_prefix; "
        "sglang 0.5.20+ mem_cache/hicache_storage.py PoolTransferResult.restorable_prefix_pages; the in-tree "
        "linkers that compute the set: sglang 0.5.20+ mem_cache/storage/mooncake_store/mooncake_store.py "
        "MooncakeStore.batch_exists_v2, mem_cache/storage/umbp/umbp_direct_linker.py "
        "UMBPDirectLinker._apply_hit_policy; the transfers sent: mem_cache/unified_cache/components/full.py and "
        "swa.py build_external_linker_transfer (0.5.20+), components/mamba.py (0.5.23), expanded by "
        "mem_cache/hybrid_cache/linker_pool_assembler.py DevicePoolGroup.resolve_transfers",
    ),
    C(
        "LNK-8",
        "linker",
        "backend",
        "lookup reports a length only when every object a load at that length reads is wholly stored: every layer"
        " of each ALL_PAGES pool's pages up to it, and of each TRAILING_PAGES pool's pages in the window ending "
        "there; a part an offload is still writing, or wrote in part (an offload reported failed), is never read "
        "for a reported length, so no reported length needs a torn page (a trailing pool's part of a page outside"
        " that window need not be stored).",
        "A torn offload (some pools or pages written) that lookup counts loads garbage into the slots of a "
        "request that then decodes from them.",
        _ABC.format("0.5.20+") + ".offload ('atomic persistence'), .lookup",
    ),
    C(
        "LNK-9",
        "linker",
        "backend",
        "load(rid, transfers) only queues: no device slot is written before the next start_layer_wise_loading().",
        "The slots of a queued load still belong to the batch being scheduled: from 0.5.22 the request frees them"
        " when it is cancelled before its batch starts; in 0.5.20-0.5.21 the wrapper publishes them into the tree"
        " before the load runs, and a cancel unlocks the node for eviction and reuse. A write before the start "
        "lands in slots another request may then hold.",
        _ABC.format("0.5.20+") + ".load, .cancel_queued_load",
    ),
    C(
        "LNK-10",
        "linker",
        "backend",
        "load refuses a rid already queued (returns False or raises; it never queues it twice: the project's "
        "guard, as SGLang's wrapper never sends one) and accepts transfers for a subset of the pools and of each "
        "pool's pages: 0.5.20-0.5.21 leave out the pools and pages already resident in the device (an SWA-only "
        "load among them) and KV's SWA window where the SWA allocator is a per-request ring, 0.5.22+ send the "
        "whole tail, KV without its SWA window where SWA is not restored (0.5.23: where the linker leaves SWA out"
        " of pools); a False means the request recomputes (0.5.22+; earlier the wrapper raises, DIV-49), and from"
        " 0.5.22 the answer depends on the transfers alone, the same on every rank.",
        "A partial load is routine in every release. 0.5.22+ take the same branch on every rank from load's "
        "answer: a rank answering True while another answers False extends one rank's prefix and not the other's,"
        " and only the True ranks enter finish_loads' all-reduce, which hangs. A second queue of the same rid "
        "would write its slots twice.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker.load; sglang "
        "0.5.20-0.5.21 UnifiedCacheLinkerWrapper.load_back, _queue_load (a False raises: DIV-49); sglang 0.5.22+ "
        "UnifiedCacheLinkerWrapper.load_back; storage/mooncake_store/mooncake_direct_linker.py "
        "MooncakeDirectLinker.load, storage/umbp/umbp_direct_linker.py UMBPDirectLinker.load",
    ),
    C(
        "LNK-11",
        "linker",
        "backend",
        "start_layer_wise_loading() starts every queued load as one batch and returns its counter index, at least"
        " 0, which stands for that batch until it is finished (an index may come back for a later batch, as "
        "SGLang finishes a batch before it starts the next); with nothing queued it starts nothing and returns an"
        " index whose wait returns at once: a negative one from 0.5.23 (-1, the in-tree linkers' convention in "
        "every release).",
        "The forward sets the index as the counter's consumer and waits per layer; an index that still stands for"
        " an older batch makes it wait on that one and read slots the load is still writing. 0.5.23 reads a "
        "negative index as no load pending (PD prefill's early send, the prefill graph's layer waits, the Mamba "
        "state copy), so a started batch's index must not be negative and an empty start's must; before 0.5.23 "
        "the index only reaches the counter's wait.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py "
        "UnifiedCacheLinker.start_layer_wise_loading; managers/tp_worker.py set_hicache_consumer; sglang 0.5.22+ "
        "UnifiedCacheLinkerWrapper.finish_loads; sglang 0.5.23 managers/scheduler.py run_batch (the PD prefill's "
        "early send), model_executor/runner/prefill_cuda_graph_runner.py _wait_for_layer_loads and mem_cache/memory_pool.py "
        "HybridReqToTokenPool.copy_mamba_state (a negative index read as no load)",
    ),
    C(
        "LNK-12",
        "linker",
        "backend",
        "A load writes, into each transfer's device_indices, every layer's bytes of the pages stored under its "
        "keys for that pool, in every device buffer SGLang indexes by that pool's slots (the buffers derived from"
        " KV too: DSA's indexer K, DeepSeek-V4's compressed KV and compress state, packed draft KV), byte for "
        "byte, and writes no row outside those slots.",
        "From 0.5.22 the loaded slots are private to the request until the load lands; in 0.5.20-0.5.21 load_back"
        " inserts the tail into the tree before its bytes land, so a wrong byte reaches every later request "
        "matching that prefix. A buffer left unwritten restores a page without its derived state, and a "
        "neighbouring row overwritten corrupts another request's KV.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker.load, "
        "UnifiedCacheLinkerWrapper.load_back; sglang 0.5.20+ mem_cache/unified_cache/components/full.py and "
        "swa.py build_external_linker_transfer (device_indices per phase), 0.5.23 components/mamba.py (one state "
        "slot for the last key); mem_cache/hybrid_cache/linker_pool_assembler.py "
        "DevicePoolGroup.resolve_transfers (the device buffers a transfer covers); the in-tree linkers that write"
        " them: storage/mooncake_store/mooncake_direct_linker.py, storage/umbp/umbp_direct_linker.py",
    ),
    C(
        "LNK-13",
        "linker",
        "backend",
        "finish_layer_wise_loading(index) returns only once the batch has stopped writing device memory (writes "
        "ordered on the forward stream ahead of the slots' next use may still run), True when every layer landed "
        "and False when any failed, at least on the rank that read the failed pages (the engine takes the MIN of "
        "the ranks' answers: a peer fed by broadcast may answer True); a failure is never raised, neither from it"
        " nor from layer_done_counter.wait_until.",
        "The forward runs on whatever the slots hold; the wrapper aborts the batch's requests when any rank "
        "answers False (0.5.22+'s Mooncake linker with MLA dedup has peer ranks receive the pages by a broadcast "
        "on the forward stream and never see the source's error). An exception inside the forward kills the "
        "scheduler for every request.",
        _ABC.format("0.5.22+")
        + ".finish_layer_wise_loading; LayerWiseLoadCounter.wait_until, finish; "
        + _WRAPPER.format("0.5.22+")
        + ".finish_loads",
        releases="0.5.22+",
    ),
    C(
        "LNK-14",
        "linker",
        "backend",
        "Each started batch is reported exactly once by pop_completed_load, in start order, with the rids "
        "it loaded, only after it stopped writing device memory; num_completed_loads counts the batches "
        "ready.",
        "The wrapper releases each rid's lock on its tree node when its batch is popped; a batch reported "
        "early frees slots still being written, one never reported leaks the lock.",
        _ABC.format("0.5.20, 0.5.21")
        + ".num_completed_loads, .pop_completed_load; "
        + _WRAPPER.format("0.5.20, 0.5.21")
        + ".drain_loads; sglang 0.5.20, 0.5.21 mem_cache/unified_radix_cache.py "
        "UnifiedRadixCache.check_hicache_events (pops the MIN over the ranks)",
        releases="0.5.20-0.5.21",
    ),
    C(
        "LNK-15",
        "linker",
        "backend",
        "cancel_queued_load(rid) returns True only for a load queued and not yet started, which then never "
        "writes, and False for a started one; 0.5.20-0.5.21 also ask about a cancelled or unknown rid, which gets"
        " False (0.5.22+ ask only about a rid whose load is in flight).",
        "0.5.22+: on True the abort path frees the request's private slots at once; a started load then writes "
        "into freed slots. 0.5.20-0.5.21: load_back inserts the tail into the tree before it queues the load, so "
        "any True, even for an unstarted load, leaves slots never written published in the tree (SGLang's own "
        "linkers always answer False there), and the wrapper asks for every aborted request and fails on True for"
        " one it never queued. Declining is always allowed.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker.cancel_queued_load; "
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py "
        "UnifiedCacheLinkerWrapper.release_request, load_back; mem_cache/unified_radix_cache.py "
        "UnifiedRadixCache.release_aborted_request (the only caller)",
    ),
    C(
        "LNK-16",
        "linker",
        "backend",
        "Every offload that returned True yields exactly one result, unless a reset() or close() comes first "
        "(LNK-17), consumed by pop_completed_offload in submission order, True only when every page of every pool"
        " of that offload was written (by a rank that writes: a rank that does not own a replicated pool reports "
        "True without writing, LNK-20); num_completed_offloads counts the results ready; an offload that returned"
        " False yields none.",
        "The wrapper pairs the n-th result with its n-th pending offload to publish or roll back a tree "
        "node; results out of order publish a node whose pages failed.",
        _ABC.format("0.5.20+")
        + ".offload, .num_completed_offloads, .pop_completed_offload; "
        + _WRAPPER.format("0.5.20+")
        + ".take_completed_offloads, commit_completed_offloads",
    ),
    C(
        "LNK-17",
        "linker",
        "backend",
        "reset() returns only once no load or offload begun before it writes device memory or the store; "
        "queued loads and unconsumed results are dropped and the linker stays usable.",
        "The wrapper releases every tree lock right after reset returns; a transfer still running then "
        "writes slots the tree has handed to other requests.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinker.reset; sglang 0.5.20+ "
        "mem_cache/unified_cache/unified_cache_linker.py UnifiedCacheLinkerWrapper.reset; sglang 0.5.20+ "
        "mem_cache/unified_radix_cache.py UnifiedRadixCache.reset, _reset_full",
    ),
    C(
        "LNK-18",
        "linker",
        "backend",
        "close() returns only once no load or offload writes device memory or the store, and releases "
        "the linker's threads and resources.",
        "The wrapper releases every tree lock right after close returns and the process tears the pools "
        "down; a transfer still running writes freed memory.",
        _ABC.format("0.5.20+") + ".close; " + _WRAPPER.format("0.5.20+") + ".close",
    ),
    C(
        "LNK-19",
        "linker",
        "backend",
        "reset() and close() may each be called again, and close() after reset(), without raising.",
        "SGLang calls reset() on every cache flush (and, in 0.5.23, on a role switch), so it repeats; an "
        "embedding engine or a test harness may close a linker from more than one shutdown path, and a second "
        "call that raises hides the first failure.",
        "project decision (SGLang calls reset() from UnifiedRadixCache.reset and close() once when it releases "
        "host resources; UMBP's close is guarded, Mooncake's reset joins and drains its queues, and its second "
        "close enqueues stop sentinels no thread consumes, so a third close or a later reset blocks)",
        releases="decision",
    ),
    C(
        "LNK-20",
        "linker",
        "backend",
        "When the pools are replicated across tensor-parallel ranks (the DSA and DeepSeek-V4 pool groups), only "
        "the owner rank, rank 0 of the attention-TP group (the TP group without DP attention), writes the store; "
        "another rank's offload of transfers it resolves returns True and reports True without writing (the "
        "project's rule, SGLang's Mooncake linker's; the engine relies only on each rank reporting True for what "
        "the owner writes: SGLang's UMBP linker writes from every rank, DIV-38).",
        "Every rank holds the same pages; writing them from each rank multiplies the store's traffic by the TP "
        "size and races on the same objects. The engine takes the MIN of the ranks' results, so a rank that skips"
        " the write must report True and the owner's result decides.",
        "sglang 0.5.20+ storage/mooncake_store/mooncake_direct_linker.py MooncakeDirectLinker.__init__, offload "
        "(offload_owner); mem_cache/hybrid_cache/linker_pool_assembler.py (rank_replicated); "
        "mem_cache/unified_radix_cache.py UnifiedRadixCache.check_hicache_events",
    ),
    C(
        "LNK-21",
        "linker",
        "backend",
        "Pages stored for one model, or one (tp, cp, pp) rank coordinate, are never reported by lookup "
        "for another; when the pools are rank-replicated the TP coordinate is left out, so every TP rank "
        "finds the owner's pages.",
        "Two models or two shards sharing a key read each other's KV; replicated pools written once by the owner "
        "(LNK-20) must be found by the other ranks. The key carries the rank coordinate, never the group sizes, "
        "so the separation holds within one parallel topology: deployments of one model with different TP or PP "
        "sizes must not share a store.",
        "sglang 0.5.20+ storage/mooncake_store/mooncake_direct_linker.py _storage_suffix, "
        "MooncakeDirectLinker.__init__; storage/mooncake_store/mooncake_store.py MooncakeStore.__init__, "
        "_tag_keys (the model prefix); storage/umbp/umbp_direct_linker.py _storage_suffix (0.5.21+), "
        "UMBPDirectLinker.__init__; storage/umbp/umbp_store.py UMBPStore.__init__",
    ),
    C(
        "LNK-22",
        "linker",
        "engine",
        "The engine intersects the ranks' lookup results: it marks each reported length in 1..len(tail) in a 0/1 "
        "mask, takes a MIN all-reduce across the attention-CP and attention-TP groups (the cache's TP group, the "
        "attention-TP group under DP attention, when neither has more than one rank) and agrees on the largest "
        "length set on every rank of those groups (0: no hit; an allocation that fails, or from 0.5.22 a load "
        "answered False, can still bring it to 0). The stages of a pipeline are not reduced together: each stage "
        "loads what its own groups agreed (unlike the HiCache hit, RANK-1).",
        "A rank's set is sparse; reducing per-rank maxima picks a length some rank cannot restore. Every stage "
        "schedules the same requests in the same order, so with more than one stage the stages' lookups must "
        "agree by themselves: a length one stage can restore and another cannot (a write that failed on one "
        "stage) may leave them loading different prefixes.",
        "sglang 0.5.20+ mem_cache/unified_cache/unified_cache_linker.py "
        "UnifiedCacheLinkerWrapper._sync_restorable_prefix; mem_cache/unified_radix_cache.py "
        "UnifiedRadixCache._all_reduce_attn_groups",
    ),
    C(
        "LNK-23",
        "linker",
        "engine",
        "SGLang's Mooncake direct linker calls the storage backend's batch_exists_v2 with the KV keys and "
        "the expanded transfers and no extra_info, and batch_set_v2 with extra_info None or carrying only "
        "session_id; never prefix keys, and never batch_get_v2 (it loads through the store's own reads). "
        "The UMBP (mori) direct linker calls no HiCacheStorage method.",
        "A backend behind a direct linker must not require the prefix metadata or the host pool the "
        "HiCache controller passes.",
        "sglang 0.5.20+ storage/mooncake_store/mooncake_direct_linker.py MooncakeDirectLinker.lookup, "
        "offload_thread_func; storage/umbp/umbp_direct_linker.py",
    ),
    C(
        "LNK-24",
        "linker",
        "backend",
        "lookup may be called on the scheduler thread while loads and offloads the linker accepted still run on "
        "its own threads: such a call neither raises nor disturbs them, reports every length restorable from "
        "offloads whose writes completed before it began (for pools replicated across TP ranks, the owner rank's "
        "write where the owner alone writes: LNK-20, DIV-38), and reports only lengths whose pages a load started"
        " at once restores byte for byte.",
        "The wrapper calls lookup from match for each new request and takes no lock against the linker's "
        "transfers; SGLang's direct linkers write the store from an offload thread and read it from a load "
        "thread. A lookup that raises mid-update kills the scheduler, a stored prefix it misses is a lost "
        "hit, and a length counted before its pages are whole loads garbage into the request's slots.",
        _WRAPPER.format("0.5.20+") + ".match (lookup on the scheduler thread); sglang 0.5.20+ "
        "storage/mooncake_store/mooncake_direct_linker.py MooncakeDirectLinker.lookup, load_thread_func, "
        "offload_thread_func; sglang 0.5.20+ mem_cache/unified_radix_cache.py "
        "UnifiedRadixCache.check_hicache_events (an offload counts once every rank reports it)",
    ),
)
"""The linker clauses, in ID order."""
