"""A page of one format is never a hit for a pool of another (NS-9): the format guard of the reference backends.

Scenario: two deployments of one model name share a store (memory, file,
Redis): the writer's host pool stores pages as ``page_first`` float16 with 4
tokens per page and 2 heads; the reader's differs in one thing only, its
layout (``layer_first``), its dtype (bfloat16) or its page geometry (8 tokens
of 1 head): every page has the same size in bytes, so nothing but the format
tells them apart. The writer stores 8 pages.
Expected: the reader misses all 8 (``batch_exists`` 0, every read False) and
its host slots stay untouched; a reader of the writer's own format hits all 8
with the writer's values. The planted backend without the guard serves 8/8
hits holding wrong values and is caught.
Why this matters: before, such a reader loaded scrambled KV as valid pages.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
import torch

from hicache_reference.backends import FileBackend
from hicache_reference.backends.memory import MemoryBackend
from tests.redis_support import require_mode, unique_key_prefix
from tests.reference.backend_checks import config, make_pool, page_keys, slots_of

PAGES = 8
KEYS = page_keys(PAGES, start=500)
WRITER = dict(layout="page_first", dtype=torch.float16, page_size=4, head_num=2)
READERS = {
    "layout": dict(WRITER, layout="layer_first"),
    "dtype": dict(WRITER, dtype=torch.bfloat16),
    "geometry": dict(WRITER, page_size=8, head_num=1),  # as many bytes per page, another shape
}


def pool_of(page_format: dict) -> Any:
    return make_pool(page_count=PAGES * 2, **page_format)


def logical_page(pool: Any, page: int) -> torch.Tensor:
    """The page's values as ``[component, layer, token, head, dim]`` floats, whatever the pool's layout."""
    structured = pool.get_data_page(page * pool.page_size, flat=False)
    if pool.layout == "page_first":
        structured = structured.transpose(1, 2)
    return structured.float().reshape(-1)


def fill_distinct(pool: Any) -> None:
    """Small integers (exact in float16 and bfloat16), different at every position of every page."""
    generator = torch.Generator().manual_seed(9)
    values = torch.randint(0, 256, pool.kv_buffer.shape, generator=generator)
    pool.kv_buffer.copy_(values.to(pool.dtype))


Factory = Callable[[Any], Any]


def backend_class_of(kind: str) -> type:
    if kind == "redis":  # imported only where a server is, so the other kinds run without the redis extra
        from hicache_reference.backends.redis_backend import RedisBackend

        return RedisBackend
    return {"memory": MemoryBackend, "file": FileBackend}[kind]


@pytest.fixture(params=["memory", "file", "redis"])
def factory(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Factory]:
    """Makes backends of one class over one shared store, for one model name."""
    made: list[Any] = []
    if request.param == "memory":
        extra: dict = {"store": f"format-guard-{tmp_path.name}"}
    elif request.param == "file":
        extra = {"path": str(tmp_path / "pages")}
    else:
        extra = {**require_mode("standalone"), "key_prefix": unique_key_prefix()}
    kind = request.param

    def make(backend_class: Any = None) -> Any:
        backend = (backend_class or backend_class_of(kind))(
            config(model_name=f"format-guard-{tmp_path.name}"), dict(extra)
        )
        made.append(backend)
        return backend

    make.kind = kind  # type: ignore[attr-defined]
    yield make
    if made:
        made[0].clear()
    for backend in made:
        backend.close()


def read_back(make: Factory, backend_class: Any, reader_format: dict) -> tuple[int, list[bool], Any]:
    reader = make(backend_class)
    pool = pool_of(reader_format)
    sentinel = torch.full(pool.kv_buffer.shape, 7.0).to(pool.dtype)
    pool.kv_buffer.copy_(sentinel)
    reader.register_mem_pool_host(pool)
    hit = reader.batch_exists(KEYS)
    loaded = reader.batch_get_v1(KEYS, slots_of(pool, list(range(PAGES))))
    return hit, loaded, pool


def write_all(make: Factory, backend_class: Any) -> Any:
    writer = make(backend_class)
    pool = pool_of(WRITER)
    fill_distinct(pool)
    writer.register_mem_pool_host(pool)
    assert writer.batch_set_v1(KEYS, slots_of(pool, list(range(PAGES)))) == [True] * PAGES
    return pool


def wrong_pages(written: Any, read: Any) -> int:
    return sum(not torch.equal(logical_page(written, page), logical_page(read, page)) for page in range(PAGES))


@pytest.mark.clause("NS-9")
@pytest.mark.parametrize("difference", list(READERS))
def test_a_reader_of_another_format_misses(factory: Factory, difference: str, backend_class: Any = None) -> None:
    written = write_all(factory, backend_class)
    hit, loaded, pool = read_back(factory, backend_class, READERS[difference])
    untouched = torch.equal(pool.kv_buffer.float(), torch.full(pool.kv_buffer.shape, 7.0))
    assert (hit, loaded, untouched) == (0, [False] * PAGES, True), (
        f"a {difference} mismatch served {hit} hits, {wrong_pages(written, pool)} of {PAGES} pages wrong"
    )
    # the writer's own format, the same model name: every page, every value
    hit, loaded, same = read_back(factory, backend_class, WRITER)
    assert (hit, loaded) == (PAGES, [True] * PAGES)
    assert wrong_pages(written, same) == 0


def unguarded(backend_class: type) -> type:
    """The planted backend: the namespace holds model and ranks only, as before."""
    return type(f"Unguarded{backend_class.__name__}", (backend_class,), {"format_guard": False})


@pytest.mark.parametrize("difference", list(READERS))
def test_planted_backend_without_the_guard_serves_wrong_pages_and_is_caught(factory: Factory, difference: str) -> None:
    planted = unguarded(backend_class_of(factory.kind))  # type: ignore[attr-defined]
    written = write_all(factory, planted)
    hit, loaded, pool = read_back(factory, planted, READERS[difference])
    assert (hit, loaded) == (PAGES, [True] * PAGES)  # every page a hit ...
    assert wrong_pages(written, pool) == PAGES  # ... and every one wrong: 8/8
    with pytest.raises(AssertionError) as raised:
        test_a_reader_of_another_format_misses(factory, difference, planted)
    assert f"a {difference} mismatch served {PAGES} hits, {PAGES} of {PAGES} pages wrong" in str(raised.value)
