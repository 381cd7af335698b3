"""The backend instances a run builds: their configurations, host pools and registration, and their cleanup.

Every instance has a model name under the run's namespace; at the end the
run calls ``clear()`` only on the instances it built, then ``close()`` where
a backend has one, and never ``clear()`` on anything else.
"""

from __future__ import annotations

import contextlib
import inspect
import signal
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import torch

from hicache_spec import KV, STORAGE_BATCH_SIZE
from hicache_contracts.conformance.session.calls import Calls
from hicache_contracts.conformance.framework import CallTimedOut, ClauseFailure, fail
from hicache_contracts.conformance.session.loading import BackendFactory
from hicache_contracts.conformance.session.names import Names
from hicache_contracts.conformance.session.options import SuiteOptions
from hicache_contracts.conformance.session.pools import ConformancePool, mamba_state_pool
from hicache_contracts.conformance.session.release_pools import (
    LAYOUTS as RELEASE_LAYOUTS,
    release_host_pool,
    release_pools_available,
)
from hicache_contracts.conformance.session.wire import Wire
from hicache_contracts.models import HiCacheStorageConfig, PoolName, pool_value

__all__ = [
    "BuiltInstances",
    "HEAD_DIM",
    "HEAD_NUM",
    "HYBRID_POOLS",
    "Instance",
    "Instances",
    "LAYER_NUM",
    "MAIN_POOL_PAGES",
    "SIDECAR_POOLS",
    "UNREGISTERED_POOL",
]

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
HYBRID_POOLS: tuple[PoolName, ...] = (PoolName.MAMBA,)
"""The sidecar pools a hybrid model adds, registered where a check asks for them (``build(hybrid=True)``): a Mamba
state pool (``pools.mamba_state_pool``)."""
UNREGISTERED_POOL = PoolName.DRAFT
"""A pool the suite never registers (BE-20)."""


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


class BuiltInstances:
    """Every instance a run built, in build order; ``close`` clears and closes them."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        """Runs the cleanup calls under their deadline."""
        self.cleanup_notes: list[str] = []
        """What went wrong while cleaning up (reported, never raised)."""
        self._instances: list[Instance] = []

    @property
    def instances(self) -> tuple[Instance, ...]:
        """Every instance built so far."""
        return tuple(self._instances)

    def add(self, instance: Instance) -> None:
        """Track ``instance`` (cleared and closed at the end)."""
        self._instances.append(instance)

    def forget(self, instance: Instance) -> None:
        """Stop tracking ``instance`` (the caller cleared and closed it)."""
        if instance in self._instances:
            self._instances.remove(instance)

    def close(self) -> None:
        """Clear every instance the run built (its own namespaces only), then close those that can close.

        Each call runs under the deadline (a short one once the backend has
        missed a deadline); what goes wrong is noted, never raised.
        """
        timeout = self.calls.cleanup_timeout_s
        for method in ("clear", "close"):
            for instance in reversed(self._instances):
                function = getattr(instance.backend, method, None)
                if not callable(function):
                    continue
                try:
                    finished = self.calls.cleanup(function, timeout)
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
        self.calls.close()


class Instances:
    """Builds instances under the run's namespace (``config``, ``new_pool``, ``build``, ``main``)."""

    def __init__(
        self,
        factory: BackendFactory,
        options: SuiteOptions,
        names: Names,
        wire: Wire,
        built: BuiltInstances,
        *,
        register_v2: bool,
    ) -> None:
        self.factory = factory
        """Builds backend instances."""
        self.options = options
        """The run's options (page size, layout, kind)."""
        self.names = names
        """The run's namespaces."""
        self.wire = wire
        """The configuration's wire form."""
        self.built = built
        """Where built instances are tracked; its calls run every call here."""
        self.register_v2 = register_v2
        """Whether ``build`` registers the v2 pools unless told (v2 claimed)."""
        self._main: Optional[Instance] = None

    @property
    def calls(self) -> Calls:
        """The run's backend calls."""
        return self.built.calls

    def config(
        self, *, model_name: Optional[str] = None, extra_config: Any = ..., **overrides: Any
    ) -> HiCacheStorageConfig:
        """Return a configuration under the run's namespace; ``overrides`` replace single-rank defaults."""
        if extra_config is ...:
            extra_config = None if self.factory.extra_config is None else dict(self.factory.extra_config)
        fields: dict[str, Any] = dict(
            is_mla_model=self.options.kind == "mla",
            is_page_first_layout=self.options.layout == "page_first",
            extra_config=extra_config,
        )
        fields.update(overrides)
        return HiCacheStorageConfig.single_rank(model_name or self.names.model_name, **fields)

    def new_pool(
        self,
        page_count: int,
        *,
        kind: Optional[str] = None,
        layer_num: int = LAYER_NUM,
        head_num: Optional[int] = None,
        label: str = KV,
        layout: Optional[str] = None,
        dtype: torch.dtype = torch.float16,
        page_size: Optional[int] = None,
    ) -> ConformancePool:
        """Return a pool with the run's page size and layout (unless ``page_size`` or ``layout`` say otherwise): the
        release's own host-pool class when one is loaded."""
        kind = kind or self.options.kind
        heads = head_num if head_num is not None else (1 if kind == "mla" else HEAD_NUM)
        layout = layout or self.options.layout
        page_size = page_size or self.options.page_size
        if self.wire.sglang is not None and layout in RELEASE_LAYOUTS and release_pools_available():
            pool: ConformancePool = release_host_pool(
                kind=kind,
                layout=layout,
                pages=page_count,
                page_size=page_size,
                layer_num=layer_num,
                head_num=heads,
                head_dim=HEAD_DIM,
                dtype=dtype,
                label=label,
            )
            return pool
        return ConformancePool(
            page_count=page_count,
            page_size=page_size,
            layer_num=layer_num,
            head_num=heads,
            head_dim=HEAD_DIM,
            dtype=dtype,
            kind=kind,
            layout=layout,
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
        pool: Optional[ConformancePool] = None,
        label: str = "",
        hybrid: bool = False,
    ) -> Instance:
        """Build, register and remember an instance for ``config`` (default: the run's main configuration).

        The pool (``pool``, else a new one of ``pages`` pages as SGLang pairs it with the configuration) is
        registered with ``register_mem_pool_host`` right after construction; with ``v2`` (default: ``register_v2``) KV and the sidecar
        pools are also registered with ``register_mem_host_pool_v2``, with ``hybrid`` the hybrid model's pools
        (``HYBRID_POOLS``) too. With ``label``, the check's transcript names the instance so on its construction
        and each of its calls.
        """
        config = config or self.config()
        calls = self.calls
        wire_config = self.wire.form(config)
        try:
            backend = self._construct(construct_clause, wire_config)
        except CallTimedOut:
            raise
        except ClauseFailure as failure:
            error = failure.__cause__ or failure
            hint = self._signature_hint(error, wire_config)
            fail(
                construct_clause,
                f"building the backend raised {type(error).__name__}: {error}{hint}",
                f"{self.factory.name}(storage_config=HiCacheStorageConfig({describe_config(config)}, "
                f"extra_config={dict(config.extra_config) if config.extra_config else None!r}), {{}})",
            )
        if label:
            calls.label(backend, label)
            if calls.transcript:  # the construction's own line, just written
                calls.transcript[-1] = f"{label}: {calls.transcript[-1]}"
        kind = "mla" if config.is_mla_model else "mha"
        pool = pool if pool is not None else self.new_pool(pages, kind=kind)  # as SGLang pairs them
        instance = Instance(backend, config, pool, {}, tag or describe_config(config))
        self.built.add(instance)
        calls.call("BE-24", backend.register_mem_pool_host, pool)
        if self.register_v2 if v2 is None else v2:
            calls.call("BE-24", backend.register_mem_host_pool_v2, pool, self.wire.pool_name(PoolName.KV))
            for name in SIDECAR_POOLS:
                sidecar = self.new_pool(pages, kind=sidecar_kind(name, kind, self.wire), layer_num=1, label=name.value)
                instance.sidecars[name.value] = sidecar
                calls.call("BE-24", backend.register_mem_host_pool_v2, sidecar, self.wire.pool_name(name))
            for name in HYBRID_POOLS if hybrid else ():
                state = mamba_state_pool(pages, layer_num=LAYER_NUM, layout=self.options.layout)
                instance.sidecars[name.value] = state
                calls.call("BE-24", backend.register_mem_host_pool_v2, state, self.wire.pool_name(name))
        hook = getattr(backend, "on_host_pools_registered", None)
        if callable(hook):  # 0.5.23: once, after the initial registration burst, before any IO
            calls.call("BE-27", hook)
        return instance

    def _signature_hint(self, error: BaseException, wire_config: Any) -> str:
        """Return the hint on how SGLang calls a dynamic backend's constructor, where it explains ``error``.

        It applies only when the constructor does not take SGLang's two positional arguments: its signature
        cannot bind ``(storage_config, {})``, or (a callable without a readable signature) the call itself raised
        a TypeError before any of the backend's code ran. Any other construction error is the backend's own.
        """
        target = self.factory.target
        try:
            signature: Optional[inspect.Signature] = inspect.signature(target)
        except (TypeError, ValueError):
            signature = None
        if signature is not None:
            try:
                signature.bind(wire_config, dict(self.factory.kwargs))
            except TypeError:
                shown = f"the constructor's signature {signature.replace(return_annotation=inspect.Signature.empty)}"
            else:
                return ""
        elif isinstance(error, TypeError) and _raised_by_the_call(error):
            shown = "the constructor"
        else:
            return ""
        return (
            f" (SGLang builds a dynamic backend as cls(storage_config, {{}}), two positional arguments, and {shown} "
            "does not take them: the extra config arrives in storage_config.extra_config, the second argument is "
            "an empty dict)"
        )

    def _construct(self, clause_id: str, wire_config: Any) -> Any:
        """Build a backend as SGLang does: on the main thread (a constructor may install signal handlers).

        Off the main thread (the suite run from a worker) it is built under the deadline as any call.
        """
        calls = self.calls
        if threading.current_thread() is not threading.main_thread():
            return calls.call_as(clause_id, f"{self.factory.name}", self.factory.build, wire_config)
        shown = calls.names.describe_named(self.factory.name, (wire_config,), {})
        if calls.timed_out is not None:
            raise CallTimedOut(clause_id, shown, calls.timeout_s)
        try:
            with _alarm(calls.timeout_s):
                backend = self.factory.build(wire_config)
        except _ConstructionTimedOut:
            calls.timed_out = CallTimedOut(clause_id, shown, calls.timeout_s)
            calls.transcript.append(f"{shown} -> did not return within {calls.timeout_s:g} s")
            raise calls.timed_out from None
        except Exception as error:
            calls.transcript.append(f"{shown} raised {type(error).__name__}: {error}")
            raise ClauseFailure(clause_id, f"{shown} raised {type(error).__name__}: {error}") from error
        calls.transcript.append(f"{shown} -> {calls.names.show(backend)}")
        return backend

    @property
    def main(self) -> Instance:
        """The run's main instance (built once, with a pool large enough for every data check)."""
        if self._main is None:
            self._main = self.build(pages=MAIN_POOL_PAGES, tag="main")
        return self._main

    @property
    def instances(self) -> tuple[Instance, ...]:
        """Every instance built so far."""
        return self.built.instances

    def forget(self, instance: Instance) -> None:
        """Stop tracking ``instance`` (the caller cleared and closed it)."""
        self.built.forget(instance)


def describe_config(config: HiCacheStorageConfig) -> str:
    """Return the fields of ``config`` a message names: its model name, the ranks of groups over one, MLA."""
    parts = [f"model_name={config.model_name!r}"]
    for rank, size in (("tp_rank", "tp_size"), ("pp_rank", "pp_size"), ("attn_cp_rank", "attn_cp_size")):
        if getattr(config, size) != 1:
            parts.append(f"{rank}={getattr(config, rank)}/{getattr(config, size)}")
    if config.is_mla_model:
        parts.append("is_mla_model=True")
    return ", ".join(parts)


def sidecar_kind(name: PoolName, model_kind: str, wire: Wire) -> str:
    """Return the host-pool kind of sidecar ``name`` for a model of ``model_kind``.

    With a release loaded, as the release builds it: an MHA model's SWA pool is an MHA pool
    (``pool_host/mha.py``), an MLA model's an MLA one; the indexer's rows are one latent-like row per
    token (MLA-shaped). The stand-in builds every sidecar MLA-shaped.
    """
    if wire.sglang is not None and name == PoolName.SWA and release_pools_available():
        return model_kind
    return "mla"


def _raised_by_the_call(error: BaseException) -> bool:
    """Whether ``error`` was raised by calling the backend's constructor, not inside it: its traceback ends in
    the factory's own frame (binding the arguments fails before any frame of the backend runs)."""
    frame = error.__traceback__
    if frame is None:
        return False
    while frame.tb_next is not None:
        frame = frame.tb_next
    return frame.tb_frame.f_code is BackendFactory.build.__code__


class _ConstructionTimedOut(BaseException):
    """Raised in the main thread when a constructor outlives the run's per-call deadline (``_alarm``)."""


@contextlib.contextmanager
def _alarm(timeout_s: float) -> Iterator[None]:
    """Raise ``_ConstructionTimedOut`` in the main thread after ``timeout_s`` seconds (a real-time timer), so a
    constructor built where SGLang builds it, on the main thread, still cannot hold the run: a wait in Python
    (a lock, a sleep, a socket) is interrupted. A constructor stuck in native code is bounded by the command's
    process isolation instead. The previous SIGALRM handler and timer are restored."""
    if not hasattr(signal, "setitimer") or timeout_s <= 0:
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise _ConstructionTimedOut()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
