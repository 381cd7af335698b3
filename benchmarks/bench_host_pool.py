"""Host page pool helpers against raw torch copies of the same bytes, measured in one run.

Prints, per layout, the time of each helper divided by its baseline:

  get_data_page            vs  clone() of a contiguous block of page_bytes
  set_from_flat_data_page  vs  copy_() into a contiguous block of page_bytes
  get_page_buffer_meta     vs  the same copy of 128 pages' bytes (the IO it prepares)

Run: python benchmarks/bench_host_pool.py
"""

from __future__ import annotations

import timeit

import torch

from hicache_contracts.host_pool import HostPagePool

PAGES = 136
PAGE_SIZE = 16
LAYERS = 16
HEADS = 4
HEAD_DIM = 64
BATCH_PAGES = 128


def best_of(function, number: int) -> float:
    return min(timeit.repeat(function, number=number, repeat=5)) / number


def measure(layout: str) -> dict[str, float]:
    pool = HostPagePool(PAGES, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, kind="mha", layout=layout, pin_memory=False)
    page = torch.randn(pool.page_element_count).to(pool.dtype)
    block = torch.empty(pool.page_element_count * 4, dtype=pool.dtype)
    slots = pool.alloc(BATCH_PAGES)
    batch_block = torch.empty(BATCH_PAGES * pool.page_element_count, dtype=pool.dtype)
    batch_source = torch.randn(BATCH_PAGES * pool.page_element_count).to(pool.dtype)
    start = pool.page_size * 3
    return {
        "get_data_page": best_of(lambda: pool.get_data_page(start), 50)
        / best_of(lambda: block[: pool.page_element_count].clone(), 50),
        "set_from_flat_data_page": best_of(lambda: pool.set_from_flat_data_page(start, page), 50)
        / best_of(lambda: block[: pool.page_element_count].copy_(page), 50),
        "get_page_buffer_meta (128 pages)": best_of(lambda: pool.get_page_buffer_meta(slots), 5)
        / best_of(lambda: batch_block.copy_(batch_source), 5),
    }


def main() -> None:
    print(f"pool: {PAGES} pages x {PAGE_SIZE} tokens, {LAYERS} layers, {HEADS} heads x {HEAD_DIM}, float16, mha")
    for layout in ("page_first", "layer_first"):
        for name, ratio in measure(layout).items():
            print(f"{layout:12s} {name:34s} {ratio:8.3f}x baseline")


if __name__ == "__main__":
    main()
