"""The check of the format level (NS-9): a page written from a host pool of one format is never a hit for another.

A writer with the run's host pool stores pages of small integers (exact in
float16 and bfloat16, different at every position). Readers of the same
configuration then look them up and read them, each with a host pool that
differs from the writer's in one thing only, every page the same size in
bytes: the layout (``layer_first`` and ``page_first`` swapped), the dtype
(float16 and bfloat16 swapped) or the page geometry (twice the tokens of half
the heads, or the reverse). Each must miss and leave its host pool as it was;
a reader of the writer's own format must then hit every page with the values
written (compared per component, layer, token, head and dim, whatever the
layout), else the misses showed nothing. Pages move through the path SGLang
drives the backend through: v1 when claimed, else the legacy batch methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch

from hicache_spec.values import is_true_flag
from hicache_contracts.conformance.framework import CheckSkipped, conformance_check, expect, fail
from hicache_contracts.conformance.session.context import HEAD_NUM, LAYER_NUM, Instance, SuiteContext
from hicache_contracts.conformance.session.pools import pages_equal

__all__ = ["FORMAT_PAGES", "SENTINEL"]

FORMAT_PAGES = 8
"""Pages the writer stores."""
SENTINEL = -7.0
"""What a reader's host pool holds before a read: exact in float16 and bfloat16, never a value written."""
OTHER_DTYPE = {torch.float16: torch.bfloat16, torch.bfloat16: torch.float16}
"""The dtype a reader of another dtype uses: as many bytes per element, other bits for the same value."""
OTHER_LAYOUT = {"layer_first": "page_first", "page_first": "layer_first"}
"""The layout a reader of another layout uses."""


@dataclass(frozen=True)
class PoolFormat:
    """How a KV host pool's pages look as bytes: layout, dtype and page geometry."""

    layout: str
    dtype: torch.dtype
    page_size: int
    head_num: int

    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def geometry(self) -> str:
        return f"{self.page_size} tokens x {self.head_num} head{'s' if self.head_num != 1 else ''} per page"

    def describe(self) -> str:
        return f"{self.layout}, {self.dtype_name()}, {self.geometry()}"


def logical_page(pool: Any, flat: torch.Tensor) -> torch.Tensor:
    """Return the flat page ``flat`` of ``pool`` as float values ``[component, layer, token, head x dim]``, whatever
    the pool's layout (``page_first`` pages hold tokens before layers)."""
    components = 2 if getattr(pool, "kind", "mha") == "mha" else 1
    tokens = int(pool.page_size)
    rest = flat.numel() // (components * LAYER_NUM * tokens)
    if pool.layout == "page_first":
        return flat.reshape(components, tokens, LAYER_NUM, rest).transpose(1, 2).float()
    return flat.reshape(components, LAYER_NUM, tokens, rest).float()


def same_values(written: torch.Tensor, pool: Any, flat: torch.Tensor) -> bool:
    """Whether the flat page ``flat`` of ``pool`` holds exactly the logical values ``written``."""
    try:
        got = logical_page(pool, flat)
    except RuntimeError:  # a page of another size
        return False
    return got.shape == written.shape and bool(torch.equal(got, written))


def fill_small_integers(pool: Any, pages: Sequence[int], seed: int) -> None:
    """Fill ``pages`` of ``pool`` with integers in [0, 256): exact in float16 and bfloat16, drawn per position."""
    generator = torch.Generator().manual_seed(seed)
    for page in pages:
        values = torch.randint(0, 256, (pool.page_element_count,), generator=generator)
        pool.poke(page, values.to(pool.dtype))


@dataclass(frozen=True)
class Seen:
    """What one reader saw of the writer's pages."""

    count: int
    """What batch_exists counted."""
    loaded: list[bool]
    """Per page, whether the read reported a hit."""
    wrong: int
    """Pages that landed (a hit, or host slots changed) with values other than written."""
    equal: int
    """Pages that landed with exactly the values written."""
    untouched: bool
    """The reader's host pool holds what it held before the read."""
    shown: str
    """The reader's calls, for the counterexample."""

    @property
    def hits(self) -> int:
        return max(self.count, sum(self.loaded))


def writer_format(suite: SuiteContext, pool: Any) -> PoolFormat:
    heads = 1 if suite.options.kind == "mla" else HEAD_NUM
    return PoolFormat(str(pool.layout), pool.dtype, int(pool.page_size), heads)


def variants(own: PoolFormat) -> list[tuple[str, str, str, PoolFormat]]:
    """The readers' formats, each differing from ``own`` in one thing: (what, writer's, reader's, format)."""
    layout = PoolFormat(OTHER_LAYOUT[own.layout], own.dtype, own.page_size, own.head_num)
    dtype = PoolFormat(own.layout, OTHER_DTYPE.get(own.dtype, torch.float16), own.page_size, own.head_num)
    found = [
        ("layout", own.layout, layout.layout, layout),
        ("dtype", own.dtype_name(), dtype.dtype_name(), dtype),
    ]
    if own.head_num % 2 == 0:
        geometry: Optional[PoolFormat] = PoolFormat(own.layout, own.dtype, own.page_size * 2, own.head_num // 2)
    elif own.page_size % 2 == 0:
        geometry = PoolFormat(own.layout, own.dtype, own.page_size // 2, own.head_num * 2)
    else:
        geometry = None  # neither keeps the bytes of a page: a reader of another size is no such case
    if geometry is not None:
        found.append(("page geometry", own.geometry(), geometry.geometry(), geometry))
    return found


def new_pool(suite: SuiteContext, page_format: PoolFormat) -> Any:
    return suite.instances.new_pool(
        FORMAT_PAGES,
        layout=page_format.layout,
        dtype=page_format.dtype,
        page_size=page_format.page_size,
        head_num=page_format.head_num,
    )


def build_reader(suite: SuiteContext, model: str, pool: Any, tag: str) -> Instance:
    """A reader of the writer's configuration with ``pool``, filled with ``SENTINEL`` (SGLang sets
    is_page_first_layout from the host pool's layout)."""
    config = suite.instances.config(model_name=model, is_page_first_layout=pool.layout == "page_first")
    pool.fill(range(FORMAT_PAGES), value=SENTINEL)
    return suite.instances.build(config, pages=FORMAT_PAGES, tag=tag, pool=pool)


def read_back(suite: SuiteContext, reader: Instance, keys: list[str], written: list[torch.Tensor]) -> Seen:
    """Look ``keys`` up and read them through ``reader`` into its host pages 0.. (v1), or as flat pages (legacy)."""
    pool, pages = reader.pool, list(range(len(keys)))
    count = suite.io.count(reader, keys, clause_id="NS-9")
    before = [pool.peek(page) for page in range(FORMAT_PAGES)]
    if suite.io.io_path() == "v1":
        raw = suite.calls.call("NS-9", reader.backend.batch_get_v1, keys, pool.slots(pages), None)
        loaded = suite.io.v1_flags(raw, keys, "batch_get_v1")
        after = [pool.peek(page) for page in range(FORMAT_PAGES)]
        untouched = all(pages_equal(old, new) for old, new in zip(before, after))
        landed = [
            after[page] if hit or not pages_equal(before[page], after[page]) else None
            for page, hit in zip(pages, loaded)
        ]
        method = "batch_get_v1"
    else:
        landed = suite.io.read(reader, keys, path="legacy", clause_id="NS-9")
        loaded = [page is not None for page in landed]
        untouched = not any(loaded)  # SGLang's generic path copies each hit into the host pool
        method = "batch_get"
    equal = sum(page is not None and same_values(want, pool, page) for want, page in zip(written, landed))
    wrong = sum(page is not None for page in landed) - equal
    shown = (
        f"batch_exists({suite.names.show(keys)}) -> {count}, {method} -> {loaded}; its host pool "
        f"{'unchanged' if untouched else 'changed'}"
    )
    return Seen(count, loaded, wrong, equal, untouched, shown)


def store(suite: SuiteContext, writer: Instance, keys: list[str]) -> None:
    """Write the writer's host pages 0.. under ``keys`` through the path SGLang would use; skip if refused."""
    pool, pages = writer.pool, list(range(len(keys)))
    if suite.io.io_path() == "v1":
        raw = suite.calls.call("NS-9", writer.backend.batch_set_v1, keys, pool.slots(pages), None)
        stored = suite.io.v1_flags(raw, keys, "batch_set_v1")
    else:
        outcome = suite.calls.call("NS-9", writer.backend.batch_set, keys, [pool.peek(page) for page in pages])
        stored = [is_true_flag(outcome)] * len(keys)
    if not all(stored):
        raise CheckSkipped(f"the backend refused pages the check needs (the write returned {stored}); nothing to check")


@conformance_check("NS-9")
def a_reader_of_another_host_pool_format_misses(suite: SuiteContext) -> None:
    """Pages written from a host pool of one layout, dtype or page geometry are misses for a reader of the same
    configuration whose pool differs in one of them (its pool untouched); a reader of the same format hits them all."""
    model = suite.names.namespace("format")
    writer = suite.instances.build(suite.instances.config(model_name=model), pages=FORMAT_PAGES, tag="the writer")
    suite.io.require_round_trip(writer)  # a broken basic read or write is reported on its own clause
    own = writer_format(suite, writer.pool)
    pages = list(range(FORMAT_PAGES))
    fill_small_integers(writer.pool, pages, suite.seed)
    written = [logical_page(writer.pool, writer.pool.peek(page)) for page in pages]
    keys = suite.names.new_keys(FORMAT_PAGES)
    store(suite, writer, keys)
    built = [writer]
    path = suite.io.io_path()
    setup = (
        f"a writer whose host pool is {own.describe()} stores {FORMAT_PAGES} pages of small integers through "
        f"{path} as {suite.names.show(keys)}"
    )
    for what, theirs, ours, page_format in variants(own):
        pool = new_pool(suite, page_format)
        if pool.page_element_count * pool.dtype.itemsize != writer.pool.page_element_count * writer.pool.dtype.itemsize:
            continue  # this pool class does not build such a page with the writer's bytes: no such reader
        reader = build_reader(suite, model, pool, f"a reader of another {what}")
        built.append(reader)
        seen = read_back(suite, reader, keys, written)
        expect(
            seen.count == 0 and not any(seen.loaded) and seen.untouched,
            "NS-9",
            f"a reader whose host pool differs in {what} ({theirs} -> {ours}) got {seen.hits} hits, "
            f"{seen.wrong} of {FORMAT_PAGES} pages with values other than written",
            f"{setup}; a reader of the same configuration whose host pool is {page_format.describe()}: {seen.shown}",
        )
    control = build_reader(suite, model, new_pool(suite, own), "a reader of the writer's format")
    built.append(control)
    seen = read_back(suite, control, keys, written)
    shown = f"{setup}; a reader of the same configuration and host pool format: {seen.shown}"
    if seen.wrong:
        fail(
            "NS-9",
            f"a reader whose host pool has the writer's format got {seen.hits} hits, {seen.wrong} of "
            f"{FORMAT_PAGES} pages with values other than written",
            shown,
        )
    if seen.count != FORMAT_PAGES or seen.equal != FORMAT_PAGES:
        if suite.may_evict:
            raise CheckSkipped(
                f"a reader of the writer's own format found {seen.count} and read {seen.equal} of {FORMAT_PAGES} "
                "pages: the backend may evict, so the misses of the other formats showed nothing"
            )
        fail(
            "NS-9",
            f"a reader whose host pool has the writer's format found {seen.count} and read {seen.equal} of "
            f"{FORMAT_PAGES} pages the writer stored: a reader of another format missing them shows nothing",
            shown,
        )
    for instance in reversed(built):  # the readers, then the writer: nothing of the check stays in the store
        suite.io.clear(instance)
