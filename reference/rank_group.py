"""Agreement across ranks: the one collective the controller needs, behind a small interface.

The controller agrees with the other ranks of its tensor, context and
pipeline parallel groups on three things (RANK-1..RANK-4): the hit count of
every prefetch, every prefetch ack, and the outcome of every backup. Each is
an all-reduce with MIN over one ``int``, so the interface is::

    RankGroup
        rank            this process's index in the group
        world_size      how many ranks take part
        all_reduce_min(value: int) -> int
        channel(name: str) -> RankGroup

``channel`` returns an independent group over the same ranks. The controller
takes one channel per worker thread (hit query, IO, backup), so that each
channel sees its collectives in one thread's order, which is the same on
every rank (operations are submitted in the same order everywhere).
Channels must be opened in the same order on every rank: the controller
opens them in its constructor.

The hit agreement of SGLang 0.5.22+ is one MIN all-reduce of a packed
vector (RANK-5, RANK-6): ``all_reduce_min_vector(group, values)`` uses a
group's own ``all_reduce_min_vector`` when it has one (every implementation
here does: one collective) and otherwise reduces element by element.

Implementations:

- ``LocalRankGroup``: one rank; the reduction returns its input.
- ``ThreadRankGroup``: several ranks as threads of one process (tests, and
  the engine trace checker); a reduction waits for every rank, bounded by a
  timeout.
- ``TorchDistributedRankGroup``: an existing ``torch.distributed`` process
  group (gloo on CPU, NCCL on GPU); channels are new groups over the same
  ranks, built with the same backend.

A reduction that cannot complete raises ``RankAgreementError`` (a
``RuntimeError``).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any, Optional, Protocol, runtime_checkable

import torch
from hicache_spec.values import is_count

__all__ = [
    "all_reduce_min_vector",
    "LocalRankGroup",
    "RankAgreementError",
    "RankGroup",
    "ThreadRankGroup",
    "TorchDistributedRankGroup",
]


class RankAgreementError(RuntimeError):
    """A collective across ranks could not complete (a rank left, or it timed out)."""


@runtime_checkable
class RankGroup(Protocol):
    """What the controller needs from its ranks: MIN over one int, and independent channels."""

    @property
    def rank(self) -> int:
        """This rank's index in the group, 0 <= rank < world_size."""
        ...

    @property
    def world_size(self) -> int:
        """How many ranks take part."""
        ...

    def all_reduce_min(self, value: int) -> int:
        """Return the minimum of ``value`` over every rank; every rank must call it. Clauses: RANK-1, RANK-3."""
        ...

    def channel(self, name: str) -> RankGroup:
        """Return an independent group over the same ranks; every rank must open channels in the same order."""
        ...


def all_reduce_min_vector(group: Any, values: tuple[int, ...]) -> tuple[int, ...]:
    """Return the element-wise minimum of ``values`` over the group's ranks: one collective where the group has one. Clause: RANK-5."""
    reduce = getattr(group, "all_reduce_min_vector", None)
    if callable(reduce):
        return tuple(int(value) for value in reduce(tuple(values)))
    return tuple(group.all_reduce_min(int(value)) for value in values)


class LocalRankGroup:
    """A group of one: every reduction returns its input."""

    rank = 0
    world_size = 1

    def all_reduce_min(self, value: int) -> int:
        """Return ``value``: the minimum over one rank."""
        return int(value)

    def all_reduce_min_vector(self, values: tuple[int, ...]) -> tuple[int, ...]:
        """Return ``values``: the element-wise minimum over one rank."""
        return tuple(int(value) for value in values)

    def channel(self, name: str) -> LocalRankGroup:
        """Return a new group of one."""
        return LocalRankGroup()

    def __repr__(self) -> str:
        return "LocalRankGroup()"


class _Exchange:
    """One reduction point shared by the ranks of a ThreadRankGroup channel."""

    def __init__(self, world_size: int, timeout: float) -> None:
        self._barrier = threading.Barrier(world_size)
        self._values = [0] * world_size
        self._timeout = timeout

    def reduce_min(self, rank: int, value: Any) -> Any:
        self._values[rank] = value
        try:
            self._barrier.wait(self._timeout)  # every rank has written
            values = list(self._values)
            result = tuple(min(column) for column in zip(*values)) if isinstance(values[0], tuple) else min(values)
            self._barrier.wait(self._timeout)  # every rank has read, before anyone writes again
        except threading.BrokenBarrierError:
            self._barrier.abort()
            raise RankAgreementError(
                f"ThreadRankGroup.all_reduce_min: not every rank joined within {self._timeout} s"
            ) from None
        return result

    def abort(self) -> None:
        self._barrier.abort()


class _ThreadHub:
    """The channels of one ThreadRankGroup family, created on first use."""

    def __init__(self, world_size: int, timeout: float) -> None:
        self.world_size = world_size
        self.timeout = timeout
        self._lock = threading.Lock()
        self._exchanges: dict[str, _Exchange] = {}

    def exchange(self, name: str) -> _Exchange:
        with self._lock:
            exchange = self._exchanges.get(name)
            if exchange is None:
                exchange = self._exchanges[name] = _Exchange(self.world_size, self.timeout)
            return exchange

    def abort(self) -> None:
        with self._lock:
            for exchange in self._exchanges.values():
                exchange.abort()


class ThreadRankGroup:
    """Ranks as threads of one process: ``ThreadRankGroup.create(2)`` gives one group per rank.

    Each reduction waits for every rank at most ``timeout`` seconds, then
    raises ``RankAgreementError`` (and breaks the channel for every rank,
    so nobody waits forever).
    """

    def __init__(self, hub: _ThreadHub, rank: int, channel_name: str = "default") -> None:
        self._hub = hub
        self._rank = rank
        self._channel_name = channel_name

    @classmethod
    def create(cls, world_size: int, timeout: float = 30.0) -> list[ThreadRankGroup]:
        """Return one group per rank, ranks 0 .. world_size - 1, sharing their channels."""
        if not is_count(world_size, 1):
            raise ValueError(f"ThreadRankGroup.world_size: must be an int >= 1 (got {world_size!r})")
        hub = _ThreadHub(world_size, timeout)
        return [cls(hub, rank) for rank in range(world_size)]

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._hub.world_size

    def all_reduce_min(self, value: int) -> int:
        """Return the minimum of ``value`` over every rank of this channel."""
        return self._hub.exchange(self._channel_name).reduce_min(self._rank, int(value))

    def all_reduce_min_vector(self, values: tuple[int, ...]) -> tuple[int, ...]:
        """Return the element-wise minimum of ``values`` over every rank of this channel (one exchange)."""
        return self._hub.exchange(self._channel_name).reduce_min(self._rank, tuple(int(v) for v in values))

    def channel(self, name: str) -> ThreadRankGroup:
        """Return the channel ``name`` of this family, for this rank."""
        return ThreadRankGroup(self._hub, self._rank, f"{self._channel_name}/{name}")

    def abort(self) -> None:
        """Break every channel of the family: waiting and later reductions raise RankAgreementError."""
        self._hub.abort()

    def __repr__(self) -> str:
        return f"ThreadRankGroup(rank={self._rank}, world_size={self.world_size}, channel={self._channel_name!r})"


class TorchDistributedRankGroup:
    """An existing ``torch.distributed`` process group (None: the default group).

    The reduction runs on CPU for gloo and on the current CUDA device for
    NCCL, unless ``device`` says otherwise. ``channel`` builds a new group over
    the same ranks with the same backend; like every ``new_group`` call, every
    process of the default group must make it, in the same order.
    """

    def __init__(
        self, group: Any = None, *, device: Optional[torch.device] = None, timeout: Optional[timedelta] = None
    ) -> None:
        import torch.distributed as distributed

        if not distributed.is_available() or not distributed.is_initialized():
            raise RuntimeError("TorchDistributedRankGroup.group: torch.distributed must be initialised first")
        self._distributed = distributed
        self._group = group
        self._timeout = timeout
        self._backend = str(distributed.get_backend(group))
        if device is None:
            device = (
                torch.device("cuda", torch.cuda.current_device()) if self._backend == "nccl" else torch.device("cpu")
            )
        self._device = device
        self._rank = distributed.get_rank(group)
        self._world_size = distributed.get_world_size(group)

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    @property
    def backend(self) -> str:
        """The process group's backend name (``gloo``, ``nccl``)."""
        return self._backend

    def all_reduce_min(self, value: int) -> int:
        """Return the minimum of ``value`` over the group's ranks."""
        tensor = torch.tensor([int(value)], dtype=torch.int64, device=self._device)
        try:
            self._distributed.all_reduce(tensor, op=self._distributed.ReduceOp.MIN, group=self._group)
        except RuntimeError as error:
            raise RankAgreementError(f"TorchDistributedRankGroup.all_reduce_min: {error}") from error
        return int(tensor.item())

    def all_reduce_min_vector(self, values: tuple[int, ...]) -> tuple[int, ...]:
        """Return the element-wise minimum of ``values`` over the group's ranks, in one all-reduce."""
        tensor = torch.tensor([int(value) for value in values], dtype=torch.int64, device=self._device)
        try:
            self._distributed.all_reduce(tensor, op=self._distributed.ReduceOp.MIN, group=self._group)
        except RuntimeError as error:
            raise RankAgreementError(f"TorchDistributedRankGroup.all_reduce_min_vector: {error}") from error
        return tuple(int(value) for value in tensor.tolist())

    def channel(self, name: str) -> TorchDistributedRankGroup:
        """Return a new group over the same ranks with the same backend."""
        distributed = self._distributed
        if self._group is None:
            ranks = list(range(distributed.get_world_size()))
        else:
            ranks = list(distributed.get_process_group_ranks(self._group))
        options: dict[str, Any] = {"backend": self._backend}
        if self._timeout is not None:
            options["timeout"] = self._timeout
        group = distributed.new_group(ranks, **options)
        return TorchDistributedRankGroup(group, device=self._device, timeout=self._timeout)

    def __repr__(self) -> str:
        return f"TorchDistributedRankGroup(rank={self._rank}, world_size={self._world_size}, backend={self._backend!r})"
