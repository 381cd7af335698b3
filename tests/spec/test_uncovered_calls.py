"""The calls SGLang makes that the first clauses left out: close, hit queries from any thread, extra_info keys,
layout reporting, the failure injector, decode-offload writes, and the state a slot owns.

Scenario: for each clause, the pinned releases' own code (read from their wheels, as the divergence
tests read it) and a check run against the reference backends or the spec functions, with a planted
implementation the check must refuse.
Expected: each call is where the clause says, in exactly the releases it names; the reference
backends pass each check; each planted implementation fails the check of its clause.
Why it matters: a backend or engine tested only against the calls the clauses named could still
break on a call SGLang makes every day (close on detach, a probe from the scheduler thread).
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from hicache_contracts import HiCacheStorageExtraInfo, PageKeys, PoolName, PoolTransfer, ReadOnlyMapping
from hicache_contracts.conformance.checks.engine_calls import FORWARDED, layout_problems
from hicache_contracts.conformance.checks.engine_calls import INJECTED as PROXY_INJECTED
from hicache_reference.backends import MemoryBackend
from hicache_spec import compute_key_chain
from hicache_spec.registry import clause, holds_for
from hicache_spec.releases import SGLANG_RELEASES
from hicache_spec.slots import missing_slot_state
from tests.reference.backend_checks import FileHarness, Harness, MemoryHarness, page_keys, slots_of, write_pages
from tests.sglang_wheels import wheel_root


# ---------------------------------------------------------------- reading a release's code
def release_source(version: str, file: str, function: str) -> str:
    """Return the source of ``Class.method`` or ``function`` in ``file`` of a release, '' when either is absent."""
    path = wheel_root(version) / "sglang" / "srt" / file
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    scope: list[ast.AST] = list(ast.parse(text).body)
    *owners, name = function.split(".")
    for owner in owners:
        found = [node for node in scope if isinstance(node, ast.ClassDef) and node.name == owner]
        if not found:
            return ""
        scope = list(found[0].body)
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return ast.get_source_segment(text, node) or ""
    return ""


EVIDENCE: list[tuple[str, str, str, str]] = [
    # clause, file, function, what the release's code shows
    (
        "BE-29",
        "managers/cache_controller.py",
        "HiCacheController.attach_storage_backend",
        r"self\.storage_backend\.close\(\)",
    ),
    (
        "BE-29",
        "managers/cache_controller.py",
        "HiCacheController.detach_storage_backend",
        r"self\.storage_backend\.close\(\)",
    ),
    (
        "BE-30",
        "mem_cache/unified_radix_cache.py",
        "UnifiedRadixCache.query_storage_hit_length",
        r"self\.cache_controller\._storage_hit_query\(",
    ),
    ("BE-30", "disaggregation/decode_hicache_mixin.py", "", r"\.query_storage_hit_length\("),
    ("BE-32", "mem_cache/hicache_storage.py", "merge_l3_layouts", r"hicache_object_layout"),
    ("BE-32", "managers/scheduler.py", "Scheduler._hicache_l3_layout", r"\.describe_l3_object_layout\("),
    ("BE-33", "mem_cache/hicache_storage.py", "HiCacheStorageFailureInjector", r"def on_host_pools_registered"),
    # the hit query's one in-tree caller (BE-3), the leading run a v1 read is counted by (BE-15), the length check
    # of a skipped replicated write (BE-19), the restorable lengths read only for a trailing-pages query (BE-26),
    # the stages the layout merge compares (BE-32)
    (
        "BE-3",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._storage_hit_query",
        r"\.batch_exists\(",
    ),
    (
        "BE-15",
        "managers/cache_controller.py",
        "HiCacheController._page_get_zero_copy",
        r"if not results\[i\]:[^\n]*\n(?:.*\n){0,3}\s*break",
    ),
    (
        "BE-19",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "",
        r"len\(result\) != expected",
    ),
    (
        "BE-26",
        "mem_cache/hybrid_cache/hybrid_cache_controller.py",
        "HybridCacheController._sync_prefetch_hit_query",
        r"TRAILING_PAGES",
    ),
    ("BE-32", "mem_cache/hicache_storage.py", "_l3_layout_stage_independent", r"\(\"pp_rank\", \"pools\"\)"),
    (
        "CTL-17",
        "disaggregation/decode_kvcache_offload_manager.py",
        "DecodeKVCacheOffloadManager._compute_prefix_hash",
        r"last_hash = prior_hash or storage_namespace_seed\(req\.extra_key, req\.cache_salt\)",
    ),
]


def _found(version: str, file: str, function: str, pattern: str) -> bool:
    if function:
        return re.search(pattern, release_source(version, file, function)) is not None
    path = wheel_root(version) / "sglang" / "srt" / file
    return path.is_file() and re.search(pattern, path.read_text(encoding="utf-8")) is not None


@pytest.mark.parametrize(
    "clause_id, file, function, pattern", EVIDENCE, ids=[f"{e[0]}-{e[2] or e[1]}" for e in EVIDENCE]
)
def test_the_call_is_in_every_release_the_clause_names(clause_id: str, file: str, function: str, pattern: str) -> None:
    item = clause(clause_id)
    shown = [version for version in SGLANG_RELEASES if holds_for(item, version)]
    found = [version for version in shown if _found(version, file, function, pattern)]
    assert found == shown, f"{clause_id}: {function or file} shows {pattern!r} in {found}, the clause names {shown}"


# The pipeline-parallel hit queries: stage 0's submission, one per stage with pp_rank (0.5.21-0.5.22), then
# the ticket thread (0.5.23); the session_id key of 0.5.23's Mooncake linker.
HYBRID = "mem_cache/hybrid_cache/hybrid_cache_controller.py"
SUBMISSION = (
    HYBRID,
    "HybridCacheController.submit_prefetch",
    r"self\._storage_hit_query\(operation, pp_rank=pp_rank\)",
)
PP_RANK_KEY = (HYBRID, "HybridCacheController._storage_hit_query", r"extra_info=\{\"pp_rank\": pp_rank\}")
TICKET_THREAD = (
    HYBRID,
    "HybridCacheController.pp_prefetch_command_thread_func",
    r"self\._storage_hit_query\(operation\)",
)
SESSION_KEY = (
    "mem_cache/storage/mooncake_store/mooncake_direct_linker.py",
    "",
    r"HiCacheStorageExtraInfo\(extra_info=\{\"session_id\": session_id\}\)",
)


@pytest.mark.clause("BE-30", "BE-31")
def test_the_pipeline_parallel_queries_and_the_defined_keys_are_in_exactly_the_releases_named() -> None:
    def where(evidence: tuple[str, str, str]) -> list[str]:
        return [version for version in SGLANG_RELEASES if _found(version, *evidence)]

    assert where(SUBMISSION) == where(PP_RANK_KEY) == ["0.5.21", "0.5.22"]
    assert where(TICKET_THREAD) == ["0.5.23"]
    assert where(SESSION_KEY) == ["0.5.23"]
    named = [version for version in SGLANG_RELEASES if holds_for(clause("BE-31"), version)]
    assert named == sorted(set(where(PP_RANK_KEY)) | set(where(SESSION_KEY)))


# ---------------------------------------------------------------- BE-29: close()
def check_close(harness: Harness) -> None:
    """close() on an instance never registered, and after IO; pages stored before stay readable by a new instance."""
    bare = harness.make(register=False)
    _within(lambda: bare.close(), "close() before register_mem_pool_host")
    writer = harness.make()
    keys = page_keys(3, start=700)
    assert write_pages(writer, keys, [0, 1, 2]) == [True] * 3
    _within(lambda: writer.close(), "close() after IO")
    assert harness.make().batch_exists(keys) == 3, "close() dropped the pages it had stored"


def _within(call: Callable[[], Any], what: str, seconds: float = 5.0) -> None:
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - reported below
            failure.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{what} did not return within {seconds} s"
    assert not failure, f"{what} raised {failure[0]!r}"


class CloseNeedsAPool(MemoryBackend):
    """Planted: close() flushes through the host pool, which a failed attach never registered."""

    def close(self) -> None:
        self.mem_pool_host.page_size  # noqa: B018 - AttributeError before registration
        super().close()


class CloseDropsTheStore(MemoryBackend):
    """Planted: close() clears the store, losing every page for the instances after it."""

    def close(self) -> None:
        self.clear()
        super().close()


@pytest.fixture(params=["memory", "file"])
def harness(request, tmp_path: Path) -> Harness:
    if request.param == "memory":
        return MemoryHarness(f"uncovered-{id(request)}")
    return FileHarness(str(tmp_path / "pages"))


@pytest.mark.clause("BE-29")
def test_close_of_the_reference_backends(harness: Harness) -> None:
    check_close(harness)


@pytest.mark.clause("BE-29")
@pytest.mark.parametrize("planted", [CloseNeedsAPool, CloseDropsTheStore], ids=lambda cls: cls.__name__)
def test_close_check_refuses_the_planted_backends(planted: type) -> None:
    with pytest.raises(AssertionError, match="close\\(\\)"):
        check_close(MemoryHarness(f"planted-close-{planted.__name__}").using(planted))


# ---------------------------------------------------------------- BE-30: hit queries from any thread
def check_hit_queries_from_any_thread(harness: Harness, threads: int = 4) -> None:
    """Pages written on one thread are found by batch_exists / batch_exists_v2 from fresh threads while another writes."""
    backend = harness.make()
    keys = page_keys(4, start=800)
    assert write_pages(backend, keys, [0, 1, 2, 3]) == [True] * 4
    answers: list[tuple[int, int]] = []
    start = threading.Barrier(threads + 1)

    def query() -> None:
        start.wait()
        answers.append((backend.batch_exists(keys), backend.batch_exists_v2(keys, None, None).kv_hit_pages))

    def write() -> None:
        start.wait()
        for round_ in range(8):
            write_pages(backend, page_keys(2, start=900 + 2 * round_), [4, 5], seed=round_)

    workers = [threading.Thread(target=query) for _ in range(threads)] + [threading.Thread(target=write)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert answers == [(4, 4)] * threads, f"hit queries from fresh threads answered {answers}, expected 4 pages each"


class HitsPerThread(MemoryBackend):
    """Planted: remembers the keys it wrote per thread and answers hit queries from that memory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._seen = threading.local()

    def batch_set_v1(self, keys: list[str], host_indices: Any, extra_info: Any = None) -> list[bool]:
        results = super().batch_set_v1(keys, host_indices, extra_info)
        self._seen.keys = getattr(self._seen, "keys", set()) | set(keys)
        return results

    def batch_exists(self, keys: list[str], extra_info: Any = None) -> int:
        seen: set[str] = getattr(self._seen, "keys", set())
        return next((i for i, key in enumerate(keys) if key not in seen), len(keys))


@pytest.mark.clause("BE-30")
def test_hit_queries_from_any_thread_on_the_reference_backends(harness: Harness) -> None:
    check_hit_queries_from_any_thread(harness)


@pytest.mark.clause("BE-30")
def test_hit_query_check_refuses_state_kept_per_thread() -> None:
    with pytest.raises(AssertionError, match="fresh threads"):
        check_hit_queries_from_any_thread(MemoryHarness("planted-per-thread").using(HitsPerThread))


# ---------------------------------------------------------------- BE-31: the defined extra_info keys
def check_defined_extra_info_keys(harness: Harness) -> None:
    """A batch_set_v2 with session_id stores pages every query finds, with pp_rank, without, or with no extra_info."""
    backend = harness.make()
    keys = page_keys(3, start=1000)
    slots = slots_of(backend.mem_pool_host, [0, 1, 2])
    session = HiCacheStorageExtraInfo(extra_info=ReadOnlyMapping({"session_id": "session-7"}))
    written = backend.batch_set_v2([PoolTransfer(name=PoolName.KV, keys=PageKeys(keys), host_indices=slots)], session)
    assert list(written[PoolName.KV]) == [True] * 3, f"batch_set_v2 with session_id wrote {written}"
    stage = HiCacheStorageExtraInfo(extra_info=ReadOnlyMapping({"pp_rank": 0}))
    answers = {
        "pp_rank": backend.batch_exists(keys, stage),
        "session_id": backend.batch_exists(keys, session),
        "no extra_info": backend.batch_exists(keys),
        "an empty info": backend.batch_exists(keys, HiCacheStorageExtraInfo()),
    }
    assert set(answers.values()) == {3}, f"the same stored pages answered differently by extra_info: {answers}"


class PagesPerSession(MemoryBackend):
    """Planted: files pages under the session_id it is given, so a query without one misses them."""

    def _session_keys(self, keys: list[str], extra_info: Any) -> list[str]:
        extra = getattr(extra_info, "extra_info", None) or {}
        session = extra.get("session_id")
        return [f"{session}-{key}" if session else key for key in keys]

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> Any:
        moved = [t.model_copy(update={"keys": self._session_keys(list(t.keys), extra_info)}) for t in transfers]
        return super().batch_set_v2(moved, extra_info)

    def batch_exists(self, keys: list[str], extra_info: Any = None) -> int:
        return super().batch_exists(self._session_keys(keys, extra_info), extra_info)


@pytest.mark.clause("BE-31")
def test_the_defined_extra_info_keys_on_the_reference_backends(harness: Harness) -> None:
    check_defined_extra_info_keys(harness)


@pytest.mark.clause("BE-31")
def test_extra_info_check_refuses_pages_kept_per_session() -> None:
    with pytest.raises(AssertionError, match="answered differently"):
        check_defined_extra_info_keys(MemoryHarness("planted-session").using(PagesPerSession))


# ---------------------------------------------------------------- BE-32: layout reporting
def layout(pp_rank: int = 0, pools: tuple = ({"pool": "kv", "suffixes": ["k"]},), **changes: Any) -> dict:
    inner = {"pools": list(pools), "key_prefix": "m", "pp_rank": pp_rank, "pp_size": 2}
    return {"enabled": True, "backend": "mine", "page_size": 64, "hicache_object_layout": inner, **changes}


@pytest.mark.clause("BE-32")
def test_layout_replies_that_merge_pass_and_each_planted_reply_is_named() -> None:
    disabled = {
        "enabled": False,
        "backend": "mine",
        "page_size": 64,
        "hicache_object_layout": {"pools": []},
        "reason": "MHA",
    }
    assert layout_problems([layout(0), layout(0), layout(1), layout(1)]) == []
    assert layout_problems([disabled, disabled]) == []
    # MooncakeStore 0.5.23 lists its pools before it finds an auxiliary pool it cannot describe: not read
    listing = {**disabled, "hicache_object_layout": {"pools": [{"pool": "kv"}], "pp_rank": 0, "pp_size": 1}}
    assert layout_problems([listing, listing]) == []
    assert layout_problems([layout(0), layout(0, pools=({"pool": "kv", "suffixes": ["v"]},))]) == [
        "reply 1: differs from reply 0, another scheduler of stage 0"
    ]
    assert layout_problems([{**layout(0), "enabled": "yes"}]) == ["reply 0: enabled must be a bool"]
    assert layout_problems([{**disabled, "reason": ""}]) == [
        "reply 0: a layout it cannot describe has enabled False and a reason"
    ]
    # MooncakeStore 0.5.23 lists a TP-sharded pool's suffixes, its TP rank in them, before it gives up: the disabled
    # replicas of one stage differ, and the joined layout is disabled either way
    assert layout_problems([{**listing, "reason": "tp 0"}, {**listing, "reason": "tp 1"}]) == []
    single = layout(0)
    del single["hicache_object_layout"]["pp_size"]  # merge_l3_layouts reads a missing pp_size as 1
    assert layout_problems([single, single]) == []
    unstaged = layout(0)
    del unstaged["hicache_object_layout"]["pp_rank"]
    assert layout_problems([unstaged, unstaged]) == []  # one layout, every reply alike
    text_size = layout(0)
    text_size["hicache_object_layout"]["pp_size"] = "2"
    assert layout_problems([text_size]) == ["pp_size must be an int where given, got '2'"]
    per_stage = layout(1)
    per_stage["hicache_object_layout"]["key_prefix"] = "m-pp1"
    assert layout_problems([layout(0), per_stage]) == [
        "reply 1 (stage 1) differs from reply 0 (stage 0) in more than pp_rank and pools"
    ]
    assert layout_problems([layout(0), layout(0)]) == ["the stages replying are [0], not 0..1 (pp_size 2)"]
    assert layout_problems([unstaged, layout(1)]) == ["a reply without pp_rank beside replies of the stages 1, None"]


def release_merge(version: str) -> Callable[[list], Any]:
    """The release's own merge_l3_layouts, run from its wheel's source (with the helpers it calls)."""
    names: dict[str, Any] = {}
    exec("from typing import Any, Optional, Sequence", names)
    for function in (
        "disabled_l3_layout",
        "_l3_layout_pp_rank",
        "_l3_layout_stage_independent",
        "_l3_layout_unavailable",
        "merge_l3_layouts",
    ):
        source = release_source(version, "mem_cache/hicache_storage.py", function)
        assert source, f"{version} has no {function}"
        exec(compile(source, f"sglang {version} hicache_storage.{function}", "exec"), names)
    return names["merge_l3_layouts"]


def scheduler_reply(tp_rank: int, pp_rank: int, shape: tuple) -> dict:
    """One scheduler's reply, well formed, shaped by ``shape``'s choices (some of them break BE-32's merge)."""
    enabled, prefix_per, pools_per_stage, stage_fields, pp_size = shape
    prefix = {"model": "m", "stage": f"m-pp{pp_rank}", "rank": f"m-tp{tp_rank}"}[prefix_per]
    inner: dict = {"pools": [{"pool": "kv", "stage": pp_rank if pools_per_stage else 0}], "key_prefix": prefix}
    if enabled or stage_fields:
        inner.update(pp_rank=pp_rank, pp_size=pp_size)
    reply = {"enabled": enabled, "backend": "mine", "page_size": 64, "hicache_object_layout": inner}
    return reply if enabled else {**reply, "reason": "cannot describe"}


SHAPES = [
    (enabled, prefix_per, pools_per_stage, stage_fields, pp_size)
    for enabled in (True, False)
    for prefix_per in ("model", "stage", "rank")
    for pools_per_stage in (True, False)
    for stage_fields in (True, False)
    for pp_size in (1, 2)
]


@pytest.mark.clause("BE-32")
@pytest.mark.parametrize("mixed", [False, True], ids=["one shape", "stage 1 another shape"])
def test_layout_problems_agree_with_the_releases_own_merge(mixed: bool) -> None:
    merge = release_merge("0.5.23")
    refused = ("Inconsistent HiCache L3 layouts across schedulers", "Incomplete pipeline-parallel stage layouts")
    judged = 0
    for shape in SHAPES:
        for other in SHAPES if mixed else [shape]:
            replies = [
                scheduler_reply(tp_rank, pp_rank, shape if pp_rank == 0 else other)
                for pp_rank in (0, 1)
                for tp_rank in (0, 1)
            ]
            merged = merge(replies)
            sglang_refuses = (  # a layout every scheduler could describe, lost in the merge
                all(reply["enabled"] for reply in replies) and merged.get("reason") in refused
            )
            assert (layout_problems(replies) != []) == sglang_refuses, (replies, merged, layout_problems(replies))
            judged += 1
    assert judged == len(SHAPES) ** (2 if mixed else 1)


# ---------------------------------------------------------------- BE-33: what the failure injector passes through
PASSED_THROUGH = set(FORWARDED)
INJECTED = set(PROXY_INJECTED)
"""BE-33's lists, as the vendor suite's proxy (``checks.engine_calls.FailureInjector``) keeps them: the methods
the proxy forwards unchanged, and those it may answer itself."""


def injector_methods(version: str) -> tuple[set[str], set[str]]:
    """Return (forwarded unchanged, forwarded after an injection) for the release's failure injector."""
    source = release_source(version, "mem_cache/hicache_storage.py", "HiCacheStorageFailureInjector")
    if not source:
        return set(), set()
    plain: set[str] = set()
    injected: set[str] = set()
    injector = ast.parse(source).body[0]
    assert isinstance(injector, ast.ClassDef), injector
    for node in injector.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            body = ast.get_source_segment(source, node) or ""
            if f"self._backend.{node.name}(" in body:
                (injected if "_inject_failure" in body else plain).add(node.name)
    return plain, injected


@pytest.mark.clause("BE-33")
@pytest.mark.parametrize("version", SGLANG_RELEASES)
def test_the_injector_forwards_exactly_the_methods_the_clause_lists(version: str) -> None:
    plain, injected = injector_methods(version)
    if holds_for(clause("BE-33"), version):
        assert (plain, injected) == (PASSED_THROUGH, INJECTED)
    else:
        assert (plain, injected) == (set(), set()), f"{version} has an injector BE-33 does not name"


@pytest.mark.clause("BE-33")
def test_a_list_naming_a_method_the_injector_drops_is_caught() -> None:
    """Planted: a clause claiming describe_l3_object_layout reaches the backend through the proxy."""
    plain, _ = injector_methods("0.5.23")
    assert PASSED_THROUGH | {"describe_l3_object_layout"} != plain


# ---------------------------------------------------------------- CTL-17: decode-offload writes
def offload_keys(tokens: tuple[int, ...], increments: list[int], page_size: int, **namespace: Any) -> list[str]:
    """The keys a PD-decode offload writes, increment by increment, each continuing from the last key written."""
    keys: list[str] = []
    start = 0
    for length in increments:
        keys += compute_key_chain(tokens[start : start + length], page_size, keys[-1] if keys else None, **namespace)
        start += length
    return keys


def restarting_offload_keys(
    tokens: tuple[int, ...], increments: list[int], page_size: int, **namespace: Any
) -> list[str]:
    """Planted: each increment's chain starts again from the namespace seed."""
    keys: list[str] = []
    start = 0
    for length in increments:
        keys += compute_key_chain(tokens[start : start + length], page_size, None, **namespace)
        start += length
    return keys


@pytest.mark.clause("CTL-17")
@pytest.mark.parametrize("namespace", [{}, {"extra_key": "lora-a"}, {"cache_salt": "s", "extra_key": "e"}])
def test_decode_offload_keys_are_the_keys_a_prefill_computes(namespace: dict) -> None:
    tokens = tuple(range(3, 3 + 4 * 10))
    prefill = list(compute_key_chain(tokens, 4, None, **namespace))
    assert offload_keys(tokens, [8, 4, 16, 12], 4, **namespace) == prefill
    assert restarting_offload_keys(tokens, [8, 4, 16, 12], 4, **namespace)[2:] != prefill[2:]


# ---------------------------------------------------------------- HYB-10: slot completeness
DSV4 = {"kv": "kv", "compressed_k_index": "indexer", "draft_swa": "draft_swa"}
"""A DeepSeek-V4-like slot: KV, its compressed-K index and the draft model's SWA state."""


@pytest.mark.clause("HYB-10")
def test_slot_state_travels_with_its_page() -> None:
    pools = ["kv", "indexer", "draft_swa"]
    assert missing_slot_state(DSV4, pools, pools) == ()
    assert [gap.component for gap in missing_slot_state(DSV4, pools, ["kv", "draft_swa"])] == ["compressed_k_index"]
    unregistered = missing_slot_state(DSV4, ["kv", "indexer"], pools)
    assert [(gap.component, gap.why) for gap in unregistered] == [
        ("draft_swa", "its pool 'draft_swa' is not registered with the backend")
    ]
    nsa = {"kv": "kv", "nsa_index": None}
    assert [(gap.component, gap.why) for gap in missing_slot_state(nsa, ["kv"], ["kv"])] == [
        ("nsa_index", "no host pool stores it")
    ]


@pytest.mark.clause("HYB-10")
@pytest.mark.parametrize(
    "slot_state, registered, transferred, message",
    [
        ({"": "kv"}, ["kv"], ["kv"], "slot_state: a component must be a non-empty str"),
        ({"kv": 3}, ["kv"], ["kv"], r"slot_state\['kv'\]: the pool must be a non-empty str or None"),
        ({"kv": "kv"}, "kv", ["kv"], "registered_pools: must be a collection of pool names"),
        ({"kv": "kv"}, ["kv"], [None], "transferred_pools: a pool name must be a non-empty str"),
    ],
)
def test_bad_slot_state_input_is_refused_naming_the_field(slot_state, registered, transferred, message) -> None:
    with pytest.raises(ValueError, match=message):
        missing_slot_state(slot_state, registered, transferred)
