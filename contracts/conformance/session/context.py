"""The suite context: what every check receives, built once the backend's levels are decided.

    suite.names      fresh keys and namespaces; how messages show keys, values and calls
    suite.pages      the page each key holds (fixed per seed), random page numbers
    suite.wire       the objects handed to the backend (SGLang's own when importable)
    suite.calls      backend calls under the deadline, written to the check's transcript
    suite.instances  configurations, host pools, the instances built (``main`` among them)
    suite.io         writes, reads, lookups and the setup writes a check relies on

Safety rules the context enforces:

- every instance it builds has a model name under the run's namespace
  (``<model-name>-conform-<random run id>``, plus a tag per variant), and
  every key is fresh (a SHA-256 over the run id and a counter), so the run
  never reads or overwrites pages it did not write;
- at the end it calls ``clear()`` only on the instances it built, then
  ``close()`` where a backend has one; it never calls ``clear()`` on
  anything else.

Every backend call goes through ``suite.calls.call`` (or ``call_as``): it
runs under the run's deadline (``--timeout``, per call; ``CallTimedOut``
past it), an exception out of it fails the clause the call serves, and it is
written to the check's transcript (``name(arguments) -> result``), which a
failure shows as the calls that led to it.
"""

from __future__ import annotations

import random
from typing import Optional

from hicache_contracts.conformance.session.calls import CLEANUP_TIMEOUT_S, TRANSCRIPT_CALLS, Calls
from hicache_contracts.conformance.session.contents import Pages
from hicache_contracts.conformance.session.instances import (
    HEAD_DIM,
    HEAD_NUM,
    LAYER_NUM,
    MAIN_POOL_PAGES,
    SIDECAR_POOLS,
    UNREGISTERED_POOL,
    BuiltInstances,
    Instance,
    Instances,
)
from hicache_contracts.conformance.session.loading import BackendFactory
from hicache_contracts.conformance.session.names import Names
from hicache_contracts.conformance.session.options import SuiteOptions
from hicache_contracts.conformance.session.page_io import (
    FAULT_HOOK,
    HOST_POOL_FAULTS,
    ROUND_TRIP_PAGES,
    PageIO,
    is_storage_writer,
)
from hicache_contracts.conformance.session.wire import Wire, sglang_module

__all__ = [
    "CLEANUP_TIMEOUT_S",
    "FAULT_HOOK",
    "HEAD_DIM",
    "HEAD_NUM",
    "HOST_POOL_FAULTS",
    "Instance",
    "LAYER_NUM",
    "MAIN_POOL_PAGES",
    "ROUND_TRIP_PAGES",
    "SIDECAR_POOLS",
    "Session",
    "SuiteContext",
    "TRANSCRIPT_CALLS",
    "UNREGISTERED_POOL",
    "is_storage_writer",
]


class Session:
    """One run's identity and the parts it shares before its levels are known (probing builds through it)."""

    def __init__(
        self,
        factory: BackendFactory,
        options: SuiteOptions,
        *,
        seed: Optional[int] = None,
        run_id: Optional[str] = None,
    ) -> None:
        self.factory = factory
        """Builds backend instances."""
        self.options = options
        """The run's options."""
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
        self.names = Names(self.run_id, self.model_name)
        """Fresh keys and namespaces, and how messages show things."""
        self.pages = Pages(self.seed)
        """The pages written and the checks' random choices."""
        self.wire = Wire(sglang_module(options.sglang_version))
        """The objects handed to the backend."""
        self.calls = Calls(self.names, options.timeout_s)
        """Every backend call, under the deadline."""
        self.built = BuiltInstances(self.calls)
        """Every instance the run built (cleared and closed by ``close``)."""

    def instances(self, *, register_v2: bool) -> Instances:
        """Return a builder of instances tracked by this session; ``register_v2``: its default for v2 pools."""
        return Instances(self.factory, self.options, self.names, self.wire, self.built, register_v2=register_v2)

    def close(self) -> None:
        """Clear and close every instance the run built; what goes wrong lands in ``built.cleanup_notes``."""
        self.built.close()


class SuiteContext:
    """What every check receives: options, claimed levels and the run's collaborators."""

    def __init__(self, session: Session, *, claimed: frozenset[str], may_evict: bool) -> None:
        self.factory = session.factory
        """Builds backend instances."""
        self.options = session.options
        """The run's options."""
        self.profile = session.options.profile_settings
        """How much work each check does."""
        self.claimed = claimed
        """Levels the backend claims."""
        self.may_evict = may_evict
        """Whether the backend may drop pages it accepted."""
        self.seed = session.seed
        """The seed of every random choice of the run."""
        self.run_id = session.run_id
        """Random per run; part of the model name and of every key."""
        self.names = session.names
        """Fresh keys and namespaces, and how messages show things."""
        self.pages = session.pages
        """The pages written and the checks' random choices."""
        self.wire = session.wire
        """The objects handed to the backend."""
        self.calls = session.calls
        """Every backend call, under the deadline."""
        self.instances = session.instances(register_v2="v2" in claimed)
        """Configurations, host pools and the instances built."""
        self.io = PageIO(self.names, self.pages, self.calls, uses_v1="v1" in claimed, may_evict=may_evict)
        """Moving the suite's pages."""

    def claims(self, level: str) -> bool:
        """Whether ``level`` is claimed."""
        return level in self.claimed
