"""The suite context: the run's namespace, its keys and pages, the instances it builds and how it calls them.

Safety rules the context enforces:

- every instance it builds has a model name under the run's namespace
  (``<model-name>-conform-<random run id>``, plus a tag per variant), and
  every key is fresh (a SHA-256 over the run id and a counter), so the run
  never reads or overwrites pages it did not write;
- at the end it calls ``clear()`` only on the instances it built, then
  ``close()`` where a backend has one; it never calls ``clear()`` on
  anything else.

Every backend call goes through ``call`` (or ``call_as``): it runs under
the run's deadline (``--timeout``, per call; ``CallTimedOut`` past it), an
exception out of it fails the clause the call serves, and it is written to
the check's transcript (``name(arguments) -> result``), which a failure
shows as the calls that led to it.

Calls follow SGLang's controller for the backend's mode: a backend that
claims v1 moves KV through ``batch_get_v1``/``batch_set_v1`` only (the
legacy methods are never called on it); any other through ``batch_set`` and
``batch_get`` with the host pool's flat pages, as SGLang's generic path
does. KV never travels through v2: v2 IO carries sidecar pools. Lookups go
through ``batch_exists``. A rank that is not the storage writer
(``is_mla_model`` and ``tp_rank != dcp_rank``) never writes KV.

Objects handed to the backend are SGLang's own (``HiCacheStorageConfig``,
``HiCacheStorageExtraInfo``, ``PoolTransfer``, ``PoolName``) when SGLang is
importable, else the contract models, which read the same.
"""

from __future__ import annotations

import contextlib
import collections
import hashlib
import importlib
import inspect
import itertools
import random
from collections.abc import Mapping
from collections.abc import Sequence as SequenceType
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from hicache_spec import STORAGE_BATCH_SIZE
from hicache_contracts.conformance.deadline import DeadlineRunner
from hicache_contracts.conformance.framework import (
    CallTimedOut,
    CheckSkipped,
    ClauseFailure,
    PreconditionFailed,
    fail,
    record_assertions,
)
from hicache_contracts.conformance.loading import BackendFactory
from hicache_contracts.conformance.options import SuiteOptions
from hicache_contracts.conformance.pools import ConformancePool, describe_page_difference, pages_equal
from hicache_contracts.interop import SGLANG_STORAGE_MODULE, to_sglang
from hicache_contracts.sglang_release import resolve_release
from hicache_contracts.models import (
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    pool_value,
)

__all__ = ["FAULT_HOOK", "HOST_POOL_FAULTS", "Instance", "SIDECAR_POOLS", "SuiteContext", "is_storage_writer"]

LAYER_NUM = 2
"""Layers of the suite's KV host pools (small: the bytes matter, not their number)."""
HEAD_NUM = 2
"""Heads per layer of the suite's MHA pools."""
HEAD_DIM = 8
"""Elements per head of the suite's pools (the latent width for MLA)."""
MAIN_POOL_PAGES = 4 * STORAGE_BATCH_SIZE + 8
"""Pages of the main instance's pool: room for two full batches, each with a guard page around every page."""
SIDECAR_POOLS: tuple[PoolName, ...] = (PoolName.INDEXER, PoolName.SWA)
"""The sidecar pools registered for v2 checks besides KV."""
ROUND_TRIP_PAGES = 4
"""Pages of the round trip every check's setup relies on: enough for a read one page off or every third write
dropped to show."""
UNREGISTERED_POOL = PoolName.DRAFT
"""A pool the suite never registers (BE-20)."""
TRANSCRIPT_CALLS = 12
"""How many of a check's last backend calls a failure shows."""
CLEANUP_TIMEOUT_S = 5.0
"""The deadline of clear() and close() at the end of a run whose backend already missed a deadline."""
FAULT_HOOK = "hicache_storage_faults"
"""A backend method returning a context manager inside which the instance's own storage I/O fails as its store
fails (BE-5); the suite's way to provoke a storage error without knowing the store."""
HOST_POOL_FAULTS = "hicache_host_pool_faults"
"""A class attribute a backend sets True to opt into storage errors provoked by the host pool's page helpers
raising OSError (BE-5), for a backend without a fault hook. SGLang's host pools never raise there."""


def is_storage_writer(config: Any) -> bool:
    """Whether SGLang lets this rank write KV: not rank-replicated, or the DCP rank's own TP rank (0.5.23)."""
    return not config.is_mla_model or config.tp_rank == getattr(config, "dcp_rank", 0)


@dataclass
class Instance:
    """One backend instance the suite built, with the host pools it registered."""

    backend: Any
    """The backend object."""
    config: HiCacheStorageConfig
    """Its configuration, as a contract model (the backend received the wire form)."""
    pool: ConformancePool
    """The KV host pool registered with ``register_mem_pool_host``."""
    sidecars: dict[str, ConformancePool] = field(default_factory=dict)
    """Sidecar pools registered with ``register_mem_host_pool_v2``, by pool name."""
    tag: str = "main"
    """How messages name this instance."""

    def pool_for(self, name: Any) -> ConformancePool:
        """Return the host pool of pool ``name`` (KV or a sidecar)."""
        text = pool_value(name)
        return self.pool if text == PoolName.KV.value else self.sidecars[text]


class SuiteContext:
    """What every check receives: options, claimed levels, keys, pages, instances and wrapped calls."""

    def __init__(
        self,
        factory: BackendFactory,
        options: SuiteOptions,
        *,
        claimed: frozenset[str] = frozenset(),
        may_evict: bool = False,
        seed: Optional[int] = None,
        run_id: Optional[str] = None,
    ) -> None:
        self.factory = factory
        """Builds backend instances."""
        self.options = options
        """The run's options."""
        self.profile = options.profile_settings
        """How much work each check does."""
        self.claimed = claimed
        """Levels the backend claims (set by the runner once probing is done)."""
        self.may_evict = may_evict
        """Whether the backend may drop pages it accepted."""
        self.seed = (
            seed
            if seed is not None
            else (options.seed if options.seed is not None else random.SystemRandom().randrange(2**31))
        )
        """The seed of every random choice of the run."""
        self.run_id = run_id or f"{random.SystemRandom().getrandbits(40):010x}"
        """Random per run; part of the model name and of every key."""
        self.model_name = f"{options.model_name}-run-{self.run_id}"
        """The run's model name: the namespace of everything the run writes."""
        self.rng = random.Random(self.seed)
        """Random choices of the checks."""
        self._key_numbers = itertools.count()
        self._labels: dict[str, str] = {}
        self._pages: dict[tuple, torch.Tensor] = {}
        self._instances: list[Instance] = []
        self._main: Optional[Instance] = None
        self._tags = itertools.count()
        self.sglang = _sglang_module(options.sglang_version)
        """SGLang's storage module when importable (its objects are handed to the backend), else None."""
        self.cleanup_notes: list[str] = []
        """What went wrong while cleaning up (reported, never raised)."""
        self._round_trips: dict[int, tuple[Instance, Optional[PreconditionFailed]]] = {}
        """Per instance (by id, held so the id stays its own): how its basic round trip went."""
        self._deadline = DeadlineRunner()
        self.transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_CALLS)
        """The last backend calls of the running check, as ``name(arguments) -> result``."""
        self.timed_out: Optional[CallTimedOut] = None
        """The first call that missed its deadline; once set, every later call fails at once."""

    # ------------------------------------------------------------------ keys
    def new_keys(self, count: int) -> list[str]:
        """Return ``count`` fresh page keys (64 lowercase hex characters), labelled k0, k1, ... in messages."""
        keys = []
        for _ in range(count):
            number = next(self._key_numbers)
            key = hashlib.sha256(f"hicache-conform/{self.run_id}/{number}".encode()).hexdigest()
            self._labels[key] = f"k{number}"
            keys.append(key)
        return keys

    def label(self, key: Any) -> str:
        """Return the short label of a key in messages (``k3``), or its repr if the suite did not make it."""
        return self._labels.get(key, repr(key)) if isinstance(key, str) else repr(key)

    def show(self, value: Any) -> str:
        """Return ``value`` as messages show it: keys by label, tensors by size, infos by their fields."""
        if value is None:
            return "None"
        if isinstance(value, str):
            return self.label(value)
        if isinstance(value, torch.Tensor):
            return f"<{value.numel()} host slots>" if value.dim() == 1 else f"<tensor {tuple(value.shape)}>"
        if hasattr(value, "kv_buffer") and hasattr(value, "page_size"):
            return f"<host pool of {getattr(value, 'page_count', '?')} pages>"
        if isinstance(value, SequenceType) and all(isinstance(item, str) for item in value):
            labels = [self.label(item) for item in value]
            if len(labels) > 6:
                return f"[{', '.join(labels[:3])}, ..., {labels[-1]}] ({len(labels)} keys)"
            return f"[{', '.join(labels)}]"
        if hasattr(value, "prefix_keys"):
            return (
                f"{type(value).__name__}(prefix_keys={self.show(value.prefix_keys)}, "
                f"extra_info={getattr(value, 'extra_info', None)!r})"
            )
        if hasattr(value, "hit_policy") and hasattr(value, "name"):
            return (
                f"PoolTransfer({getattr(value.name, 'value', value.name)}, keys={self.show(value.keys)}, "
                f"{getattr(value.hit_policy, 'value', value.hit_policy)})"
            )
        if isinstance(value, (list, tuple)):
            if len(value) > 6:
                return "[" + ", ".join(self.show(item) for item in value[:3]) + f", ...] ({len(value)} items)"
            return "[" + ", ".join(self.show(item) for item in value) + "]"
        text = repr(value)
        return text if len(text) <= 120 else text[:117] + "..."

    # ------------------------------------------------------------------ pages
    def page_for(self, key: str, pool: ConformancePool, variant: int = 0) -> torch.Tensor:
        """Return the page the suite stores under ``key`` in ``pool``: random, but fixed per key and variant."""
        cache_key = (key, pool.page_element_count, pool.dtype, variant)
        page = self._pages.get(cache_key)
        if page is None:
            digest = hashlib.sha256(f"{self.seed}/{key}/{pool.page_element_count}/{variant}".encode()).digest()
            generator = torch.Generator().manual_seed(int.from_bytes(digest[:7], "little"))
            page = pool.random_page(generator)
            self._pages[cache_key] = page
        return page

    def spread(self, count: int, *, start: int = 0, stride: int = 1) -> list[int]:
        """Return ``count`` page numbers ``start, start + stride, ...`` in a random order."""
        pages = [start + index * stride for index in range(count)]
        self.rng.shuffle(pages)
        return pages

    # ------------------------------------------------------------------ configs and instances
    def config(
        self, *, model_name: Optional[str] = None, extra_config: Any = ..., **overrides: Any
    ) -> HiCacheStorageConfig:
        """Return a configuration under the run's namespace; ``overrides`` replace single-rank defaults."""
        if extra_config is ...:
            extra_config = None if self.factory.extra_config is None else dict(self.factory.extra_config)
        fields: dict[str, Any] = dict(
            tp_rank=0,
            tp_size=1,
            pp_rank=0,
            pp_size=1,
            attn_cp_rank=0,
            attn_cp_size=1,
            is_mla_model=self.options.kind == "mla",
            enable_storage_metrics=False,
            is_page_first_layout=self.options.layout == "page_first",
            model_name=model_name or self.model_name,
            extra_config=extra_config,
        )
        fields.update(overrides)
        return HiCacheStorageConfig(**fields)

    def namespace(self, tag: str) -> str:
        """Return a fresh model name under the run's namespace, tagged ``tag``."""
        return f"{self.model_name}-{tag}{next(self._tags)}"

    def new_pool(
        self, page_count: int, *, kind: Optional[str] = None, layer_num: int = LAYER_NUM, head_num: Optional[int] = None
    ) -> ConformancePool:
        """Return a pool with the run's page size and layout."""
        kind = kind or self.options.kind
        heads = head_num if head_num is not None else (1 if kind == "mla" else HEAD_NUM)
        return ConformancePool(
            page_count=page_count,
            page_size=self.options.page_size,
            layer_num=layer_num,
            head_num=heads,
            head_dim=HEAD_DIM,
            dtype=torch.float16,
            kind=kind,
            layout=self.options.layout,
            pin_memory=False,
        )

    def build(
        self,
        config: Optional[HiCacheStorageConfig] = None,
        *,
        pages: int = 32,
        v2: Optional[bool] = None,
        tag: str = "",
        construct_clause: str = "BE-1",
    ) -> Instance:
        """Build, register and remember an instance for ``config`` (default: the run's main configuration).

        The pool is registered with ``register_mem_pool_host`` right after
        construction; with ``v2`` (default: v2 claimed) KV and the sidecar
        pools are also registered with ``register_mem_host_pool_v2``.
        """
        config = config or self.config()
        wire_config = self.wire(config)
        try:
            backend = self.call_as(construct_clause, f"{self.factory.name}", self.factory.build, wire_config)
        except CallTimedOut:
            raise
        except ClauseFailure as failure:
            error = failure.__cause__ or failure
            hint = ""
            if config.extra_config:
                hint = (
                    " (SGLang builds a dynamic backend as cls(storage_config, {}): the extra config arrives "
                    "in storage_config.extra_config, the second argument is an empty dict)"
                )
            fail(
                construct_clause,
                f"building the backend raised {type(error).__name__}: {error}{hint}",
                f"{self.factory.name}(storage_config=HiCacheStorageConfig({_describe_config(config)}, "
                f"extra_config={dict(config.extra_config) if config.extra_config else None!r}), {{}})",
            )
        pool = self.new_pool(pages, kind="mla" if config.is_mla_model else "mha")  # as SGLang pairs them
        instance = Instance(backend, config, pool, {}, tag or _describe_config(config))
        self._instances.append(instance)
        self.call("BE-24", backend.register_mem_pool_host, pool)
        if self.claims("v2") if v2 is None else v2:
            self.call("BE-24", backend.register_mem_host_pool_v2, pool, self.pool_name(PoolName.KV))
            for name in SIDECAR_POOLS:
                sidecar = self.new_pool(pages, kind="mla", layer_num=1)
                instance.sidecars[name.value] = sidecar
                self.call("BE-24", backend.register_mem_host_pool_v2, sidecar, self.pool_name(name))
        hook = getattr(backend, "on_host_pools_registered", None)
        if callable(hook):  # 0.5.23: once, after the initial registration burst, before any IO
            self.call("BE-27", hook)
        return instance

    @property
    def main(self) -> Instance:
        """The run's main instance (built once, with a pool large enough for every data check)."""
        if self._main is None:
            self._main = self.build(pages=MAIN_POOL_PAGES, tag="main")
        return self._main

    def claims(self, level: str) -> bool:
        """Whether ``level`` is claimed."""
        return level in self.claimed

    @property
    def instances(self) -> tuple[Instance, ...]:
        """Every instance built so far."""
        return tuple(self._instances)

    # ------------------------------------------------------------------ wire objects
    def wire(self, model: Any) -> Any:
        """Return ``model`` as the backend receives it: SGLang's object when SGLang is importable."""
        if self.sglang is None or model is None:
            return model
        return to_sglang(model, storage_module=self.sglang)

    def release_has_fields(self, fields: Any) -> bool:
        """Whether the SGLang release whose objects the backend receives has every config field in ``fields``.

        Always true for the contract models; an older release lacks fields (``dp_rank`` before 0.5.21).
        """
        if self.sglang is None:
            return True
        known = getattr(self.sglang.HiCacheStorageConfig, "__dataclass_fields__", None)
        return known is None or all(name in known for name in fields)

    def pool_name(self, name: PoolName) -> Any:
        """Return ``name`` as SGLang's ``PoolName`` when SGLang is importable, else the contract enum."""
        return name if self.sglang is None else self.sglang.PoolName(name.value)

    def info(self, prefix_keys: Any = None, extra_info: Any = None) -> Any:
        """Return an extra info with these fields, in the backend's wire form."""
        return self.wire(HiCacheStorageExtraInfo(prefix_keys=prefix_keys, extra_info=extra_info))

    def transfer(
        self,
        name: PoolName,
        keys: Sequence[str],
        host_indices: Optional[torch.Tensor] = None,
        *,
        policy: PoolHitPolicy = PoolHitPolicy.ALL_PAGES,
        derived: bool = False,
    ) -> Any:
        """Return a ``PoolTransfer`` in the backend's wire form; ``derived`` makes it a KV-derived sidecar."""
        model = PoolTransfer(
            name=name,
            keys=list(keys),
            host_indices=host_indices,
            hit_policy=policy,
            indices_from_pool=PoolName.KV if derived else None,
        )
        return self.wire(model)

    # ------------------------------------------------------------------ calls
    def call(self, clause_id: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a backend method under the deadline; an exception out of it is a failure of ``clause_id``."""
        return self.call_as(clause_id, getattr(function, "__name__", "call"), function, *args, **kwargs)

    def call_as(self, clause_id: str, name: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call``, showing the call as ``name(...)`` (for a function whose own name says nothing)."""
        shown = self.describe_named(name, args, kwargs)
        if self.timed_out is not None:
            raise CallTimedOut(clause_id, shown, self.options.timeout_s)
        try:
            finished, value = self._deadline.run(function, args, kwargs, self.options.timeout_s)
        except ClauseFailure:
            raise
        except Exception as error:
            self.transcript.append(f"{shown} raised {type(error).__name__}: {error}")
            if isinstance(error, TypeError) and not _accepts(function, args, kwargs) and _takes_extra_info(name):
                raise ClauseFailure(
                    "BE-8",
                    f"{shown} raised {type(error).__name__}: {error}; its signature does "
                    "not take extra_info the way SGLang passes it",
                ) from error
            raise ClauseFailure(clause_id, f"{shown} raised {type(error).__name__}: {error}") from error
        if not finished:
            self.timed_out = CallTimedOut(clause_id, shown, self.options.timeout_s)
            self.transcript.append(f"{shown} -> did not return within {self.options.timeout_s:g} s")
            raise self.timed_out
        self.transcript.append(f"{shown} -> {self.show(value)}")
        return value

    def begin_check(self) -> None:
        """Start a fresh transcript and record of asserted clauses (the runner calls this before each check)."""
        self.transcript.clear()
        self.asserted = record_assertions()

    def describe_call(self, function: Any, args: Sequence[Any], kwargs: Optional[dict] = None) -> str:
        """Return ``name(arguments)`` as messages show a call."""
        return self.describe_named(getattr(function, "__name__", "call"), args, kwargs)

    def describe_named(self, name: str, args: Sequence[Any], kwargs: Optional[dict] = None) -> str:
        """Return ``name(arguments)`` with the arguments as messages show them."""
        parts = [self.show(argument) for argument in args]
        parts += [f"{key}={self.show(value)}" for key, value in (kwargs or {}).items()]
        return f"{name}({', '.join(parts)})"

    # ------------------------------------------------------------------ data paths
    def io_path(self) -> str:
        """How checks move pages: ``v1`` when v1 is claimed, else ``legacy``."""
        return "v1" if self.claims("v1") else "legacy"

    def write(
        self,
        instance: Instance,
        keys: Sequence[str],
        *,
        pages: Optional[Sequence[int]] = None,
        info: Any = None,
        variant: int = 0,
        path: Optional[str] = None,
        clause_id: str = "BE-17",
    ) -> list[bool]:
        """Write the suite's page for each key; return one success flag per key.

        The pages are placed in host pages ``pages`` (default: the first
        ones); v1 writes them with ``batch_set_v1``, legacy with one
        ``batch_set`` of the host pool's flat pages, as SGLang's generic path
        does (its one bool stands for every page). A call that raises is a
        failure of ``clause_id``. A rank that is not the storage writer is
        never asked to write KV, as SGLang never asks it.
        """
        keys = list(keys)
        backend, pool = instance.backend, instance.pool
        if not is_storage_writer(instance.config):
            raise RuntimeError(f"suite bug: {instance.tag} is not the storage writer; SGLang never writes KV there")
        pages = list(pages) if pages is not None else list(range(len(keys)))
        for key, page in zip(keys, pages):
            pool.poke(page, self.page_for(key, pool, variant))
        if (path or self.io_path()) == "legacy":
            if not keys:
                return []
            values = [pool.peek(page) for page in pages]
            outcome = self.call(clause_id, backend.batch_set, keys, values)
            return [outcome is True] * len(keys)
        raw = self.call(clause_id, backend.batch_set_v1, keys, pool.slots(pages), info)
        return self.v1_flags(raw, keys, "batch_set_v1")

    def read(
        self,
        instance: Instance,
        keys: Sequence[str],
        *,
        pages: Optional[Sequence[int]] = None,
        info: Any = None,
        path: Optional[str] = None,
        clause_id: str = "BE-15",
    ) -> list[Optional[torch.Tensor]]:
        """Read each key; return the page read (bytes as they landed) or None for a miss.

        v1 reads into host pages ``pages`` with ``batch_get_v1``; legacy
        calls ``batch_get`` with one dummy flat page per key, as SGLang's
        generic path does, and takes what it returns (None for a miss).
        """
        keys = list(keys)
        backend, pool = instance.backend, instance.pool
        if (path or self.io_path()) == "legacy":
            if not keys:
                return []
            targets = [torch.zeros(pool.page_element_count, dtype=pool.dtype) for _ in keys]
            values = self.call(clause_id, backend.batch_get, keys, targets)
            if values is None:
                return [None] * len(keys)
            if not isinstance(values, (list, tuple)) or len(values) != len(keys):
                fail(
                    "BE-9",
                    f"batch_get must return one tensor-or-None per key ({len(keys)}), got {self.show(values)}",
                    f"batch_get({self.show(keys)}, <{len(keys)} flat pages>) -> {self.show(values)}",
                )
            return [value if isinstance(value, torch.Tensor) else None for value in values]
        pages = list(pages) if pages is not None else list(range(len(keys)))
        pool.fill(pages)
        raw = self.call(clause_id, backend.batch_get_v1, keys, pool.slots(pages), info)
        flags = self.v1_flags(raw, keys, "batch_get_v1")
        return [pool.peek(page) if flag else None for flag, page in zip(flags, pages)]

    def v1_flags(self, raw: Any, keys: Sequence[str], method: str) -> list[bool]:
        """Return a v1 result as a list of bools; fail BE-14 unless it is a list of exactly len(keys) bools."""
        if not isinstance(raw, (list, tuple)) or len(raw) != len(keys):
            shown = f"{len(raw)} entries" if isinstance(raw, (list, tuple)) else repr(raw)
            fail(
                "BE-14",
                f"{method} must return a list of exactly len(keys) = {len(keys)} bools, got {shown}",
                f"{method}({self.show(list(keys))}, ...) -> {self.show(raw)}",
            )
        return [bool(item) for item in raw]

    def v2_flags(self, raw: Any, transfers: Sequence[Any], method: str) -> dict[str, list[bool]]:
        """Return a v2 get/set result by pool name; fail BE-19 unless it has exactly one entry per
        transfer name, each a list of len(keys) bools."""
        shown = f"{method}({self.show(list(transfers))}) -> {self.show(raw)}"
        if not isinstance(raw, Mapping):
            fail("BE-19", f"{method} must return a dict of pool name -> list of bools, got {type(raw).__name__}", shown)
        by_name = {pool_value(name): flags for name, flags in raw.items()}
        expected = {pool_value(item.name): len(item.keys or ()) for item in transfers}
        for name, length in expected.items():
            flags = by_name.get(name)
            if flags is None:
                fail("BE-19", f"{method} left pool {name!r} out of its result", shown)
            if not isinstance(flags, (list, tuple)) or len(flags) != length:
                got = f"{len(flags)} entries" if isinstance(flags, (list, tuple)) else repr(flags)
                fail(
                    "BE-19", f"{method} must give pool {name!r} a list of len(keys) = {length} bools, got {got}", shown
                )
        unexpected = sorted(set(by_name) - set(expected))
        if unexpected:
            fail("BE-19", f"{method} returned entries for pools it was not asked about: {unexpected}", shown)
        return {name: [bool(flag) for flag in by_name[name]] for name in expected}

    def count(self, instance: Instance, keys: Sequence[str], info: Any = None, *, clause_id: str = "BE-2") -> int:
        """Return ``batch_exists(keys, info)``; fail BE-2 unless it is an int in [0, len(keys)]."""
        raw = self.call(clause_id, instance.backend.batch_exists, list(keys), info)
        if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= len(keys):
            fail(
                "BE-2",
                f"batch_exists must return an int n with 0 <= n <= len(keys) = {len(keys)}, got {raw!r}",
                f"batch_exists({self.show(list(keys))}) -> {raw!r}",
            )
        return raw

    def found(self, instance: Instance, keys: Sequence[str], *, clause_id: str = "BE-2") -> list[bool]:
        """Return, per key, whether ``batch_exists([key])`` finds it (the lookup SGLang makes)."""
        return [self.count(instance, [key], clause_id=clause_id) == 1 for key in keys]

    def exists_flags(self, instance: Instance, keys: Sequence[str], *, clause_id: str = "BE-4") -> list[bool]:
        """Return, per key, what legacy ``exists`` says (only for a backend not claiming v1)."""
        return [bool(self.call(clause_id, instance.backend.exists, key)) for key in keys]

    @contextlib.contextmanager
    def storage_faults(self, instance: Instance) -> Iterator[str]:
        """Make the instance's storage fail inside the block, the way its store fails; yield how.

        Through the backend's own fault hook (``hicache_storage_faults()``)
        where it offers one; else through the host pool's page helpers where
        the backend opts in (``hicache_host_pool_faults = True``); else the
        check is skipped: SGLang's host pools never raise, so breaking them
        would test something SGLang never does.
        """
        hook = getattr(instance.backend, FAULT_HOOK, None)
        if callable(hook):
            manager = self.call("BE-5", hook)
            with manager:
                yield f"inside {FAULT_HOOK}()"
            return
        if getattr(instance.backend, HOST_POOL_FAULTS, False) is True:
            with instance.pool.failing():
                yield "while every page helper of the host pool raises OSError (opted in)"
            return
        raise CheckSkipped(
            f"the backend offers no fault hook: define {FAULT_HOOK}() (a context manager inside "
            f"which its storage I/O fails) or set {HOST_POOL_FAULTS} = True (see docs/vendors.md)"
        )

    def same_page(self, key: str, pool: ConformancePool, page: Optional[torch.Tensor], variant: int = 0) -> bool:
        """Whether ``page`` holds exactly the suite's page for ``key``."""
        return pages_equal(self.page_for(key, pool, variant), page)

    def store(self, instance: Instance, keys: Sequence[str], **write_options: Any) -> None:
        """Write the pages a check needs, as its setup: they must read back, or the check cannot look.

        The check is skipped when the backend refuses any page (set returned
        False). On the v1 path the pages are then read back into the same
        host pages (overwritten first): a page whose set returned True but
        does not read back raises ``PreconditionFailed`` on BE-17 (unless the
        backend may evict), one that reads back wrong bytes on BE-15, and a
        result of the wrong shape on BE-14. Before that, whatever the path,
        the instance's basic v1 round trip (``require_round_trip``) must work.
        """
        keys = list(keys)
        path = write_options.get("path") or self.io_path()
        self.require_round_trip(instance)
        with self.setup_step():
            results = self.write(instance, keys, **write_options)
        if not all(results):
            refused = [self.label(key) for key, ok in zip(keys, results) if not ok]
            raise CheckSkipped(
                f"the backend refused to store pages the check needs (set returned False for "
                f"{', '.join(refused[:4])}{', ...' if len(refused) > 4 else ''}); nothing to check"
            )
        if path == "v1":
            pages = write_options.get("pages")
            pages = list(pages) if pages is not None else list(range(len(keys)))
            self.verify_stored(
                instance, keys, pages, info=write_options.get("info"), variant=write_options.get("variant", 0)
            )

    def verify_stored(
        self, instance: Instance, keys: Sequence[str], pages: Sequence[int], *, info: Any = None, variant: int = 0
    ) -> None:
        """Read ``keys`` back through v1 into host ``pages``; raise ``PreconditionFailed`` on BE-17 or BE-15
        unless each holds exactly the suite's page (a miss is allowed when the backend may evict)."""
        pool = instance.pool
        pool.fill(pages, value=-1.0)  # what lands can only come from storage
        shown = f"batch_set_v1 then batch_get_v1 of {self.show(list(keys))} into the same host pages {list(pages)}"
        with self.setup_step():
            read = self.read(instance, keys, pages=pages, info=info, path="v1")
        for index, (key, page) in enumerate(zip(keys, read)):
            expected = self.page_for(key, pool, variant)
            if page is None:
                if not self.may_evict:
                    raise PreconditionFailed(
                        "BE-17",
                        f"batch_set_v1 returned True for {self.label(key)} but batch_get_v1 cannot read it back",
                        shown,
                    )
                pool.poke(pages[index], expected)  # leave the host page as the write found it
            elif not pages_equal(expected, page):
                raise PreconditionFailed(
                    "BE-15",
                    f"batch_get_v1 returned True for {self.label(key)} (page {index} "
                    f"of {len(keys)}) but its slots hold "
                    f"{describe_page_difference(expected, page)}",
                    shown,
                )

    def require_round_trip(self, instance: Instance) -> None:
        """Check once per instance that a batch of ``ROUND_TRIP_PAGES`` pages written from host pages reads back
        bit for bit and is counted by batch_exists; raise ``PreconditionFailed`` whenever it did not: on BE-14,
        BE-15 or BE-17 through v1, on BE-9 through the legacy batch_set/batch_get (a backend without v1), on
        BE-2 for the count.

        Checks whose subject is something else (a key form, a batch size, a
        rank) call this before moving pages, so that a broken basic read or
        write is reported on its own clause instead of theirs. A backend
        that refuses the round trip's pages is not held to it here.
        """
        path = self.io_path()
        if id(instance) in self._round_trips:
            known = self._round_trips[id(instance)][1]
            if known is not None:
                raise PreconditionFailed(known.clause_id, known.message, known.counterexample)
            return
        keys = self.new_keys(ROUND_TRIP_PAGES)
        pages = self.spread(ROUND_TRIP_PAGES)
        try:
            with self.setup_step():
                results = self.write(instance, keys, pages=pages, path=path)
            stored = [(key, page) for key, page, ok in zip(keys, pages, results) if ok]
            if stored:
                if path == "v1":
                    self.verify_stored(instance, [key for key, _ in stored], [page for _, page in stored])
                else:
                    self.verify_stored_legacy(instance, [key for key, _ in stored])
                if len(stored) == len(keys):  # every page reads back: batch_exists must count them all
                    with self.setup_step():
                        counted = self.count(instance, keys)
                    if counted != len(keys):
                        read = "batch_get_v1" if path == "v1" else "batch_get"
                        # none found: the lookup looks where the write did not put them, a key scheme of its own
                        root = "NS-6" if counted == 0 else "BE-2"
                        raise PreconditionFailed(
                            root,
                            f"batch_exists counts {counted} of {len(keys)} pages that {read} reads back",
                            f"the write, then batch_exists({self.show(keys)}) -> {counted}",
                        )
        except PreconditionFailed as failure:
            self._round_trips[id(instance)] = (instance, failure)
            raise
        self._round_trips[id(instance)] = (instance, None)

    def verify_stored_legacy(self, instance: Instance, keys: Sequence[str], *, variant: int = 0) -> None:
        """Read ``keys`` back through the legacy batch_get; raise ``PreconditionFailed`` on BE-9 unless each is
        exactly the suite's page (a miss is allowed when the backend may evict)."""
        shown = f"batch_set then batch_get of {self.show(list(keys))}"
        with self.setup_step():
            read = self.read(instance, keys, path="legacy")
        for key, page in zip(keys, read):
            expected = self.page_for(key, instance.pool, variant)
            if page is None and not self.may_evict:
                raise PreconditionFailed(
                    "BE-9", f"batch_set returned True for {self.label(key)} but batch_get gives None for it", shown
                )
            if page is not None and not pages_equal(expected, page):
                raise PreconditionFailed(
                    "BE-9", f"batch_get gives {self.label(key)} as {describe_page_difference(expected, page)}", shown
                )

    @contextlib.contextmanager
    def setup_step(self) -> Iterator[None]:
        """Turn a ``ClauseFailure`` raised inside into ``PreconditionFailed`` on the same clause."""
        try:
            yield
        except ClauseFailure as failure:
            raise PreconditionFailed(failure.clause_id, failure.message, failure.counterexample) from None

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        """Clear every instance the run built (its own namespaces only), then close those that can close.

        Each call runs under the deadline (a short one once the backend has
        missed a deadline); what goes wrong is noted, never raised.
        """
        timeout = self.options.timeout_s if self.timed_out is None else min(self.options.timeout_s, CLEANUP_TIMEOUT_S)
        for method in ("clear", "close"):
            for instance in reversed(self._instances):
                function = getattr(instance.backend, method, None)
                if not callable(function):
                    continue
                try:
                    finished, _ = self._deadline.run(function, (), {}, timeout)
                except Exception as error:  # reported by BE-11's check; cleanup goes on
                    self.cleanup_notes.append(f"{method}() on {instance.tag} raised {type(error).__name__}: {error}")
                    continue
                if not finished:
                    self.cleanup_notes.append(
                        f"{method}() on {instance.tag} did not return within {timeout:g} s; cleanup stopped there"
                    )
                    self._instances.clear()
                    break
        self._instances.clear()
        self._main = None
        self._deadline.close()

    def forget(self, instance: Instance) -> None:
        """Stop tracking ``instance`` (the caller cleared and closed it)."""
        if instance in self._instances:
            self._instances.remove(instance)


def _accepts(function: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``function``'s signature binds these arguments (True when it cannot be read)."""
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def _takes_extra_info(name: str) -> bool:
    return name in ("batch_exists", "batch_get_v1", "batch_set_v1", "batch_exists_v2", "batch_get_v2", "batch_set_v2")


def _sglang_module(choice: Optional[str]) -> Any:
    """Return the storage module of the release ``choice`` selects (see ``SuiteOptions.sglang_version``), or None.

    Raises ReleaseError when the choice cannot be honoured (the CLI checks it before running).
    """
    if resolve_release(choice) is None:
        return None
    return importlib.import_module(SGLANG_STORAGE_MODULE)


def _describe_config(config: HiCacheStorageConfig) -> str:
    parts = [f"model_name={config.model_name!r}"]
    for rank, size in (("tp_rank", "tp_size"), ("pp_rank", "pp_size"), ("attn_cp_rank", "attn_cp_size")):
        if getattr(config, size) != 1:
            parts.append(f"{rank}={getattr(config, rank)}/{getattr(config, size)}")
    if config.is_mla_model:
        parts.append("is_mla_model=True")
    return ", ".join(parts)
