"""Checks of the namespacing level (NS-1..NS-6, NS-8) and of the durability level (NS-7).

Every instance here is built from the same extra config and differs from
its sibling in one coordinate only: ``tp_rank``, ``pp_rank``,
``attn_cp_rank`` or ``model_name`` (all under the run's namespace).

Configurations are ones SGLang builds: ``is_mla_model`` goes with an MLA
host pool (one latent per token), anything else with an MHA pool; with
replicated KV only the storage writer (tp_rank 0) writes KV, the other
ranks read it.
"""

from __future__ import annotations

from typing import Any, Callable

from hicache_contracts.conformance.checks.core_hits import setup_clause
from hicache_contracts.conformance.session.context import Instance, SuiteContext
from hicache_contracts.conformance.framework import CheckSkipped, conformance_check, expect, fail
from hicache_contracts.models import PoolHitPolicy, PoolName
from hicache_spec import count_leading_run
from hicache_contracts.conformance.session.pools import describe_page_difference

SPREAD_RANKS = dict(tp_size=2, pp_size=2, attn_cp_size=2)
"""Group sizes of the namespacing checks' configurations: every coordinate has a sibling."""

SGLANG_DCP_BACKENDS = frozenset(
    {
        "sglang.srt.mem_cache.hicache_storage:HiCacheFile",
        "sglang.srt.mem_cache.storage.mooncake_store.mooncake_store:MooncakeStore",
    }
)
"""The backends SGLang 0.5.23 attaches under decode context parallelism, its file and Mooncake ones (a dynamic
backend never: ``HiCacheController.attach_storage_backend`` refuses the others, NS-5)."""


def asked_under_dcp(suite: SuiteContext) -> bool:
    """Whether SGLang hands this backend DCP configs: one of ``SGLANG_DCP_BACKENDS``, or a class that declares it
    is driven so (``hicache_dcp = True``, say a build of SGLang that attaches it under DCP)."""
    declared = getattr(suite.instances.main.backend, "hicache_dcp", False)
    return suite.factory.name in SGLANG_DCP_BACKENDS or declared is True


def sibling_configs(suite: SuiteContext, model_name: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The coordinates NS-1..NS-4 vary, as ``(clause, description, config overrides)``."""
    return [
        ("NS-1", "tp_rank 1 instead of 0 (same tp_size)", dict(tp_rank=1)),
        ("NS-2", "pp_rank 1 instead of 0", dict(pp_rank=1)),
        ("NS-3", "attn_cp_rank 1 instead of 0", dict(attn_cp_rank=1)),
        ("NS-4", "another model_name", dict(model_name=suite.names.namespace("other-model"))),
    ]


def build_with(
    suite: SuiteContext,
    model_name: str,
    tag: str,
    *,
    v2: bool = False,
    hybrid: bool = False,
    label: str = "",
    **overrides: Any,
) -> Instance:
    """Build an instance with every group of size 2 (rank 0 unless ``overrides`` say otherwise), its host pool of
    six pages: the checks below read into pages 2 to 5, the last the pool's last, where a bound off by one shows.
    ``label`` names it on each of its calls in the transcript; ``hybrid`` registers a hybrid model's pools (Mamba
    state) with the v2 ones."""
    fields: dict[str, Any] = dict(SPREAD_RANKS, is_mla_model=False, model_name=model_name)
    fields.update(overrides)
    return suite.instances.build(suite.instances.config(**fields), pages=6, v2=v2, tag=tag, label=label, hybrid=hybrid)


@conformance_check("NS-1", "NS-2", "NS-3", "NS-4")
def ranks_and_models_never_share_pages(suite: SuiteContext) -> None:
    """Instances differing only in tp_rank, pp_rank, attn_cp_rank or model_name never see or overwrite each other's pages."""
    model = suite.names.namespace("ns")
    base = build_with(suite, model, "tp 0, pp 0, cp 0")
    shown_pages = False
    for clause_id, difference, overrides in sibling_configs(suite, model):
        sibling = model_for(suite, overrides.pop("model_name", model), difference, overrides)
        shown_pages = kept_apart(suite, base, model, sibling, clause_id, difference) or shown_pages
    if suite.claims("v2"):  # a hybrid model's pools travel through v2 only
        shown_pages = mla_mamba_state_stays_per_rank(suite) or shown_pages
    suite.io.require_seen(shown_pages, "whether instances that differ in one coordinate share pages")


@conformance_check("NS-4")
def a_slash_in_a_model_name_is_part_of_it(suite: SuiteContext) -> None:
    """A model 'org/model' and a model 'org-model' are two models: neither sees or overwrites the other's pages
    (SGLang's HiCacheFile and MooncakeStore fold one into the other, DIV-30, DIV-31)."""
    model = suite.names.namespace("ns-path")
    first = build_with(suite, f"{model}-org/model", "model org/model")
    difference = "a model_name with '-' where the first has '/'"
    sibling = model_for(suite, f"{model}-org-model", difference, {})
    shown = kept_apart(suite, first, f"{model}-org/model", sibling, "NS-4", difference)
    suite.io.require_seen(shown, "whether the two models share pages")


def model_for(suite: SuiteContext, model_name: str, tag: str, overrides: dict[str, Any]) -> Callable[[], Instance]:
    """Return what builds the sibling instance, when ``kept_apart`` asks (after A has written)."""
    return lambda: build_with(suite, model_name, tag, **overrides)


def kept_apart(
    suite: SuiteContext,
    first: Instance,
    first_model: str,
    build_sibling: Callable[[], Instance],
    clause_id: str,
    difference: str,
) -> bool:
    """Instance A (``first``) writes two pages; then B (``build_sibling()``, differing in ``difference``) must neither
    see them nor, writing other bytes under the same keys, change what A or a new instance of A reads. Return whether
    a page of A's was seen (an evicting backend may have dropped them all)."""
    keys = suite.names.new_keys(2)
    suite.io.store(first, keys, clause_id=setup_clause(suite))
    shown_pages = suite.may_evict and suite.io.count(first, keys, clause_id=clause_id) > 0
    sibling = build_sibling()
    shown = f"instance A (tp 0/2, pp 0/2, cp 0/2) writes {suite.names.show(keys)}; instance B differs in {difference}"
    count = suite.io.count(sibling, keys, clause_id=clause_id)
    seen = suite.io.read(sibling, keys, pages=[2, 3], clause_id=clause_id)
    expect(
        count == 0 and not any(page is not None for page in seen),
        clause_id,
        f"an instance with {difference} sees the other's pages (batch_exists {count}, reads "
        f"{[page is not None for page in seen]})",
        shown,
    )
    suite.io.write(sibling, keys, variant=1, clause_id=clause_id)
    read = suite.io.read(first, keys, pages=[4, 5], clause_id=clause_id)
    shown_pages = shown_pages or any(page is not None for page in read)
    for key, page in zip(keys, read):
        expect(
            suite.io.holds(key, first.pool, page),
            clause_id,
            f"after an instance with {difference} wrote the same key, {suite.names.label(key)} reads back as "
            f"{describe_page_difference(suite.pages.page_for(key, first.pool), page)} for the first",
            shown + "; then B writes other bytes under the same keys",
        )
    # a new instance of A, with nothing of its own in memory, reads what the store holds for A (a miss there is
    # NS-7's to judge; other bytes are B's)
    again = build_with(suite, first_model, "a new instance of A (tp 0, pp 0, cp 0)")
    fresh = suite.io.read(again, keys, pages=[4, 5], clause_id=clause_id)
    for key, page in zip(keys, fresh):
        expect(
            page is None or suite.io.holds(key, again.pool, page),
            clause_id,
            f"after an instance with {difference} wrote the same key, a new instance of the first reads "
            f"{suite.names.label(key)} as {describe_page_difference(suite.pages.page_for(key, again.pool), page)}",
            shown + "; then B writes other bytes under the same keys; then a new instance of A reads them",
        )
    return shown_pages


def mla_mamba_state_stays_per_rank(suite: SuiteContext) -> bool:
    """With is_mla_model=True and a Mamba state pool (a hybrid MLA model), KV is one copy for every TP rank (NS-5)
    but Mamba state is sharded by TP rank: every rank writes its own under the same key (CTL-8), and a new instance
    of each rank reads back its own state, never the other's (NS-1). Return whether a state was seen."""
    model = suite.names.namespace("mla-mamba")
    ranks = [
        build_with(
            suite, model, f"tp {rank} of 2, MLA with Mamba state", v2=True, hybrid=True, is_mla_model=True, tp_rank=rank
        )
        for rank in (0, 1)
    ]
    keys = suite.names.new_keys(2)
    last = keys[-1:]  # SGLang stores one state per node, under its last page's key
    suite.io.store(ranks[0], keys, clause_id=setup_clause(suite))  # the storage writer's KV
    stored = []
    for rank, instance in enumerate(ranks):
        state = instance.pool_for(PoolName.MAMBA)
        state.poke(0, suite.pages.page_for(last[0], state, rank + 1))  # each rank's own shard of the state
        writes = [suite.wire.transfer(PoolName.MAMBA, last, state.slots([0]), policy=PoolHitPolicy.TRAILING_PAGES)]
        raw = suite.calls.call(setup_clause(suite), instance.backend.batch_set_v2, writes, None)
        stored.append(suite.io.v2_flags(raw, writes, "batch_set_v2")[PoolName.MAMBA.value][0])
    shown = (
        f"is_mla_model=True, tp_size 2: tp_rank 0 (the storage writer) writes the KV of {suite.names.show(keys)}; "
        f"tp_rank 0 and tp_rank 1 each write their own Mamba state of {suite.names.show(last)} (batch_set_v2, pool "
        "mamba, TRAILING_PAGES); a new instance of each rank reads its state back"
    )
    seen = False
    for rank, written in enumerate(stored):
        if not written:
            continue
        tag = f"a new instance of tp {rank} of 2, MLA with Mamba state"
        judge = build_with(suite, model, tag, v2=True, hybrid=True, is_mla_model=True, tp_rank=rank)
        state = judge.pool_for(PoolName.MAMBA)
        state.fill([3])
        reads = [
            suite.wire.transfer(PoolName.MAMBA, last, state.slots([3]), policy=PoolHitPolicy.TRAILING_PAGES, read=True)
        ]
        raw = suite.calls.call("NS-1", judge.backend.batch_get_v2, reads, None)
        if not suite.io.v2_flags(raw, reads, "batch_get_v2")[PoolName.MAMBA.value][0]:
            continue  # a miss is not a shared state (a write that does not read back is BE-17's)
        seen = True
        page = state.peek(3)
        if suite.pages.same_page(last[0], state, page, rank + 1):
            continue
        other = 2 - rank
        what = (
            f"tp_rank {1 - rank}'s state"
            if stored[1 - rank] and suite.pages.same_page(last[0], state, page, other)
            else describe_page_difference(suite.pages.page_for(last[0], state, rank + 1), page)
        )
        fail(
            "NS-1",
            f"with is_mla_model=True, a new instance of tp_rank {rank} reads its Mamba state of "
            f"{suite.names.label(last[0])} as {what}: Mamba state is sharded by TP rank (every rank writes its own, "
            "CTL-8), so it stays per rank where MLA KV is shared (NS-5)",
            shown,
        )
    return seen


@conformance_check("NS-5")
def replicated_kv_is_shared_across_tp_ranks(suite: SuiteContext) -> None:
    """With is_mla_model=True a page written by tp_rank 0 is found and read by tp_rank 1 (same PP and CP)."""
    model = suite.names.namespace("mla")
    writer = build_with(suite, model, "tp 0 of 2, replicated KV", is_mla_model=True, tp_rank=0)
    reader = build_with(suite, model, "tp 1 of 2, replicated KV", is_mla_model=True, tp_rank=1)
    keys = suite.names.new_keys(3)
    suite.io.store(writer, keys, clause_id=setup_clause(suite))
    shown = f"is_mla_model=True, tp_size 2: rank 0 writes {suite.names.show(keys)}, rank 1 looks them up"
    count = suite.io.count(reader, keys, clause_id="NS-5")
    expect(
        suite.io.counted(count, len(keys)),
        "NS-5",
        f"tp_rank 1 found {count} of {len(keys)} pages tp_rank 0 wrote",
        shown,
    )
    read = suite.io.read(reader, keys, pages=[3, 4, 5], clause_id="NS-5")
    for key, page in zip(keys, read):
        expect(
            suite.io.holds(key, reader.pool, page),
            "NS-5",
            f"tp_rank 1 reads {suite.names.label(key)} as {describe_page_difference(suite.pages.page_for(key, reader.pool), page)}",
            shown,
        )
    seen = count > 0 or any(page is not None for page in read)
    seen = dcp_pairs_share_only_their_own_pages(suite) or seen
    suite.io.require_seen(seen, "what tp_rank 1 sees of tp_rank 0's pages")


def dcp_pairs_share_only_their_own_pages(suite: SuiteContext) -> bool:
    """With decode context parallelism (dcp_size 2, tp_size 4, MLA) the writer of DCP rank 1 (tp_rank 1) is read by
    tp_rank 3, of the same DCP rank, never by tp_rank 0 of DCP rank 0 (each DCP rank holds its own part of a page);
    return whether a page was seen. Passed over where the release has no DCP fields, and for a backend SGLang never
    attaches under DCP (``asked_under_dcp``)."""
    group: dict[str, Any] = dict(tp_size=4, dcp_size=2, logical_page_size=2 * suite.options.page_size)
    if not asked_under_dcp(suite) or not suite.wire.release_has_fields(dict(group, dcp_rank=1)):
        return False
    model = suite.names.namespace("dcp")
    writer = build_with(
        suite, model, "tp 1 of 4, dcp 1 of 2 (writer)", is_mla_model=True, tp_rank=1, dcp_rank=1, **group
    )
    same = build_with(suite, model, "tp 3 of 4, dcp 1 of 2", is_mla_model=True, tp_rank=3, dcp_rank=1, **group)
    other = build_with(suite, model, "tp 0 of 4, dcp 0 of 2", is_mla_model=True, tp_rank=0, dcp_rank=0, **group)
    keys = suite.names.new_keys(2)
    suite.io.store(writer, keys, clause_id=setup_clause(suite))
    shown = (
        f"is_mla_model=True, tp_size 4, dcp_size 2: tp_rank 1 (dcp_rank 1, its DCP rank's writer) writes "
        f"{suite.names.show(keys)}; tp_rank 3 (dcp_rank 1) and tp_rank 0 (dcp_rank 0) look them up"
    )
    count = suite.io.count(same, keys, clause_id="NS-5")
    expect(
        suite.io.counted(count, len(keys)),
        "NS-5",
        f"tp_rank 3 (dcp_rank 1) found {count} of {len(keys)} pages its DCP rank's writer wrote",
        shown,
    )
    read = suite.io.read(same, keys, pages=[2, 3], clause_id="NS-5")
    for key, page in zip(keys, read):
        expect(
            suite.io.holds(key, same.pool, page),
            "NS-5",
            f"tp_rank 3 (dcp_rank 1) reads {suite.names.label(key)} as "
            f"{describe_page_difference(suite.pages.page_for(key, same.pool), page)}",
            shown,
        )
    foreign = suite.io.count(other, keys, clause_id="NS-5")
    crossed = suite.io.read(other, keys, pages=[4, 5], clause_id="NS-5")
    expect(
        foreign == 0 and not any(page is not None for page in crossed),
        "NS-5",
        f"tp_rank 0 (dcp_rank 0) sees the pages of DCP rank 1 (batch_exists {foreign}, reads "
        f"{[page is not None for page in crossed]}): each DCP rank holds its own part of a page",
        shown,
    )
    return count > 0 or any(page is not None for page in read)


@conformance_check("BE-17", requires=("v1", "v2", "namespacing"))
def a_non_writer_rank_writes_what_it_reports(suite: SuiteContext) -> None:
    """A rank that is not the storage writer still writes its sidecars: what batch_set_v2 reports stored reads back on that rank."""
    # SGLang's backup on a rank with replicated KV that is not the writer skips KV and writes the sidecar pools,
    # reporting the backup complete when they succeed; a backend that skips those writes loses them silently.
    config = suite.instances.config(
        model_name=suite.names.namespace("non-writer"), tp_rank=1, tp_size=2, is_mla_model=True
    )
    rank = suite.instances.build(config, pages=8, v2=True, tag="tp 1 of 2, replicated KV, not the storage writer")
    keys, pages, targets = suite.names.new_keys(3), [0, 1, 2], [4, 5, 6]
    swa = rank.pool_for(PoolName.SWA)
    for key, page in zip(keys, pages):
        swa.poke(page, suite.pages.page_for(key, swa, 3))
    writes = [suite.wire.transfer(PoolName.SWA, keys, swa.slots(pages))]
    written = suite.io.v2_flags(
        suite.calls.call("BE-17", rank.backend.batch_set_v2, writes, None), writes, "batch_set_v2"
    )[PoolName.SWA.value]
    swa.fill(pages, value=-1.0)  # what lands below can only come from storage
    swa.fill(targets)
    reads = [suite.wire.transfer(PoolName.SWA, keys, swa.slots(targets))]  # that rank's next prefetch reads them
    loaded = suite.io.v2_flags(
        suite.calls.call("BE-17", rank.backend.batch_get_v2, reads, None), reads, "batch_get_v2"
    )[PoolName.SWA.value]
    other_swa = swa
    shown = (
        f"is_mla_model=True, tp_rank 1 of 2 (not the writer): batch_set_v2(swa, {suite.names.show(keys)}) -> "
        f"{written}; then batch_get_v2 of them on the same rank -> {loaded}"
    )
    # SGLang takes a pool's flags by their leading run (count_pool_hits) or, here, their AND: a True past a False
    # is never relied on
    kept = count_leading_run(tuple(written))
    for index, (key, hit) in enumerate(zip(keys, loaded)):
        if hit:
            expect(
                suite.io.holds(key, other_swa, other_swa.peek(targets[index]), (3,)),
                "BE-17",
                f"the swa page of {suite.names.label(key)} reads back with other bytes",
                shown,
            )
        elif index < kept and not suite.may_evict:
            fail(
                "BE-17",
                f"batch_set_v2 on a rank that is not the storage writer returned True for "
                f"{suite.names.label(key)}'s swa page, but it cannot be read back",
                shown,
            )
    suite.io.require_seen(any(loaded), "what a rank that is not the storage writer keeps of its sidecars")


@conformance_check("NS-6")
def exists_get_and_set_share_one_key_scheme(suite: SuiteContext) -> None:
    """Pages written through the backend's write path are found by batch_exists and read back (the engine calls
    exists, get and set only through the base class's batch methods, which a backend may override)."""
    instance = build_with(
        suite, suite.names.namespace("scheme"), "tp 1/2, pp 1/2, cp 1/2", tp_rank=1, pp_rank=1, attn_cp_rank=1
    )
    path = suite.io.io_path()  # SGLang writes, looks up and reads KV of one backend through one path
    keys = suite.names.new_keys(2)
    suite.io.store(instance, keys, path=path, clause_id="NS-6")
    shown = f"written through {path} as {suite.names.show(keys)} by an instance at tp 1/2, pp 1/2, cp 1/2"
    count = suite.io.count(instance, keys, clause_id="NS-6")
    expect(
        suite.io.counted(count, len(keys)),
        "NS-6",
        f"batch_exists found {count} of {len(keys)} pages written through {path}",
        f"{shown}; batch_exists({suite.names.show(keys)}) -> {count}",
    )
    read = suite.io.read(instance, keys, pages=[4, 5], path=path, clause_id="NS-6")
    for key, page in zip(keys, read):
        expect(
            suite.io.holds(key, instance.pool, page),
            "NS-6",
            f"{'batch_get' if path == 'legacy' else 'batch_get_v1'} misses {suite.names.label(key)} written through {path}",
            shown,
        )
    # a read alone shows nothing here: the clause is that the lookup finds what the write wrote
    suite.io.require_seen(count > 0, "that batch_exists finds pages under the key scheme of the writes")


@conformance_check("NS-8")
def clear_removes_only_its_own_namespace(suite: SuiteContext) -> None:
    """clear() on one instance leaves the pages of other models (a name extending its own included) and other ranks
    in place, as a new instance of each finds them, byte for byte."""
    model = suite.names.namespace("scoped")
    neighbour = suite.names.namespace("neighbour")
    models = {model: "m1", neighbour: "m2", model + "-nested": "m1-nested"}
    neighbours: list[tuple[str, dict[str, Any]]] = [
        ("another model", dict(model_name=neighbour)),
        ("a model whose name extends the cleared one's", dict(model_name=model + "-nested")),
        ("another tp_rank", dict(tp_rank=1)),
    ]
    letters = iter("ABCDEFGH")

    def build(tag: str, overrides: dict[str, Any]) -> tuple[str, Instance]:
        fields = dict(overrides)
        name = fields.pop("model_name", model)
        letter = next(letters)
        label = f"instance {letter} (model {models[name]}, tp_rank {fields.get('tp_rank', 0)})"
        return letter, build_with(suite, name, tag, label=label, **fields)

    cleared_letter, cleared = build("the cleared instance", {})
    built = [build(tag, overrides) for tag, overrides in neighbours]
    others = [instance for _, instance in built]
    keys, late = suite.names.new_keys(2), suite.names.new_keys(2)
    for instance in [cleared] + others:
        suite.io.store(instance, keys, clause_id=setup_clause(suite))
    # pages written and never read since: a store whose reads renew a lease must not keep only those it read
    unread = [[key for key, ok in zip(late, suite.io.write(other, late, pages=[0, 1])) if ok] for other in others]
    if not suite.io.clear(cleared):
        raise CheckSkipped("clear() raised: a failed clear (BE-11) shows nothing of what a clear leaves to others")
    writers = f"{cleared_letter}-{built[-1][0]}"
    cast = "; ".join(
        [f"instance {cleared_letter} is cleared"]
        + [f"{letter} is {tag}" for (letter, _), (tag, _) in zip(built, neighbours)]
    )
    legend = ", ".join(f"{alias} = {name!r}" for name, alias in models.items())
    seen = False
    for (tag, overrides), written_late in zip(neighbours, unread):
        letter, judge = build(f"a new instance of {tag}", overrides)  # not the instance that wrote: no own cache
        for group, how in ((keys, "written and read back"), (written_late, "written, never read")):
            if not group:
                continue
            shown = (
                f"{cast}; {writers} each write {suite.names.show(keys)} (read back), all but "
                f"{cleared_letter} also {suite.names.show(late)} (not read); clear() on {cleared_letter}; "
                f"{letter}, a new instance of {tag}, looks up and reads {suite.names.show(group)} (models: {legend})"
            )
            count = suite.io.count(judge, group, clause_id="NS-8")
            read = suite.io.read(judge, group, pages=[2, 3], clause_id="NS-8")
            seen = seen or count > 0 or any(page is not None for page in read)
            expect(
                suite.io.counted(count, len(group)),
                "NS-8",
                f"clear() on one instance removed the pages of {tag} ({how}): a new instance of it finds "
                f"{count} of {len(group)}",
                shown,
            )
            for key, page in zip(group, read):
                expect(
                    suite.io.holds(key, judge.pool, page),
                    "NS-8",
                    f"clear() on one instance removed the pages of {tag} ({how}): a new instance of it reads "
                    f"{suite.names.label(key)} as "
                    f"{describe_page_difference(suite.pages.page_for(key, judge.pool), page)}",
                    shown,
                )
    suite.io.require_seen(seen, "what clear() leaves of other namespaces")


@conformance_check("NS-7")
def pages_survive_a_rebuild(suite: SuiteContext) -> None:
    """A backend rebuilt with the same configuration finds and reads the pages written before."""
    config = suite.instances.config(model_name=suite.names.namespace("durable"))
    first = suite.instances.build(config, pages=8, tag="before the restart")
    keys = suite.names.new_keys(3)
    suite.io.store(first, keys, clause_id=setup_clause(suite))
    close = getattr(first.backend, "close", None)
    if callable(close):
        suite.calls.call("NS-7", close)
    suite.instances.forget(first)  # closed: the rebuilt instance clears the namespace at the end
    second = suite.instances.build(config, pages=8, tag="after the restart")
    shown = f"instance 1 writes {suite.names.show(keys)} and closes; instance 2 is built from the same configuration"
    count = suite.io.count(second, keys, clause_id="NS-7")
    expect(suite.io.counted(count, len(keys)), "NS-7", f"the rebuilt backend found {count} of {len(keys)} pages", shown)
    read = suite.io.read(second, keys, pages=[4, 5, 6], clause_id="NS-7")
    for key, page in zip(keys, read):
        expect(
            suite.io.holds(key, second.pool, page),
            "NS-7",
            f"the rebuilt backend reads {suite.names.label(key)} as "
            f"{describe_page_difference(suite.pages.page_for(key, second.pool), page)}",
            shown,
        )
    suite.io.require_seen(count > 0 or any(page is not None for page in read), "what survives a rebuild")
