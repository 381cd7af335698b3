"""CPU "device" pools for linkers: what a linker reads on offload and writes on load.

A ``DevicePool`` is one PoolName's device memory: per layer, one or more
buffers whose first dimension is the slot (a KV pool holds K and V per layer,
an MLA pool one buffer). A page of ``slots_per_page`` slots is the unit a key
names. On a machine without an accelerator the buffers are torch CPU tensors;
the linker suite fills them, hands their slots to the linker in
``PoolTransfer.device_indices`` and reads them back byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

__all__ = ["DevicePool", "make_device_pools", "pool_name"]


def pool_name(name: Any) -> str:
    """Return a pool name as its plain string value (SGLang's PoolName, the contract's, or a str)."""
    return str(getattr(name, "value", name))


@dataclass
class DevicePool:
    """One pool's device memory: ``layers[l]`` is the tuple of layer l's buffers, slot-major."""

    name: str
    layers: list[tuple[torch.Tensor, ...]]
    slots_per_page: int
    rank_replicated: bool = False
    generation: int = field(default=0, compare=False)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_slots(self) -> int:
        return int(self.layers[0][0].shape[0])

    def read_slots(self, layer: int, slots: torch.Tensor) -> bytes:
        """Return layer ``layer``'s bytes of ``slots``, buffer after buffer."""
        index = slots.to(torch.int64)
        parts = [buffer[index].contiguous().view(torch.uint8).reshape(-1) for buffer in self.layers[layer]]
        return torch.cat(parts).numpy().tobytes()

    def write_slots(self, layer: int, slots: torch.Tensor, data: bytes) -> None:
        """Write ``data`` (as ``read_slots`` returns it) into layer ``layer``'s ``slots``."""
        index = slots.to(torch.int64)
        flat = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        offset = 0
        for buffer in self.layers[layer]:
            row = buffer[0].numel() * buffer.element_size()
            size = row * len(index)
            if offset + size > flat.numel():
                raise ValueError(f"pool {self.name}: {len(data)} bytes for {len(index)} slots of layer {layer}")
            chunk = flat[offset : offset + size].view(buffer.dtype).reshape((len(index),) + tuple(buffer.shape[1:]))
            buffer[index] = chunk
            offset += size
        if offset != flat.numel():
            raise ValueError(f"pool {self.name}: {len(data)} bytes for {len(index)} slots of layer {layer}")

    def snapshot(self) -> list[torch.Tensor]:
        """Return a copy of every buffer (to compare slots before and after a call)."""
        return [buffer.clone() for layer in self.layers for buffer in layer]


def make_device_pools(
    names: Sequence[str],
    *,
    num_layers: int = 2,
    num_slots: int = 64,
    slots_per_page: int | dict[str, int] = 4,
    width: int = 8,
    buffers: int = 2,
    rank_replicated: bool = False,
    seed: int = 0,
) -> dict[str, DevicePool]:
    """Return CPU pools named ``names`` filled with seeded random bytes (``buffers`` buffers per layer)."""
    generator = torch.Generator().manual_seed(seed)
    pools = {}
    for index, name in enumerate(names):
        per_page = slots_per_page[name] if isinstance(slots_per_page, dict) else slots_per_page
        layers = [
            tuple(
                torch.randint(0, 256, (num_slots, width + index), dtype=torch.uint8, generator=generator)
                for _ in range(buffers)
            )
            for _ in range(num_layers)
        ]
        pools[name] = DevicePool(name, layers, per_page, rank_replicated)
    return pools
