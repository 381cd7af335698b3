"""Two TP ranks of SGLang's Mooncake direct linker: two processes, one gloo TP group, one store on disk.

The Mooncake direct linker reads its TP rank from ``torch.distributed.get_rank(group=tp_group)``
(``params.attn_tp_cache_group or params.tp_cache_group``) once torch.distributed is initialized, so
a second rank needs a second process. ``run_ranks`` spawns two, joins them in a gloo process group
(world size 2, a ``file://`` rendezvous) whose TP group is a real ``new_group``, builds the release's
linker in each exactly as the linker suite does (a CPU KV cache, a fake store through the
``storage=`` seam, calls through the release's ``UnifiedCacheLinkerWrapper``), and runs one
scenario's steps in lockstep. Both ranks' stores are ``FileMooncakeStore``: one directory, one
file per object, published with an atomic rename, so each rank sees what the other wrote.

Stacks:
- ``replicated``: a DSA KV cache, whose direct-linker pool group is rank-replicated (MLA) on
  every pinned release: rank 1 offloads (LNK-20: True, reported True, nothing written), rank 0
  offloads, rank 1 looks up (LNK-21: found).
- ``sharded``: a hybrid Mamba stack (MLA full attention + a TP-sharded Mamba state), the
  direct-linker pool group that is not rank-replicated; SGLang builds it from 0.5.23 on (earlier
  releases build direct-linker groups only for DSA and DeepSeek-V4, both replicated). Each rank
  offloads and the other never finds those pages, while the writer does (LNK-21).

Every step is bounded: the parent waits ``STEP_TIMEOUT`` seconds for each report; a process
that goes silent is killed and the run fails naming the step it was in.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import queue
import time
import traceback
import urllib.parse
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

STEP_TIMEOUT = 60.0
"""Seconds the parent waits for the next report of a rank (a spawn + SGLang import is the slowest step)."""

MOONCAKE = "sglang.srt.mem_cache.storage.mooncake_store.mooncake_direct_linker"
ASSEMBLER = "sglang.srt.mem_cache.hybrid_cache.linker_pool_assembler"
MODEL = "hicache-linker-suite/model"
TEMP_PREFIX = ".partial-"

EVERY_RANK_WRITES = "every_rank_writes"
"""A variant of the release's linker whose ``offload_owner`` is True on every rank (LNK-20 broken)."""

TP_BLIND_NAMES = "tp_blind_names"
"""A variant whose object names leave the TP rank out although its pools are TP-sharded (LNK-21 broken)."""

PLANTED = (EVERY_RANK_WRITES, TP_BLIND_NAMES)


class FileObjects:
    """A store's objects as files of one directory, each published by an atomic rename."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.directory / urllib.parse.quote(key, safe="")

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._path(key).exists()

    def get(self, key: str, default: Optional[bytes] = None) -> Optional[bytes]:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return default

    def __setitem__(self, key: str, data: bytes) -> None:
        temp = self.directory / f"{TEMP_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
        temp.write_bytes(data)
        os.replace(temp, self._path(key))

    def names(self) -> list[str]:
        """The keys of every published object."""
        return sorted(
            urllib.parse.unquote(p.name) for p in self.directory.iterdir() if not p.name.startswith(TEMP_PREFIX)
        )


def file_store_class() -> type:
    """``FakeMooncakeStore`` (the linker suite's fake) over ``FileObjects`` instead of a per-process dict."""
    from tests.linker.mooncake_fake import FakeMooncakeStore

    class FileMooncakeStore(FakeMooncakeStore):
        def __init__(self, directory: Path, model_name: str) -> None:
            self.objects = FileObjects(directory)  # type: ignore[assignment]
            self.model_name = model_name
            self.store = self
            self.mla_suffix = self.mha_suffix = ""
            self.calls: list[tuple[str, Any]] = []

    return FileMooncakeStore


def _patch_runtime(release: str) -> Any:
    """Give the linker and the pool assembler the runtime context a server would publish; return the linker module."""
    import torch

    module: Any = importlib.import_module(MOONCAKE)
    module.get_model = lambda: SimpleNamespace(model_path=MODEL)
    module.get_parallel = lambda: SimpleNamespace(tp_size=1, attn_dcp_size=1)
    module.device_module = torch.cpu
    if hasattr(module, "get_memory"):
        module.get_memory = lambda: SimpleNamespace(hicache_storage_backend_extra_config=None)
    assembler: Any = importlib.import_module(ASSEMBLER)
    assembler.get_parallel = lambda: SimpleNamespace(tp_size=2, attn_dcp_size=1)
    assembler.get_memory = lambda: SimpleNamespace(enable_unified_memory=False)
    return module


def _dsa_kvcache(setup: Any) -> Any:
    import torch

    memory_pool = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    setup.pools.pop("swa", None)
    pool = setup.pools["kv"]
    pool.layers = [(layer[0],) for layer in pool.layers]

    class CpuDSAKVCache(memory_pool.DSATokenToKVPool):  # type: ignore[misc, name-defined]
        """A DSA KV cache whose buffers are given, not allocated (the release keeps some behind properties)."""

        kv_buffer: Any = None
        index_k_with_scale_buffer: Any = None

    kvcache = CpuDSAKVCache.__new__(CpuDSAKVCache)
    kvcache.page_size = pool.slots_per_page
    kvcache.layer_num = pool.num_layers
    kvcache.kv_buffer = [layer[0] for layer in pool.layers]
    pages = pool.num_slots // pool.slots_per_page
    kvcache.index_k_with_scale_buffer = [torch.zeros(pages, 6, dtype=torch.uint8) for _ in pool.layers]
    return kvcache


MAMBA_SLOTS = 8


def _mamba_stack(setup: Any, params: Any) -> Any:
    """A hybrid Mamba stack: MLA full attention on layers 0 and 2, a Mamba state on layers 1 and 3."""
    import torch

    memory_pool = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    setup.pools.pop("swa", None)
    pool = setup.pools["kv"]
    pool.layers = [(layer[0],) for layer in pool.layers]
    full = memory_pool.MLATokenToKVPool.__new__(memory_pool.MLATokenToKVPool)
    full.page_size = pool.slots_per_page
    full.layer_num = pool.num_layers
    full.kv_buffer = [layer[0] for layer in pool.layers]
    full.register_layer_transfer_counter = lambda counter: None
    kvcache = memory_pool.HybridLinearKVPool.__new__(memory_pool.HybridLinearKVPool)
    kvcache.full_kv_pool = full
    kvcache.full_attention_layer_id_mapping = {0: 0, 2: 1}
    kvcache.start_layer = 0
    kvcache.page_size = pool.slots_per_page
    generator = torch.Generator().manual_seed(setup.tp_rank + 11)

    def state(width: int) -> Any:  # per Mamba layer, one row per state slot
        return torch.randint(0, 256, (2, MAMBA_SLOTS, width), dtype=torch.uint8, generator=generator)

    params.req_to_token_pool = SimpleNamespace(
        mamba_pool=SimpleNamespace(
            mamba_cache=SimpleNamespace(temporal=state(12), conv=(state(6),)), num_mamba_layers=2
        ),
        mamba_map={1: 0, 3: 1},
        mamba_ckpt_pool=None,
        short_conv_pool=SimpleNamespace(enabled=False),
        ngram_pool=SimpleNamespace(enabled=False),
        register_layer_transfer_counter=lambda counter: None,
    )
    params.sidecar_draft_device_pools = ()
    return kvcache


def planted_class(module: Any, variant: str) -> type:
    """The planted subclass ``variant`` of ``module``'s MooncakeDirectLinker."""
    cls = module.MooncakeDirectLinker
    if variant == EVERY_RANK_WRITES:

        class EveryRankWritesLinker(cls):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.offload_owner = True

        return EveryRankWritesLinker
    if variant == TP_BLIND_NAMES:

        class TpBlindNamesLinker(cls):  # type: ignore[misc, valid-type]
            def __init__(self, server_args: Any, params: Any, **kwargs: Any) -> None:
                super().__init__(server_args, params, **kwargs)
                # the names a replicated group gets: CP and PP kept, the TP rank left out
                suffix = module._storage_suffix(
                    rank_replicated=True, tp_rank=0, attn_cp_rank=params.attn_cp_rank, pp_rank=params.pp_rank
                )
                self.storage.mla_suffix = self.storage.mha_suffix = suffix

        return TpBlindNamesLinker
    raise ValueError(f"variant: {variant!r} is none of {PLANTED}")


def build_linker(release: str, stack: str, setup: Any, tp_group: Any, store_dir: Path, variant: Optional[str]) -> Any:
    """The release's MooncakeDirectLinker for ``stack`` with ``tp_group`` as its TP cache group."""
    from hicache_contracts.linker.harness import linker_arguments

    module = _patch_runtime(release)
    component_type = importlib.import_module("sglang.srt.mem_cache.unified_cache.component_type")
    components = {component_type.ComponentType.FULL}
    server_args, params, extra = linker_arguments(setup)
    params.mtp_draft_device_pools = ()
    params.tp_cache_group = tp_group
    if stack == "replicated":
        kvcache = _dsa_kvcache(setup)
    else:
        kvcache = _mamba_stack(setup, params)
        components.add(component_type.ComponentType.MAMBA)
    params.token_to_kv_pool_allocator = SimpleNamespace(get_kvcache=lambda: kvcache)
    cls = planted_class(module, variant) if variant else module.MooncakeDirectLinker
    keywords: dict[str, Any] = {"components": components, "storage": file_store_class()(store_dir, MODEL)}
    if release == "0.5.23":
        keywords.update(extra_config=extra, forward_stream=None)
    return cls(server_args, params, **keywords)


def sharded_stack_built(release: str) -> Optional[str]:
    """None when ``release`` builds a direct-linker pool group that is not rank-replicated (hybrid Mamba), else why not."""
    module = importlib.import_module(ASSEMBLER)
    if hasattr(module, "_build_mamba_device_pool_group"):
        return None
    return (
        f"SGLang {release} builds direct-linker pool groups only for DSA and DeepSeek-V4 stacks, both "
        "rank-replicated: no stack has TP-sharded pools"
    )


# ----------------------------------------------------------------------------- the ranks' side


@dataclass
class Rank:
    """One process's linker, driven through the release's wrapper, and what it tells the parent."""

    rank: int
    release: str
    stack: str
    driver: Any
    store: FileObjects
    report: Callable[..., None]
    barrier: Callable[[], None]


def _transfers(ctx: Rank, keys: list[str], with_indices: bool) -> list[Any]:
    import torch

    from hicache_contracts.linker.harness import make_transfer

    slots = torch.arange(0, 4 * len(keys)) if with_indices else None
    transfers = [make_transfer("kv", keys, slots)]
    if ctx.stack == "sharded":  # the Mamba state of the last page, one slot per page
        state = torch.tensor([MAMBA_SLOTS - 1]) if with_indices else None
        transfers.append(make_transfer("mamba", keys[-1:], state, policy="trailing_pages"))
    return transfers


def _offload(ctx: Rank, keys: list[str]) -> tuple[bool, list[bool]]:
    returned = ctx.driver.offload(_transfers(ctx, keys, True))
    reported = ctx.driver.offload_results(1) if returned else []
    return returned, reported


def _lookup(ctx: Rank, keys: list[str]) -> list[int]:
    return sorted(ctx.driver.lookup(f"rid-{ctx.rank}", _transfers(ctx, keys, False)))


def _keys(name: str) -> list[str]:
    import hashlib

    return [hashlib.sha256(f"{name}/{n}".encode()).hexdigest() for n in range(2)]


def replicated_steps(ctx: Rank) -> None:
    peer_keys, owner_keys = _keys("offloaded-by-rank-1"), _keys("offloaded-by-rank-0")
    step = "rank 1 offloads replicated pages"
    if ctx.rank == 1:
        before = len(ctx.store.names())
        returned, reported = _offload(ctx, peer_keys)
        time.sleep(0.1)  # an offload thread that writes anyway has had its chance
        writes = sum(1 for name, _ in ctx.driver.linker.storage.calls if name == "batch_set_v2")
        written = len(ctx.store.names()) - before
        ok = returned and reported == [True] and writes == 0 and written == 0
        ctx.report(
            step,
            "LNK-20",
            ok,
            f"offload returned {returned}, reported {reported}, "
            f"{writes} batch_set_v2 call(s), {written} object(s) written",
        )
    ctx.barrier()
    step = "rank 0 does not find rank 1's pages"
    if ctx.rank == 0:
        found = _lookup(ctx, peer_keys)
        ctx.report(step, "LNK-20", not found, f"the owner's lookup of rank 1's offload gave {found}")
    ctx.barrier()
    step = "rank 0 offloads replicated pages"
    if ctx.rank == 0:
        before = len(ctx.store.names())
        returned, reported = _offload(ctx, owner_keys)
        written = len(ctx.store.names()) - before
        ok = returned and reported == [True] and written > 0
        ctx.report(step, "LNK-20", ok, f"offload returned {returned}, reported {reported}, {written} object(s) written")
    ctx.barrier()
    step = "rank 1 finds the owner's pages"
    if ctx.rank == 1:
        found = _lookup(ctx, owner_keys)
        ctx.report(step, "LNK-21", 2 in found, f"rank 1's lookup of rank 0's 2 pages gave {found}")
    ctx.barrier()


def sharded_steps(ctx: Rank) -> None:
    for writer in (0, 1):
        keys = _keys(f"sharded-by-rank-{writer}")
        step = f"rank {writer} offloads its shard"
        if ctx.rank == writer:
            before = len(ctx.store.names())
            returned, reported = _offload(ctx, keys)
            written = len(ctx.store.names()) - before
            ok = returned and reported == [True] and written > 0
            ctx.report(
                step, "LNK-21", ok, f"offload returned {returned}, reported {reported}, {written} object(s) written"
            )
        ctx.barrier()
        step = f"rank {1 - writer} does not find rank {writer}'s pages; rank {writer} does"
        found = _lookup(ctx, keys)
        if ctx.rank == writer:
            ctx.report(step + " (writer)", "LNK-21", 2 in found, f"rank {writer}'s own lookup gave {found}")
        else:
            ctx.report(step, "LNK-21", not found, f"rank {ctx.rank}'s lookup of rank {writer}'s pages gave {found}")
        ctx.barrier()


SCENARIOS = {"replicated": replicated_steps, "sharded": sharded_steps}


def rank_main(rank: int, release: str, stack: str, workdir: str, variant: Optional[str], reports: Any) -> None:
    """A rank's process: join the group, build the linker, run the scenario, report each step."""
    state = {"step": "start"}

    def report(step: str, clause: str, ok: bool, detail: str) -> None:
        reports.put(("step", rank, step, clause, bool(ok), detail))

    def enter(step: str) -> None:
        state["step"] = step
        reports.put(("enter", rank, step))

    try:
        enter("import the release")
        from hicache_contracts.sglang_release import use_release

        use_release(release, fetch=False)
        import torch.distributed as dist

        from hicache_contracts.linker.harness import WrapperDriver, fresh_setup

        importlib.import_module(MOONCAKE)
        enter("join the gloo group")
        rendezvous = Path(workdir) / "rendezvous"
        dist.init_process_group(
            "gloo",
            init_method=rendezvous.as_uri(),
            rank=rank,
            world_size=2,
            timeout=timedelta(seconds=STEP_TIMEOUT),
        )
        tp_group: Any = dist.new_group([0, 1], backend="gloo")  # a ProcessGroup: both ranks are in it
        enter("build the linker")
        setup = fresh_setup(Path(workdir), seed=rank)
        setup.tp_rank, setup.tp_size, setup.rank_replicated = rank, 2, stack == "replicated"
        store_dir = Path(workdir) / "store"
        linker = build_linker(release, stack, setup, tp_group, store_dir, variant)
        torch_rank = dist.get_rank(group=tp_group)
        reports.put(("info", rank, f"torch.distributed TP rank {torch_rank}, offload_owner={linker.offload_owner}"))
        driver = WrapperDriver(linker, release)

        def barrier() -> None:
            dist.barrier(group=tp_group)

        ctx = Rank(rank, release, stack, driver, FileObjects(store_dir), report, barrier)
        ctx.barrier()
        enter("run the scenario")
        SCENARIOS[stack](ctx)
        enter("close the linker")
        driver.close()
        dist.barrier(group=tp_group)
        dist.destroy_process_group()
        reports.put(("done", rank))
    except BaseException as error:  # noqa: BLE001 - the parent names the step
        reports.put(("error", rank, state["step"], f"{error!r}\n{traceback.format_exc()[-2000:]}"))
        raise SystemExit(1) from None


# ----------------------------------------------------------------------------- the parent's side


@dataclass
class StepVerdict:
    rank: int
    step: str
    clause: str
    ok: bool
    detail: str


@dataclass
class RanksRun:
    """What the two ranks reported: each step's verdict, or the step a rank failed or hung in."""

    stack: str
    steps: list[StepVerdict] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    failure: Optional[str] = None
    seconds: float = 0.0

    def failed(self, clause: Optional[str] = None) -> list[StepVerdict]:
        return [s for s in self.steps if not s.ok and (clause is None or s.clause == clause)]

    def verdict(self, clause: str) -> str:
        mine = [s for s in self.steps if s.clause == clause]
        if not mine:
            return "not checked"
        return "fail" if any(not s.ok for s in mine) else "pass"

    def render(self) -> str:
        lines = [f"{self.stack} stack, {self.seconds:.1f} s"] + [f"  {line}" for line in self.info]
        for s in self.steps:
            lines.append(f"  [{'pass' if s.ok else 'FAIL'}] {s.clause} rank {s.rank}: {s.step}: {s.detail}")
        if self.failure:
            lines.append(f"  run failed: {self.failure}")
        return "\n".join(lines)


def run_ranks(release: str, stack: str, workdir: Path, variant: Optional[str] = None) -> RanksRun:
    """Run ``stack``'s scenario on two ranks; every wait bounded by ``STEP_TIMEOUT``."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    workdir.mkdir(parents=True, exist_ok=True)
    procs = [
        context.Process(target=rank_main, args=(r, release, stack, str(workdir), variant, reports), daemon=True)
        for r in (0, 1)
    ]
    run = RanksRun(stack)
    where = {0: "start", 1: "start"}
    done: set[int] = set()
    started = time.monotonic()
    for proc in procs:
        proc.start()
    last = {0: started, 1: started}
    try:
        while len(done) < 2 and run.failure is None:
            try:
                message = reports.get(timeout=0.2)
            except queue.Empty:
                now = time.monotonic()
                for r, proc in enumerate(procs):
                    if r in done:
                        continue
                    if proc.exitcode is not None:
                        run.failure = f"rank {r} exited with code {proc.exitcode} in step {where[r]!r}"
                    elif now - last[r] > STEP_TIMEOUT:
                        hung = [f"rank {h} in step {where[h]!r}" for h in (0, 1) if h not in done]
                        run.failure = f"no report for {STEP_TIMEOUT:.0f} s: killed {', '.join(hung)}"
                    if run.failure:
                        break
                continue
            kind, rank = message[0], message[1]
            last[rank] = time.monotonic()
            if kind == "enter":
                where[rank] = message[2]
            elif kind == "step":
                where[rank] = message[2]
                run.steps.append(StepVerdict(rank, *message[2:]))
            elif kind == "info":
                run.info.append(f"rank {rank}: {message[2]}")
            elif kind == "error":
                run.failure = f"rank {rank} raised in step {message[2]!r}: {message[3]}"
            elif kind == "done":
                done.add(rank)
        for proc in procs:
            proc.join(timeout=5 if run.failure is None else 0.5)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        reports.close()
    run.seconds = time.monotonic() - started
    if run.failure is None:
        bad = [f"rank {r} exited {p.exitcode}" for r, p in enumerate(procs) if p.exitcode not in (0, None)]
        if bad:
            run.failure = "; ".join(bad)
    return run
