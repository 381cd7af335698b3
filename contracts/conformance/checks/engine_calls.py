"""Core checks of the calls SGLang makes beside the page traffic: close (BE-29), the extra_info keys it defines
(BE-31), the layout report (BE-32) and the failure injector's proxy (BE-33).

Written as in ``checks.core_hits`` (fresh keys, a verified round trip first). ``layout_problems`` is the one
judge of BE-32's replies (the spec's tests use it too); ``FailureInjector`` behaves as the proxy SGLang 0.5.23
puts in front of a backend when SGLANG_TEST_HICACHE_BACKEND_RANDOM_DELAY or _FAILURE is set, and
``FORWARDED`` and ``INJECTED`` are BE-33's lists of the methods it passes through.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Optional, Sequence

from hicache_contracts.conformance.checks.core_hits import setup_clause
from hicache_contracts.conformance.framework import (
    CallTimedOut,
    CheckSkipped,
    ClauseFailure,
    conformance_check,
    expect,
)
from hicache_contracts.conformance.session.context import Instance, SuiteContext
from hicache_contracts.conformance.session.pools import describe_page_difference, pages_equal
from hicache_contracts.conformance.checks.v2 import expected_page, place
from hicache_contracts.models import PoolName, PoolTransferResult

__all__ = ["FORWARDED", "INJECTED", "FailureInjector", "layout_problems"]


# ---------------------------------------------------------------- BE-29: close()
def _close_as_sglang_does(suite: SuiteContext, backend: Any) -> None:
    """Call ``backend.close()`` as SGLang's attach cleanup and detach do: an exception it raises is logged and
    ignored there, so only a call past the run's deadline fails (BE-29)."""
    try:
        suite.calls.call("BE-29", backend.close)
    except CallTimedOut:
        raise
    except ClauseFailure as failure:
        if failure.__cause__ is None:  # the suite's own failure, not what close() raised
            raise


@conformance_check("BE-29")
def close_returns_and_leaves_the_pages(suite: SuiteContext) -> None:
    """close() on an instance never registered, and on one holding pages, returns without hanging (what it raises
    SGLang logs and ignores); where instances share storage, the pages stay for the instances that read them later."""
    config = suite.instances.config(model_name=suite.names.namespace("close"))
    # a failed attach closes a backend built but never given its host pools
    bare = suite.instances._construct("BE-1", suite.wire.form(config))
    if not callable(getattr(bare, "close", None)):
        raise CheckSkipped(
            "not applicable: the backend has no close() (SGLang calls it only where a backend defines it)"
        )
    _close_as_sglang_does(suite, bare)
    writer = suite.instances.build(config, pages=8, tag="the instance that closes")
    reader = suite.instances.build(config, pages=8, tag="an instance that stays")
    keys = suite.names.new_keys(3)
    suite.io.store(writer, keys, clause_id=setup_clause(suite))
    shared = suite.io.count(reader, keys, clause_id="BE-29") > 0  # instances of one configuration share pages
    _close_as_sglang_does(suite, writer.backend)
    suite.instances.forget(writer)  # closed: the other instances clear the namespace at the end
    if not shared:
        return  # each instance has storage of its own: what a closed one leaves behind no one reads
    later = suite.instances.build(config, pages=8, tag="an instance built after the close")
    shown = (
        f"build 2 instances of one configuration, write {suite.names.show(keys)} through the first, close() it, "
        "build a third"
    )
    for instance in (reader, later):
        count = suite.io.count(instance, keys, clause_id="BE-29")
        expect(
            suite.io.counted(count, len(keys)),
            "BE-29",
            f"after close() of the instance that wrote them, {instance.tag} finds {count} of {len(keys)} pages: "
            "close() must leave the stored pages to the instances that read them",
            f"{shown}; batch_exists({suite.names.show(keys)}) on {instance.tag} -> {count}",
        )


# ---------------------------------------------------------------- BE-31: the extra_info keys SGLang defines
@conformance_check("BE-31")
def defined_extra_info_keys_change_no_page(suite: SuiteContext) -> None:
    """Pages written with extra_info {"session_id": ...} are counted by batch_exists with the instance's own
    pp_rank, with the session, with no extra_info and with an empty one."""
    stage = 0  # 0.5.21-0.5.22: stage 0 asks on behalf of every stage, its own included
    config = suite.instances.config(model_name=suite.names.namespace("extra-keys"), pp_rank=stage, pp_size=2)
    instance = suite.instances.build(config, pages=8, tag=f"stage {stage} of 2")
    suite.io.require_round_trip(instance)
    keys, pages = suite.names.new_keys(3), [0, 1, 2]
    session = suite.wire.info(extra_info={"session_id": f"session-{suite.run_id}"})
    if suite.claims("v2"):  # 0.5.23's linker path writes with batch_set_v2
        pool = instance.pool
        for key, page in zip(keys, pages):
            pool.poke(page, suite.pages.page_for(key, pool))
        transfers = [suite.wire.transfer(PoolName.KV, keys, pool.slots(pages))]
        written = suite.io.v2_flags(
            suite.calls.call("BE-31", instance.backend.batch_set_v2, transfers, session), transfers, "batch_set_v2"
        )[PoolName.KV.value]
        how = "batch_set_v2"
    elif suite.io.io_path() == "v1":
        written = suite.io.write(instance, keys, pages=pages, info=session, clause_id="BE-31")
        how = "batch_set_v1"
    else:  # the legacy methods carry no extra_info: only the queries carry the keys
        written = suite.io.write(instance, keys, pages=pages, clause_id=setup_clause(suite))
        how = "batch_set"
    if not all(written):
        raise CheckSkipped(f"the backend refused the pages the check needs ({how} -> {written})")
    infos = {
        f"extra_info {{'pp_rank': {stage}}} (its own stage)": suite.wire.info(extra_info={"pp_rank": stage}),
        "the session's extra_info": session,
        "no extra_info": None,
        "an empty extra_info": suite.wire.info(),
    }
    answers = {label: suite.io.count(instance, keys, info, clause_id="BE-31") for label, info in infos.items()}
    shown = (
        f"{how}({suite.names.show(keys)}, extra_info={{'session_id': ...}}) on {instance.tag}, then "
        f"batch_exists with each extra_info -> {answers}"
    )
    for label, count in answers.items():
        expect(
            suite.io.counted(count, len(keys)),
            "BE-31",
            f"batch_exists with {label} counts {count} of the {len(keys)} pages written with a session_id: "
            "session_id and the instance's own pp_rank never change which pages are found",
            shown,
        )
    suite.io.require_seen(any(answers.values()), "how extra_info keys change a lookup")


# ---------------------------------------------------------------- BE-32: describe_l3_object_layout
def _reply_problem(layout: Any) -> Optional[str]:
    """What is wrong with one reply's shape (None: nothing): the fields merge_l3_layouts reads."""
    if not isinstance(layout, dict) or not isinstance(layout.get("enabled"), bool):
        return "enabled must be a bool"
    missing = [field for field in ("backend", "page_size", "hicache_object_layout") if field not in layout]
    if missing:
        return f"missing {', '.join(missing)}"
    inner = layout["hicache_object_layout"]
    if not isinstance(inner, dict) or not isinstance(inner.get("pools"), list):
        return "hicache_object_layout must be a dict with a pools list"
    if not layout["enabled"]:
        return None if layout.get("reason") else "a layout it cannot describe has enabled False and a reason"
    return None


def _stage_independent(layout: dict[str, Any]) -> dict[str, Any]:
    """A reply without what may differ between pipeline stages (its pp_rank and its pools)."""
    inner = layout["hicache_object_layout"]
    return {**layout, "hicache_object_layout": {k: v for k, v in inner.items() if k not in ("pp_rank", "pools")}}


def layout_problems(layouts: Sequence[Any]) -> list[str]:
    """Return what breaks BE-32 in the replies of every scheduler of one engine (empty when none).

    Each reply's shape is judged, then, when every reply is enabled, whether
    merge_l3_layouts joins them: replicas of one stage equal, every stage
    alike but for pp_rank and pools, pp_size an int where given (1 where
    not), and the stages replying exactly 0..pp_size-1. Where a reply is
    disabled the joined layout is disabled whatever else the replies hold,
    so nothing more of them is judged.
    """
    problems = [f"reply {n}: {problem}" for n, layout in enumerate(layouts) if (problem := _reply_problem(layout))]
    if problems or not layouts or not all(layout["enabled"] for layout in layouts):
        return problems
    stages: dict[Any, tuple[int, dict[str, Any]]] = {}
    for number, layout in enumerate(layouts):
        rank = layout["hicache_object_layout"].get("pp_rank")
        first, seen = stages.setdefault(rank, (number, layout))
        if seen != layout:
            problems.append(f"reply {number}: differs from reply {first}, another scheduler of stage {rank}")
    if problems:
        return problems
    if None in stages:  # replies without a stage: one layout, which every reply must then be
        if len(stages) == 1:
            return []
        return ["a reply without pp_rank beside replies of the stages " + ", ".join(map(str, sorted(stages, key=str)))]
    # every stage alike but for pp_rank and pools: an equivalence, so any stage serves as the one compared with
    (base_rank, (base_number, base)), *others = stages.items()
    for rank, (number, layout) in others:
        if _stage_independent(layout) != _stage_independent(base):
            problems.append(
                f"reply {number} (stage {rank}) differs from reply {base_number} (stage {base_rank}) in more than "
                "pp_rank and pools"
            )
    if problems:
        return problems
    pp_size = base["hicache_object_layout"].get("pp_size", 1)
    if type(pp_size) is not int:
        return [f"pp_size must be an int where given, got {pp_size!r}"]
    if not all(isinstance(rank, int) for rank in stages) or sorted(stages) != list(range(pp_size)):
        shown = sorted(stages, key=str)
        problems.append(f"the stages replying are {shown}, not 0..{pp_size - 1} (pp_size {pp_size})")
    return problems


LAYOUT_SCHEDULERS: tuple[tuple[int, int], ...] = ((0, 0), (1, 0), (0, 1), (1, 1))
"""The schedulers of the engine whose layout is asked: (tp_rank, pp_rank) with tp_size 2 and pp_size 2."""


@conformance_check("BE-32")
def layout_replies_merge(suite: SuiteContext) -> None:
    """describe_l3_object_layout, where offered, replies with the fields merge_l3_layouts reads and a reason when it
    cannot describe the layout; where every scheduler describes it, one equal reply from every scheduler of a stage
    and stages alike but for pp_rank and pools. Asked with KV sharded by TP rank and with replicated (MLA) KV, the
    layout MooncakeStore describes."""
    if not callable(getattr(suite.instances.main.backend, "describe_l3_object_layout", None)):
        raise CheckSkipped(
            "not applicable: the backend offers no describe_l3_object_layout (SGLang 0.5.23 asks only a "
            "MooncakeStore; the rule binds a backend that offers the method)"
        )
    described = False
    for is_mla_model in (False, True):
        model_name = suite.names.namespace("layout-mla" if is_mla_model else "layout")
        kv = "replicated KV" if is_mla_model else "sharded KV"
        replies, asked = [], []
        for tp_rank, pp_rank in LAYOUT_SCHEDULERS:
            config = suite.instances.config(
                model_name=model_name,
                is_mla_model=is_mla_model,
                tp_rank=tp_rank,
                tp_size=2,
                pp_rank=pp_rank,
                pp_size=2,
            )
            instance = suite.instances.build(config, pages=2, tag=f"tp {tp_rank}/2 of stage {pp_rank}/2, {kv}")
            replies.append(
                suite.calls.call(
                    "BE-32",
                    instance.backend.describe_l3_object_layout,
                    sidecar_pool_specs=(),
                    swa_trailing_pages=None,
                    page_size=suite.options.page_size,
                )
            )
            asked.append(instance.tag)
        problems = layout_problems(replies)
        expect(
            not problems,
            "BE-32",
            f"the layout replies do not merge: {'; '.join(problems)}",
            "describe_l3_object_layout(sidecar_pool_specs=(), swa_trailing_pages=None, "
            f"page_size={suite.options.page_size}) on " + ", ".join(f"reply {n}: {tag}" for n, tag in enumerate(asked)),
        )
        described = described or all(reply["enabled"] for reply in replies)
    if not described:
        raise CheckSkipped(
            "every layout reply said it cannot describe the layout, with sharded and with replicated KV: their "
            "shape held, and nothing more of a disabled reply is relied on"
        )


# ---------------------------------------------------------------- BE-33: SGLang's failure injector
FORWARDED: tuple[str, ...] = (
    "register_mem_pool_host",
    "register_mem_host_pool_v2",
    "on_host_pools_registered",
    "clear",
    "get_stats",
    "close",
)
"""The methods SGLang 0.5.23's failure injector passes to the backend unchanged."""
INJECTED: tuple[str, ...] = (
    "exists",
    "get",
    "set",
    "batch_get",
    "batch_set",
    "batch_exists",
    "batch_get_v1",
    "batch_set_v1",
    "batch_exists_v2",
    "batch_get_v2",
    "batch_set_v2",
)
"""The methods it passes on after a delay, or answers itself with a miss."""


class FailureInjector:
    """A proxy that behaves as SGLang 0.5.23's failure injector: the housekeeping methods reach the backend
    unchanged; a data method is answered by the proxy with a miss when ``plan`` says so (its next entry True),
    else passed on with every argument positional, as SGLang's proxy passes them. No other method exists on it.
    ``reached`` lists the calls that reached the backend."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.plan: deque[bool] = deque()
        """Whether each coming data call is refused (answered with a miss); passed on once it is empty."""
        self.reached: list[str] = []

    def _refused(self) -> bool:
        return self.plan.popleft() if self.plan else False

    def _pass(self, name: str, *args: Any) -> Any:
        if name not in FORWARDED + INJECTED:
            raise AttributeError(f"the failure injector does not pass {name} on")
        self.reached.append(name)
        return getattr(self._backend, name)(*args)

    # the housekeeping, unchanged
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self._pass("register_mem_pool_host", mem_pool_host)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        self._pass("register_mem_host_pool_v2", host_pool, host_pool_name)

    def on_host_pools_registered(self) -> None:
        self._pass("on_host_pools_registered")

    def clear(self) -> Any:
        return self._pass("clear")

    def get_stats(self) -> Any:
        return self._pass("get_stats")

    def close(self) -> None:
        self._pass("close")

    # the data methods: a miss of the proxy's own, or passed on
    def exists(self, key: str) -> bool:
        return False if self._refused() else self._pass("exists", key)

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        return None if self._refused() else self._pass("get", key, target_location, target_sizes)

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        return False if self._refused() else self._pass("set", key, value, target_location, target_sizes)

    def batch_get(self, keys: list[Any], target_locations: Any = None, target_sizes: Any = None) -> Any:
        if self._refused():
            return [None] * len(keys)
        return self._pass("batch_get", keys, target_locations, target_sizes)

    def batch_set(
        self, keys: list[Any], values: Any = None, target_locations: Any = None, target_sizes: Any = None
    ) -> bool:
        return False if self._refused() else self._pass("batch_set", keys, values, target_locations, target_sizes)

    def batch_exists(self, keys: list[Any], extra_info: Any = None) -> int:
        return 0 if self._refused() else self._pass("batch_exists", keys, extra_info)

    def batch_get_v1(self, keys: list[Any], host_indices: Any, extra_info: Any = None) -> list[Any]:
        return [False] * len(keys) if self._refused() else self._pass("batch_get_v1", keys, host_indices, extra_info)

    def batch_set_v1(self, keys: list[Any], host_indices: Any, extra_info: Any = None) -> list[Any]:
        return [False] * len(keys) if self._refused() else self._pass("batch_set_v1", keys, host_indices, extra_info)

    def batch_exists_v2(self, keys: list[Any], pool_transfers: Any = None, extra_info: Any = None) -> Any:
        if self._refused():
            return PoolTransferResult.empty()
        return self._pass("batch_exists_v2", keys, pool_transfers, extra_info)

    def batch_get_v2(self, transfers: list[Any], extra_info: Any = None) -> Any:
        if self._refused():
            return {item.name: [False] * len(item.keys or []) for item in transfers}
        return self._pass("batch_get_v2", transfers, extra_info)

    def batch_set_v2(self, transfers: list[Any], extra_info: Any = None) -> Any:
        if self._refused():
            return {item.name: [False] * len(item.keys or []) for item in transfers}
        return self._pass("batch_set_v2", transfers, extra_info)


INJECTOR_BATCHES = 4
"""Batches of two pages the check writes through the proxy; the proxy refuses the writes of half of them."""


def _plan(rng: random.Random, refused: int, total: int) -> list[bool]:
    """``total`` entries, ``refused`` of them True, in a seeded order."""
    entries = [True] * refused + [False] * (total - refused)
    rng.shuffle(entries)
    return entries


def sidecar_round_trip(suite: SuiteContext, proxy: FailureInjector, raw: Instance, steps: list[str]) -> None:
    """Write two SWA pages with batch_set_v2 through ``proxy`` and read them back with batch_get_v2: the proxy hands
    ``extra_info`` on positionally, as SGLang 0.5.23's injector does (BE-8), and the pages come back byte-exact."""
    name, keys = PoolName.SWA, suite.names.new_keys(2)
    pool = raw.pool_for(name)
    place(suite, raw, name, keys, [0, 1])
    info = suite.wire.info([])
    writes = [suite.wire.transfer(name, keys, pool.slots([0, 1]))]
    steps.append(f"batch_set_v2 of swa {suite.names.show(keys)} through the proxy, extra_info positional")
    written = suite.io.v2_flags(suite.calls.call("BE-33", proxy.batch_set_v2, writes, info), writes, "batch_set_v2")
    if not all(written[name.value]):
        return  # refused: nothing stored to read back
    pool.fill([2, 3])
    reads = [suite.wire.transfer(name, keys, pool.slots([2, 3]), read=True)]
    steps.append(f"batch_get_v2 of swa {suite.names.show(keys)} through the proxy, extra_info positional")
    loaded = suite.io.v2_flags(suite.calls.call("BE-33", proxy.batch_get_v2, reads, info), reads, "batch_get_v2")
    for key, page, hit in zip(keys, (2, 3), loaded[name.value]):
        wanted, got = expected_page(suite, raw, name.value, key), pool.peek(page)
        expect(
            not hit or pages_equal(wanted, got),
            "BE-33",
            f"swa page {suite.names.label(key)} read through the proxy as {describe_page_difference(wanted, got)}",
            "; ".join(steps[-2:]),
        )


@conformance_check("BE-33")
def pages_stay_consistent_under_the_failure_injector(suite: SuiteContext) -> None:
    """Through a proxy like SGLang's failure injector, pages whose write it refused read as misses, pages written
    read back byte-exact, and a refused write written again later reads back too."""
    raw = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("injector")), pages=4 * INJECTOR_BATCHES, tag="raw"
    )
    suite.io.require_round_trip(raw)  # the backend moves pages: what fails below comes from the proxy's calls
    proxy = FailureInjector(raw.backend)
    through = Instance(proxy, raw.config, raw.pool, raw.sidecars, "through the failure injector")
    rng = random.Random(suite.seed * 7919 + 33)
    batches = [suite.names.new_keys(2) for _ in range(INJECTOR_BATCHES)]
    write_plan = _plan(rng, INJECTOR_BATCHES // 2, INJECTOR_BATCHES)
    read_plan = _plan(rng, INJECTOR_BATCHES // 2, INJECTOR_BATCHES)
    steps: list[str] = []

    def shown() -> str:
        return "; ".join(steps[-6:])

    def pages_of(index: int) -> list[int]:
        return [2 * index, 2 * index + 1]

    def reads_back(index: int, refused: bool, stored: list[bool], when: str) -> bool:
        """Count and read batch ``index`` through the proxy (its read refused when ``refused``); judge the answers."""
        keys = batches[index]
        targets = [2 * INJECTOR_BATCHES + page for page in pages_of(index)]
        proxy.plan.extend([False, refused])  # the hit query passes; the read as the plan says
        count = suite.io.count(through, keys, clause_id="BE-33")
        read = suite.io.read(through, keys, pages=targets, clause_id="BE-33")
        steps.append(
            f"{when}: batch_exists({suite.names.show(keys)}) -> {count}, read{' (refused)' if refused else ''} "
            f"-> {[page is not None for page in read]}"
        )
        for key, page, kept in zip(keys, read, stored):
            if page is None:
                continue
            expect(
                kept,
                "BE-33",
                f"{suite.names.label(key)}, whose write the proxy refused (the backend never received it), reads "
                "as a hit",
                shown(),
            )
            expect(
                suite.io.holds(key, raw.pool, page),
                "BE-33",
                f"{suite.names.label(key)} reads back as "
                f"{describe_page_difference(suite.pages.page_for(key, raw.pool), page)}",
                shown(),
            )
        leading = 0
        while leading < len(stored) and stored[leading]:
            leading += 1
        expect(
            count <= leading and suite.io.counted(count, leading),
            "BE-33",
            f"batch_exists counts {count} pages of {suite.names.show(keys)}; {leading} reached the backend and "
            "were stored",
            shown(),
        )
        if not refused and not suite.may_evict:
            missing = [suite.names.label(key) for key, page, kept in zip(keys, read, stored) if kept and page is None]
            expect(not missing, "BE-33", f"{missing} were stored but the read passed on misses them", shown())
        return any(page is not None for page in read)

    try:
        stored: list[list[bool]] = []
        for index, (keys, refused) in enumerate(zip(batches, write_plan)):
            proxy.plan.append(refused)
            steps.append(f"write {suite.names.show(keys)} through the proxy{' (refused)' if refused else ''}")
            written = suite.io.write(through, keys, pages=pages_of(index), clause_id="BE-33")
            steps[-1] += f" -> {written}"
            stored.append([flag and not refused for flag in written])
        if not any(any(flags) for flags, refused in zip(stored, write_plan) if not refused):
            raise CheckSkipped("the backend refused every page the check wrote through the proxy; nothing to check")
        seen = False
        for index, refused in enumerate(read_plan):
            seen = reads_back(index, refused, stored[index], "then") or seen
        for index, refused in enumerate(write_plan):  # the engine backs a refused write up again later
            if not refused:
                continue
            proxy.plan.append(False)
            steps.append(f"write {suite.names.show(batches[index])} again")
            written = suite.io.write(through, batches[index], pages=pages_of(index), clause_id="BE-33")
            steps[-1] += f" -> {written}"
            stored[index] = list(written)
        for index in range(INJECTOR_BATCHES):  # every read passed on: each stored page reads back byte-exact
            seen = reads_back(index, False, stored[index], "at the end") or seen
        if suite.claims("v2") and PoolName.SWA.value in raw.sidecars:
            sidecar_round_trip(suite, proxy, raw, steps)
        suite.calls.call("BE-33", proxy.get_stats)
    except ClauseFailure as failure:
        cause = failure.__cause__
        if failure.clause_id != "BE-33" or cause is None:
            raise
        raise ClauseFailure(
            "BE-33",
            f"{failure.message} (the proxy passes every argument on positionally, as SGLang's failure injector does)",
            shown() or failure.counterexample,
        ) from cause
    suite.io.require_seen(seen, "how pages behave behind the failure injector")
